"""The answer-extraction step that runs before every rule scorer (and before the LLM judge).

:func:`extract_answer` finds the **one answer span** of a prediction and says why it chose it. The metric and
the single-commitment rule (:mod:`agentflow_env.scoring.commitment`) see only that span, so text outside it
can neither pay nor hurt. Where the span is, in order:

1. ``<answer>..</answer>`` (the last block; blocks with different contents are a hedge), and inside it:
2. ``\\boxed{..}`` / ``\\fbox{..}`` (the last; boxes with different contents are a hedge; the rest of the
   box's line may not offer an alternative: ``\\boxed{204} or 205`` is a hedge);
3. an answer line: ``Answer:``, ``Final Answer:``, ``**Final answer**:``, a ``### Final Answer`` heading
   (the value is on the next line), or a sentence "the (final) answer is .."; the last one counts, and
   answer lines with different values are a hedge;
4. else the first non-empty line, and in it the first sentence.

Then the span is cleaned: Markdown emphasis, surrounding quotes (``“Meg Ryan”``) and a final full stop are
dropped; leading filler ("I believe it is", "The expression is", "So,") is dropped; a clause that negates
an alternative ("204, not 205", "C is correct; A and B are not", "not 205 but 204") is dropped, so a
negated value is not a candidate; a trailing explanation ("204, because I checked it", "204 (12 times
17)") is cut off. Occurrences of a gold answer are never split or cut ("John F. Kennedy", "St. Louis").

Text after the span is explanation, but it may not name a rival answer: a later line or sentence, a cut-off
explanation or the rest of a box's line that is itself a bare value different from the span ("204\\n205",
"Paris. London.", "204 (205)"), or that offers an alternative ("(or 205)", "maybe 205"), makes the answer a
hedge. A working line whose value equals the span ("204\\n12*17 = 204") or that starts with a label
("Explanation:", "Check:") is not a rival.

Normalisation of equal values is applied to the span too (:func:`normalize_span`): ``\\text{..}`` and
``\\mbox{..}`` become plain words (so they separate tokens), thousands separators written as spaces, thin
spaces or ``{,}`` are closed (``2 338 520``), and scientific notation becomes a plain number
(``2.33852 \\times 10^{6}`` is ``2338520``). :func:`number_with_unit` reads one number with its unit
(``22 cm^2``, ``$1,000``, ``17%``) for the scorers that compare numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from agentflow_env.scoring.cued import Cued, lowered
from agentflow_env.scoring.markers import GOLD_MARK, alternative_marker, normalize_text, value_of

__all__ = [
    "UNITS",
    "AnswerSpan",
    "extract_answer",
    "normalize_span",
    "normalize_text",
    "number_with_unit",
]

MAX_SPAN_CHARS = 20_000
_GOLD = GOLD_MARK


# ------------------------------------------------------------------ numbers, units and notation
UNITS = frozenset(
    """m cm mm km nm um µm μm in inch inches ft foot feet yd yard yards mi mile miles meter meters metre metres
    centimeter centimeters centimetre centimetres millimeter millimeters kilometer kilometers kilometre kilometres
    g kg mg lb lbs pound pounds oz ounce ounces ton tons tonne tonnes gram grams kilogram kilograms
    s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks month months
    year years yr yrs l L ml mL liter liters litre litres gal gallon gallons
    mph kph kmh kmph km/h m/s cm/s ft/s
    degree degrees deg ° °C °F K C F rad radian radians
    dollar dollars usd USD cent cents euro euros eur EUR pound sterling yen
    percent per cent pct
    unit units sq square cubic squared cubed
    J kJ W kW MW V A Hz kHz MHz GHz Pa kPa N mol
    people persons items points""".split()
)
_CURRENCY = r"(?:\\\$|\$|€|£|¥|USD\s*|EUR\s*)"
_UNIT_TAIL = re.compile(
    r"\s*(?:\\,|\\;|\\ |~)?\s*(?:\\(?:mathrm|text|textrm|mbox|operatorname)\s*\{\s*([^{}]{1,24}?)\s*\}|"
    r"([A-Za-z°µμ]+(?:/[A-Za-z]+)?))"
    r"(?:\s*(?:\^\s*\{?\s*-?\d\s*\}?|[²³]))?"
)
_SCI = re.compile(
    r"(?<![\d.])(-?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|×|·|\*|x)\s*10\s*\^\s*(?:\{\s*([-+]?\d{1,2})\s*\}|([-+]?\d{1,2}))"
    r"|(?<![\w.])(-?\d+(?:\.\d+)?)[eE]([-+]?\d{1,2})(?![\w.])"
)
_SCI = Cued(_SCI, re.compile(r"\^|\d[eE]"))  # a power of ten is written with "^", or a digit then "e"
_THOUSANDS_SPACES = re.compile(r"(?<![\d.,])\d{1,3}(?:(?:\\,|\\;|\\ |\{,\}|[ \u2009\u202f\u2007'])\d{3})+(?![\d])")
_BRACE_COMMA = re.compile(r"(?<=\d)\{,\}(?=\d{3})")
_BRACE_COMMA = Cued(_BRACE_COMMA, re.compile(r"\{,\}"))
_TEXT_MACRO = re.compile(r"\\(?:text|mbox|textrm|textnormal|textup|textit|textbf|hbox)\s*\{([^{}]*)\}")


def _plain(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    digits = f"{float(value):.12g}"
    return digits


def _sci_sub(m: re.Match[str]) -> str:
    mantissa = m.group(1) if m.group(1) is not None else m.group(4)
    exponent = m.group(2) or m.group(3) or m.group(5)
    try:
        return _plain(Fraction(mantissa) * Fraction(10) ** int(exponent))
    except (ValueError, ZeroDivisionError):
        return m.group(0)


def _join_groups(m: re.Match[str], gold_digits: frozenset[str]) -> str:
    """``2 338 520`` -> ``2338520``; two groups of three (``205 204``) stay two numbers unless they spell
    a gold number."""
    groups = re.split(r"\\,|\\;|\\ |\{,\}|[ \u2009\u202f\u2007']", m.group(0))
    if (
        len(groups) == 2
        and len(groups[0]) == 3
        and not re.search(r"\\,|\{,\}|[\u2009\u202f]", m.group(0))
        and "".join(groups).lstrip("-") not in gold_digits
    ):
        return m.group(0)
    return "".join(groups)


def normalize_span(text: str, gold_digits: frozenset[str] = frozenset()) -> str:
    """Equal values written one way: ``\\text{..}`` as plain words, thousands separators closed,
    scientific notation as a plain number (see the module doc). ``gold_digits`` (the golds' numbers as
    digit strings) lets two groups of three join when they spell a gold (``947 921``)."""
    text = _TEXT_MACRO.sub(lambda m: f" {m.group(1)} ", text)
    text = _BRACE_COMMA.sub(",", text)
    text = _THOUSANDS_SPACES.sub(lambda m: _join_groups(m, gold_digits), text)
    return _SCI.sub(_sci_sub, text)


_ONE_NUMBER = re.compile(
    rf"\s*{_CURRENCY}?\s*(-?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?|-?\.\d+|-?\d+\s*/\s*\d+"
    r"|-?\\[dt]?frac\s*\{\s*-?\d+(?:\.\d+)?\s*\}\s*\{\s*-?\d+(?:\.\d+)?\s*\})\s*(%|\\%|percent\b)?"
)


def number_with_unit(text: str) -> tuple[Fraction, str] | None:
    """``(value, unit)`` when ``text`` is one number with at most a currency sign and a unit
    (``22 cm^2`` -> (22, ``cm^2``), ``$1,000`` -> (1000, ``$``), ``2 338 520``, ``2.3e6``, ``17%``);
    else ``None``. The unit is ``""`` when there is none."""
    text = normalize_span(normalize_text(text)).strip()
    if len(text) > 2 and text.startswith("$") and text.endswith("$"):
        text = text.strip("$").strip()
    text = re.sub(r"^\s*[*_`\"'“”]+|[*_`\"'“”.]+\s*$", "", text).strip()
    had_currency = bool(re.match(_CURRENCY, text))
    m = _ONE_NUMBER.match(text)
    if m is None:
        return None
    raw, percent = m.group(1), m.group(2)
    rest = text[m.end() :]
    unit = "%" if percent else ("$" if had_currency else "")
    if rest.strip():
        u = _UNIT_TAIL.fullmatch(rest)
        if u is None:
            return None
        word = (u.group(1) or u.group(2) or "").strip()
        if word not in UNITS and word.lower() not in UNITS and word.split("/")[0] not in UNITS:
            return None
        unit = re.sub(r"\s+", "", rest).replace("\\mathrm", "").replace("\\text", "").strip("{}")
    try:
        if "frac" in raw:
            a, b = re.findall(r"-?\d+(?:\.\d+)?", raw)
            value = Fraction(a) / Fraction(b)
            if raw.lstrip().startswith("-"):
                value = -abs(value)
        else:
            value = Fraction(raw.replace(",", "").replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None
    return value, unit


def same_unit(a: str, b: str) -> bool:
    """Units that may stand for each other: equal, or one of them absent."""
    if not a or not b:
        return True
    norm = {"percent": "%", "\\%": "%", "pct": "%", "usd": "$", "dollars": "$", "dollar": "$", "\\$": "$"}
    a, b = a.lower(), b.lower()
    return norm.get(a, a) == norm.get(b, b)


# ------------------------------------------------------------------ where the answer is
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL | re.IGNORECASE)
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_LINE = re.compile(
    r"(?im)^[ \t>*_#-]*(?:\d{1,2}[.)]\s*)?[*_]*\s*(?:my\s+|the\s+)?(?:final\s+|correct\s+)?answer"
    r"\s*(?:\*\*)?\s*(?:[:：]|-\s)\s*(?:\*\*)?(.*)$"
)
_ANSWER_HEADING = re.compile(r"(?im)^[ \t]*#{1,6}[ \t]*(?:\*\*)?(?:final\s+)?answer(?:\*\*)?[ \t:]*$")
_ANSWER_PHRASE = re.compile(
    r"(?i)\b(?:the|my|our)\s+(?:final\s+|correct\s+|best\s+)?answer\s+(?:is|would\s+be|should\s+be|will\s+be)\b\s*:?\s*"
)


def _squeeze(text: str) -> str:
    return "".join(text.split()).lower().rstrip(".")


def _boxes(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every balanced ``\\boxed{..}`` (one pass, so unclosed boxes cost linear time)."""
    box_braces = {m.end() - 1 for m in _BOX_START.finditer(text)}
    spans, stack = [], []
    for j, ch in enumerate(text):
        if ch == "{":
            stack.append(j if j in box_braces else -1)
        elif ch == "}" and stack:
            opened = stack.pop()
            if opened >= 0:
                spans.append((opened + 1, j))
    return sorted(spans)


@lru_cache(maxsize=1024)
def _gold_finder(original: str) -> tuple[re.Pattern[str], str] | None:
    """The pattern that finds the gold ``original`` (case- and spacing-insensitive, whole words, quotes and a final
    full stop aside) and the tail it may carry (a final stop or quote), or ``None`` for a gold under two characters."""
    original = original.strip()
    gold = original.strip(_EDGES).rstrip(".!?").strip(_EDGES).strip()
    if len(gold) < 2:
        return None
    tail = original[original.find(gold) + len(gold) :] if gold in original else ""
    body = r"\s*".join(re.escape(tok) for tok in gold.split())
    left = r"(?<!\w)" if gold[0].isalnum() else ""
    right = r"(?!\w)" if gold[-1].isalnum() else ""
    return re.compile(left + body + right, re.IGNORECASE), tail


def _gold_intervals(text: str, golds: Sequence[str]) -> list[tuple[int, int]]:
    """Where the golds occur in ``text`` (case- and spacing-insensitive, whole words, quotes and a final
    full stop aside)."""
    out = []
    for original in golds:
        finder = _gold_finder(original)
        if finder is None:
            continue
        pattern, tail = finder
        for m in pattern.finditer(text):
            end = m.end() + len(tail) if tail and text.startswith(tail, m.end()) else m.end()
            out.append((m.start(), end))
    return out


def _inside(pos: int, intervals: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in intervals)


_ABBREV = re.compile(
    r"(?:(?<!\w)(?i:mr|mrs|ms|dr|st|jr|sr|vs|etc|inc|co|ltd|mt|ft|prof|gen|col|lt|sgt|fig|eq|approx|ca|vol)"
    r"|(?:^|(?<=[\s.]))[A-Z]|(?<!\w)(?:[A-Za-z]\.){1,3}[A-Za-z])$"
)
_SENTENCE_END = re.compile(r"[.!?。](?=\s|$)")


def _sentences(line: str, golds: Sequence[str]) -> list[str]:
    """``line`` split into sentences (not at initials, abbreviations, decimals or inside a gold)."""
    protected = _gold_intervals(line, golds)
    out, start = [], 0
    for m in _SENTENCE_END.finditer(line):
        if _inside(m.start(), protected):
            continue
        before = line[start : m.start()]
        ends_gold = any(b == m.start() for _a, b in protected)  # "Jayavarman I." ends a sentence
        if m.group(0) == "." and not ends_gold and _ABBREV.search(before):
            continue
        out.append(line[start : m.end()])
        start = m.end()
    out.append(line[start:])
    return [s.strip() for s in out if s.strip()]


# ------------------------------------------------------------------ cleaning the span
_EMPHASIS = re.compile(r"\*\*(?=\S)|(?<=\S)\*\*|(?<![\w\\])__(?=\w)|(?<=\w)__(?!\w)|`")
_EDGES = "\"'“”‘’«»„‚「」『』`*_ \t"
_FILLER_PREFIX = re.compile(
    r"(?i)^(?:(?:so|thus|therefore|hence|then|ok(?:ay)?|well|overall|in\s+conclusion|in\s+summary|finally)\b\s*,?\s*"
    r"|i\s+(?:believe|think|guess|would\s+say|am\s+(?:pretty\s+|fairly\s+|quite\s+)?(?:sure|confident|certain))\b\s*(?:that\b)?\s*,?\s*"
    r"|(?:i'm|i\s+am)\s+(?:pretty\s+|fairly\s+|quite\s+)?(?:sure|confident|certain)\b\s*(?:that\b)?\s*,?\s*"
    r"|(?:it|this|that)\s*(?:'s|\s+is|\s+was|\s+would\s+be|\s+should\s+be|\s+must\s+be)\b\s*:?\s*"
    r"|(?:the|my|our)\s+(?:final\s+|correct\s+|best\s+)?(?:answer|result|value|expression|solution|number|total|"
    r"option|choice|letter|response|equation)\s+(?:is|would\s+be|should\s+be|will\s+be|equals|=)\s*:?\s*"
    r"|(?:final\s+)?answer\s*[:：]\s*"
    r"|(?:the\s+)?answer\s+is\s*:?\s*"
    r")"
)
_FILLER_SUFFIX = re.compile(
    r"(?i)\s*,?\s*(?:i\s+(?:think|believe|guess)|i'm\s+(?:pretty\s+|fairly\s+)?(?:sure|confident)|"
    r"if\s+i'm\s+not\s+mistaken|for\s+sure|in\s+total|in\s+all|exactly|"
    r"(?:is|was|would\s+be|should\s+be)\s+(?:the\s+|my\s+)?(?:correct\s+|right\s+|final\s+|best\s+)?"
    r"(?:answer|one|choice|option|solution|result))\s*[.!]?\s*$"
)
# the last word of each filler above: a span that ends otherwise (after spaces and stops) holds none, and the
# pattern, which tries every position, is not run
_FILLER_ENDS = (
    "think", "believe", "guess", "sure", "confident", "mistaken", "total", "all", "exactly",
    "answer", "one", "choice", "option", "solution", "result",
)  # fmt: skip
_NEGATION = re.compile(
    r"(?i)\bnot\b|n't\b|\b(?:incorrect|wrong|false|rather\s+than|instead\s+of|as\s+opposed\s+to|ruled\s+out|"
    r"eliminated?|excluded?|rejected?)\b"
)
_EXPLANATION = re.compile(
    r"(?i)(?:,\s*|\s+)(?=(?:because|since|as\s+(?:it|this|that|the|shown|computed|calculated|verified|checked|"
    r"found|given|stated|per)|which|given\s+that|due\s+to|based\s+on|according\s+to|from\s+(?:the|my|our)\b|"
    r"using|via|by\s+(?:using|computing|calculating|checking|adding|multiplying)|after\s+(?:checking|computing)|"
    r"as\s+per|that\s+is|i\.e\.|e\.g\.|where|with\s+(?:the|a)\b|so\s+(?:the|it)\b|confirmed|verified|"
    r"computed|calculated|obtained)\b)"
    r"|\s+[—–]\s+(?=[A-Za-z])|\s+--\s+(?=[A-Za-z])|\s*[—–](?=\s*[a-z])|\s+-\s+(?=[a-z])|\s*:\s+(?=[a-z])"
    r"|(?<![-+*/×÷=–—])\s+(?=\((?=[^()]*[A-Za-z]{2})\s*[^()\s]+\s+[^()\s]+\s+[^()]*\))"
)
_HEDGE_WORDS = re.compile(
    r"(?i)\b(?:or|maybe|perhaps|possibly|probably|likely|could|might|either|alternatively|otherwise|"
    r"unless|nor|vs|versus|guess|unsure|uncertain)\b|\?"
)
_LABEL = re.compile(
    r"(?i)^\s*[*_#>]*\s*(?:explanation|reason(?:ing)?|because|since|note|check(?:ed|ing)?|verification|verify|"
    r"proof|working|work|steps?|solution|justification|why|derivation|calculation|details?|source|sources|"
    r"rationale|evidence|hint|so|thus|therefore|hence|here|this|that|which|it|i|we|the|a|an|to|by|from|in|on|"
    r"as|using|with|after|given|sanity)\b"
)


def _split_clauses(span: str, golds: Sequence[str]) -> list[str]:
    protected = _gold_intervals(span, golds)
    cuts = []
    depth = 0
    for i, ch in enumerate(span):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch in ",;" and depth == 0 and not _inside(i, protected):
            if ch == "," and re.match(r",\d{3}(?!\d)", span[i:]) and i > 0 and span[i - 1].isdigit():
                continue
            if ch == "," and re.match(r",\s*\d{4}\b", span[i:]):  # "June 20, 1837"
                continue
            cuts.append(i)
    for m in re.finditer(r"(?i)\s+but\s+", span):
        if not _inside(m.start(), protected):
            cuts.append(m.start())
    pieces, start = [], 0
    for c in sorted(cuts):
        pieces.append(span[start:c])
        start = c
    pieces.append(span[start:])
    return pieces


def _drop_negated(span: str, golds: Sequence[str], kept: Sequence[str] = ()) -> str:
    """The span without clauses that negate an alternative ("not 205", "A and B are not"); a clause that
    holds a gold stays, and ``kept`` texts (option texts) are never split."""
    if kept and any(a == 0 and b >= len(span.rstrip(".!? ")) for a, b in _gold_intervals(span, kept)):
        return span  # the whole span is one kept text
    pieces = _split_clauses(span, list(kept) or list(golds))
    if len(pieces) == 1:
        piece = pieces[0]
        m = re.search(r"(?i)\s+(?:rather\s+than|instead\s+of|as\s+opposed\s+to)\s+", piece)
        if m and not _inside(m.start(), _gold_intervals(piece, golds)):
            return piece[: m.start()]
        return span
    kept = [p for p in pieces if not (_NEGATION.search(p) and not _gold_intervals(p, golds))]
    if len(kept) == len(pieces):
        return span
    out = "".join(kept).strip()
    return re.sub(r"^[,;]\s*|^\s*but\s+", "", out, flags=re.I).strip()


_DOLLARS = re.compile(r"^\$(.*)\$$", re.S)
_MATH_DELIMITERS = re.compile(r"^\\\((.*)\\\)$|^\\\[(.*)\\\]$", re.S)
_FINAL_STOPS = re.compile(r"[.!。]+$")
_ITEM_MARK = re.compile(r"^[-•*]\s+|^\d{1,2}[.)]\s+(?=\D)")


def _strip_edges(span: str) -> str:
    prev = None
    while prev != span:
        prev = span
        span = _EMPHASIS.sub("", span) if "**" in span or "__" in span or "`" in span else span
        span = span.strip(_EDGES).strip()
        span = _DOLLARS.sub(r"\1", span) if span.count("$") == 2 else span
        if span.startswith("\\"):
            span = _MATH_DELIMITERS.sub(lambda m: m.group(1) or m.group(2) or "", span)
        span = _FINAL_STOPS.sub("", span).strip() if span.rstrip("\n").endswith((".", "!", "。")) else span.strip()
        if span[:1] in ("-", "•", "*") or span[:1].isdecimal():  # the only starts of an item mark
            span = _ITEM_MARK.sub("", span)
    return span


def _strip_filler(span: str, golds: Sequence[str]) -> str:
    protected = _gold_intervals(span, golds)
    for _ in range(4):
        m = _FILLER_PREFIX.match(span)
        if not m or not m.group(0) or any(a < m.end() for a, _b in protected if a < m.end() and a < 1):
            break
        if any(a < m.end() for a, _b in protected):
            break
        span = span[m.end() :].strip()
        span = _strip_edges(span)
        protected = _gold_intervals(span, golds)
    ending = lowered(span.rstrip().rstrip(".!").rstrip()[-9:])
    m = _FILLER_SUFFIX.search(span) if ending.endswith(_FILLER_ENDS) else None
    if m and not any(b > m.start() for _a, b in protected):
        span = span[: m.start()].strip()
    return span


@dataclass(frozen=True)
class AnswerSpan:
    """The one answer span of a prediction, why it was chosen, and why it hedges (``None``: it does not).

    ``explanation`` is the text cut off the span's end; ``rest`` the other text that was checked for rivals."""

    text: str
    reason: str
    hedge: str | None = None
    explanation: str = ""


def _rival(piece: str, span: str, is_candidate: Callable[[str, str], bool] | None, generic: bool = True) -> str | None:
    """Why ``piece`` (text outside the span) names another answer, or ``None``."""
    piece = normalize_span(piece) if generic else piece
    clean = _strip_edges(piece)
    while len(clean) > 1 and clean[0] in "([" and clean[-1] in ")]":
        clean = _strip_edges(clean[1:-1])
    if not clean:
        return None
    if _LABEL.match(clean) and not re.match(r"(?i)^\s*(?:the|a|an|it|i|this|that)\s*$", clean):
        if _HEDGE_WORDS.search(clean) and re.search(r"(?i)\b(?:or|maybe|perhaps|possibly|could|might)\b", clean):
            if re.search(
                r"(?i)\b(?:or|maybe|perhaps|possibly|could\s+(?:also\s+)?be|might\s+(?:also\s+)?be)\s+\S", clean
            ):
                return "the explanation offers another answer"
        return None
    if is_candidate is not None and is_candidate(clean, span):
        return "another line or sentence names another option"
    if not generic:
        return _hedge_words(clean)
    why = _hedge_words(clean)
    if why is not None:
        return why
    if _squeeze(clean) == _squeeze(span):
        return None
    unbulleted = re.sub(r"^\s*(?:[-•*]|\d{1,2}[.)])\s+", "", piece)
    if re.fullmatch(r"\s*[\"“«][^\"“”«»]{1,80}[\"”»][.!?]?\s*", unbulleted) and generic:
        return "another line or sentence names another answer (quoted)"
    tight = re.sub(r"\s*([-+*/^×÷=])\s*", r"\1", clean)
    words = tight.split()
    if "=" in tight:
        return _working_line(tight, span)
    if len(words) > 3:
        return None
    if any(re.search(r"\d", w) for w in words):
        return "another line or sentence names another value"
    all_words = [w.lower() for w in re.findall(r"[^\W\d_]+(?:'[a-z]+)?", clean)]
    content = [w for w in all_words if w not in _SIGN_OFF]
    if content and len(all_words) <= 4 and not any(w in _FUNCTION_WORDS for w in all_words):
        return "another line or sentence names another answer"
    return None


def _working_line(tight: str, span: str) -> str | None:
    """A later ``a = b`` line is working when its value equals the span's ("204\\n12*17 = 204")."""
    last, first_value = value_of(tight.split("=")[-1]), value_of(span.split("=")[-1])
    if last is not None and first_value is not None and last != first_value:
        return "a later line states another value"
    return None


def _hedge_words(clean: str) -> str | None:
    marker = alternative_marker(clean)
    if marker is not None:
        return f"the text after the answer offers alternatives ({marker})"
    if re.match(r"(?i)\s*(?:and|&|plus|also|as\s+well\s+as)\s+(?!I\b|we\b|it\b|this\b|that\b|the\s+)\S", clean):
        return "the text after the answer adds another answer"
    if re.search(
        r"(?i)(?:^|\s)(?:or|maybe|perhaps|possibly|alternatively|otherwise|either)\b|could\s+(?:also\s+)?be|"
        r"might\s+(?:also\s+)?be|\?\s*\S",
        clean,
    ):
        return "the text after the answer offers an alternative"
    return None


_FUNCTION_WORDS = frozenset(
    """i we you he she they it its this that these those the a an is was are were be been am has have had do did
    does with by from to of in on for as at and my our me us your his her their so because since which who what
    there here not no very all each every both using used checked found""".split()
)


_SIGN_OFF = frozenset(
    """done verified confirmed correct right sure certain thanks thank you hope helps good luck cheers
    final answer the a an i am it is this that so confident checked""".split()
)


def _clean(span: str, golds: Sequence[str], kept: Sequence[str] = ()) -> tuple[str, str]:
    """``(span, explanation)``: the cleaned span and the explanation cut off its end (``golds`` keep their
    clauses; ``kept`` texts are never cut)."""
    kept = list(kept) or list(golds)
    span = _strip_edges(span)
    span = _strip_filler(span, kept)
    span = _drop_negated(span, golds, kept)
    span = _strip_edges(span)
    explanation = ""
    protected = _gold_intervals(span, kept)
    for m in _EXPLANATION.finditer(span):
        if m.start() == 0 or any(a <= m.end() and m.start() < b for a, b in protected):
            continue
        head = span[: m.start()]
        if head.count("(") > head.count(")"):
            continue
        span, explanation = head, span[m.start() :]
        break
    span = _strip_filler(_strip_edges(span), kept)
    return _strip_edges(span), explanation


def extract_answer(
    prediction: object,
    golds: Iterable[object] = (),
    is_candidate: Callable[[str, str], bool] | None = None,
    generic_rivals: bool = True,
    normalize: bool = True,
    protect: Iterable[object] = (),
) -> AnswerSpan:
    """The one answer span of ``prediction`` (see the module doc). ``golds`` keep their own occurrences
    whole; ``is_candidate`` marks other text that is a bare answer of this task's kind (an option), and
    ``generic_rivals=False`` makes it the only judge of rivals (besides words that offer an alternative);
    ``protect`` are more texts never split or cut (option texts), ``normalize=False`` skips
    :func:`normalize_span`."""
    gold_list = [normalize_text(g) for g in golds if g is not None and str(g).strip()]
    kept = gold_list + [normalize_text(p) for p in protect if p is not None and str(p).strip()]
    digits = frozenset(d for g in gold_list for d in re.findall(r"\d+", g.replace(",", "").replace(" ", "")))

    def norm(value: str) -> str:
        return normalize_span(value, digits) if normalize else value

    text = normalize_text(prediction)
    tags = list(_ANSWER_TAG.finditer(text))
    if len({_squeeze(t.group(1)) for t in tags if t.group(1).strip()}) > 1:
        return AnswerSpan(tags[-1].group(1).strip(), "answer tag", "several <answer> blocks with different answers")
    reason_prefix, after_tag = "", ""
    if tags:
        after_tag = text[tags[-1].end() :].split("\n", 1)[0]
        text, reason_prefix = tags[-1].group(1), "answer tag, "
    spans = _boxes(text)
    if spans:
        contents = [text[a:b] for a, b in spans]
        if len({_squeeze(c) for c in contents}) > 1:
            return AnswerSpan(contents[-1].strip(), reason_prefix + "boxed", "several boxed answers")
        start, end = spans[-1]
        raw = contents[-1]
        tail = text[end + 1 :].split("\n", 1)[0]
        span, explanation = _clean(norm(raw), gold_list, kept)
        hedge = _check_rest(span, [tail, explanation, after_tag], is_candidate, generic_rivals)
        return _finish(span, reason_prefix + "boxed", hedge, explanation)
    value, reason, rest = _answer_line(text, gold_list, kept, norm)
    if value is None:
        lines = [ln for ln in text.split("\n") if ln.strip()]
        if not lines:
            return AnswerSpan("", reason_prefix + "empty")
        first = lines[0]
        sentences = _sentences(first, kept)
        value = sentences[0] if sentences else first
        reason = "first sentence" if len(sentences) > 1 else "first line"
        rest = sentences[1:] + lines[1:]
    elif isinstance(value, tuple):
        return AnswerSpan(value[0], reason_prefix + reason, value[1])
    span, explanation = _clean(norm(str(value)), gold_list, kept)
    hedge = _check_rest(span, [explanation, after_tag, *rest], is_candidate, generic_rivals)
    return _finish(span, reason_prefix + reason, hedge, explanation)


def _finish(span: str, reason: str, hedge: str | None, explanation: str) -> AnswerSpan:
    if hedge is None and len(span) > MAX_SPAN_CHARS:
        hedge = f"the answer is over {MAX_SPAN_CHARS} characters long, more than one answer needs"
    return AnswerSpan(span, reason, hedge, explanation)


def _check_rest(
    span: str, rest: Sequence[str], is_candidate: Callable[[str, str], bool] | None, generic: bool = True
) -> str | None:
    for piece in rest[:200]:
        if not piece or not piece.strip():
            continue
        piece = piece.strip()
        for sentence in _sentences(piece, ()) if len(piece) < 2000 else [piece[:2000]]:
            why = _rival(sentence, span, is_candidate, generic)
            if why is not None:
                return why
    return None


def _answer_line(
    text: str, golds: Sequence[str], kept: Sequence[str], norm: Callable[[str], str]
) -> tuple[object, str, list[str]]:
    """The value of the last answer line or phrase, ``(None, "", [])`` when there is none, or
    ``((span, hedge), reason, [])`` when answer lines disagree."""
    found: list[tuple[int, str, int]] = []  # (position, value, end)
    for m in _ANSWER_LINE.finditer(text):
        value = m.group(1)
        end = m.end()
        if not value.strip():
            nxt = re.search(r"\S[^\n]*", text[m.end() :])
            if nxt is None:
                continue
            value, end = nxt.group(0), m.end() + nxt.end()
        found.append((m.start(), value, end))
    for m in _ANSWER_HEADING.finditer(text):
        nxt = re.search(r"\S[^\n]*", text[m.end() :])
        if nxt is not None:
            found.append((m.start(), nxt.group(0), m.end() + nxt.end()))
    line_found = bool(found)
    if not found:
        for m in _ANSWER_PHRASE.finditer(text):
            line_end = text.find("\n", m.end())
            line_end = len(text) if line_end < 0 else line_end
            found.append((m.start(), text[m.end() : line_end], line_end))
    if not found:
        return None, "", []
    found.sort()
    values = []
    for _pos, value, _end in found:
        sentences = _sentences(value, kept)
        values.append(sentences[0] if sentences else value)
    cleaned = {_squeeze(_clean(norm(v), golds, kept)[0]) for v in values}
    cleaned.discard("")
    if len(cleaned) > 1:
        return (values[-1].strip(), "several answer lines with different answers"), "answer line", []
    pos, value, end = found[-1]
    sentences = _sentences(value, kept)
    after = [ln for ln in text[end:].split("\n") if ln.strip()]
    rest = sentences[1:] + after
    return (sentences[0] if sentences else value), ("answer line" if line_found else "answer phrase"), rest
