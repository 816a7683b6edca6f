"""The single-commitment rule that every scorer applies first: an answer naming more than one candidate scores 0.

A reward that credits an answer when *any* of the values it names is right pays a policy for hedging
("205 or 204", "1, 2, 3, 204", a list of entities). So every scorer reads the answer through
:func:`read_commitment`, and scores 0 whenever :attr:`Commitment.hedge` is set. The rule, in order:

1. **Where the answer is.** Unicode digits (full-width, Arabic-Indic, ...) read as ASCII digits, full-width
   punctuation as ASCII, invisible format characters are dropped. Inside ``<answer>..</answer>`` when
   present; then inside ``\\boxed{..}`` / ``\\fbox{..}`` when present, and text before the tag or box
   is working that is not read. Several tags or boxes with different contents are a hedge; text *after*
   the last tag or box is checked with it (``\\boxed{204} or 205`` is a hedge). A leading
   ``Final answer:``, ``Answer:`` or ``The answer is`` is dropped.
2. **The gold is masked first.** Every occurrence of a gold alias (case-insensitive, spacing-insensitive,
   at word boundaries) is one placeholder, and every number equal in value to a number the gold contains
   counts as gold. So a gold's own commas, "and", dates and fractions ("March 3, 1901",
   "India and Bangladesh", "3/4", "2\\sqrt{3}", "1,000") never count as extra candidates, and a
   number that also appears in the gold is not a second candidate.
3. **Alternative markers** outside the gold are a hedge: ``or``, ``either``, ``nor``, ``vs``,
   ``versus``, ``alternatively``, ``otherwise``, ``between .. and``, ``±``/``\\pm``/``+/-``/``∓``,
   ranges ``203–205`` / ``203 to 205`` / ``203~205``, comparisons (``<``, ``≥``, ``\\le``, "at least",
   "more than", ...), and ``∨``/``\\lor``/``\\vee``/``\\cup``/``||``. A marker that the gold itself
   contains is not a marker for that task (a gold "(¬A → B) ↔ (A ∨ ¬B)" keeps its ``∨``).
4. **Lists.** The rest is split into parts at newlines, ``;``, ``,`` (not a thousands comma, not the
   comma before a year as in "June 20, 1837", and, when a gold has a comma inside brackets, not a
   comma inside brackets), `` and ``, `` & ``, `` | ``, ``/`` between words, ``\\quad`` and ``\\\\``.
   A part made only of filler words ("The answer is:", "I think") does not count; the masked gold
   counts as many parts as the gold has. More parts than the gold has is a hedge: "204, 205",
   "Paris, London", "1, 2, 3, 204", a list of all options, newline-separated candidates.
5. **Several values in one part.** In ``a = b = c`` only the last side is the value; the earlier sides
   are working and may be a name (``x``), an arithmetic expression equal to the value (``3*68``), or
   use only numbers the question gives (restating the question's numbers: ``12*17 = 204`` when the
   question gives 12 and 17); a side that is one bare number must equal the value. Anything else there
   is a second value (``205 = 204``). In the value, every whitespace-separated token that holds a digit
   is a candidate (spaces around operators are closed first, so ``4\\sqrt{3} / 2`` and ``x + 1`` are
   one token each); tokens that are gold, or numbers equal to a gold number, are one candidate
   together. Two or more candidates is a hedge: "205 204", "Velmora (founded 1615)".

Why the question's numbers are allowed only on the left of ``=``: there they are never read as the
answer (the value is the last side), so restating them cannot buy a second chance; a free-standing list
of question numbers ("1, 2, 3, 204") is a list like any other.

An answer whose checked text is over ``MAX_ANSWER_CHARS`` (20,000) characters is not one commitment
either; every step above runs in time linear in the text, so hostile long answers cost little.

Consequences worth knowing: an explanation after the answer that carries other numbers or entities
("204, which is 12 times 17", "Paris, the capital of France") scores 0. Put working before a box, or
leave it out: the task instructions ask for the bare answer. Multiple choice reads letters with its own
rule (:mod:`agentflow_env.scoring.choice`) with steps 1 and 3 here; Game of 24 uses steps 1 and 3 and its
own one-expression rule (:mod:`agentflow_env.scoring.game24`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from agentflow_env.scoring.arith import ArithmeticError_, evaluate
from agentflow_env.scoring.cued import Cued
from agentflow_env.scoring.extract import UNITS, AnswerSpan, extract_answer
from agentflow_env.scoring.markers import (
    _BARE_NUMBER,
    _EDGE_PUNCT,
    _NUM_TOKEN,
    GOLD_MARK,
    _value_of,
    alternative_marker,
    mask_gold,
    normalize_text,
    number_value,
    value_of,
)

__all__ = [
    "FILLER_WORDS",
    "MAX_ANSWER_CHARS",
    "Commitment",
    "alternative_marker",
    "answer_region",
    "gold_numbers",
    "hedge_reason",
    "normalize_text",
    "number_value",
    "read_commitment",
    "split_parts",
    "value_of",
]

MAX_ANSWER_CHARS = 20_000  # the checked answer (after its tag or box); longer is no single commitment
_GOLD = GOLD_MARK  # placeholder for a masked gold span (stripped from inputs first)


# ------------------------------------------------------------------ 1. where the answer is
def answer_region(prediction: object, golds: Iterable[object] = ()) -> tuple[str, str, str | None]:
    """``(answer, checked, hedge)``: the answer span (:func:`~agentflow_env.scoring.extract.extract_answer`),
    the text the hedge rule checks (the same span), and a reason when the extraction already found a hedge."""
    span = extract_answer(prediction, golds)
    return span.text, span.text, span.hedge


# ------------------------------------------------------------------ numbers


def _numbers_in(text: str) -> set[Fraction]:
    """Every number in ``text``: fractions and ``a/b`` as one value, and also their parts."""
    values: set[Fraction] = set()
    for m in _NUM_TOKEN.finditer(text):
        value = number_value(m.group(0))
        if value is not None:
            values.add(value)
    for m in re.finditer(r"\d+(?:\.\d+)?", text.replace(",", "")):
        _add_fraction(values, m.group(0))
    return values


def gold_numbers(golds: Iterable[str]) -> set[Fraction]:
    """The numbers the gold answers contain (with their parts, and signed both ways when a minus appears)."""
    out: set[Fraction] = set()
    for gold in golds:
        text = normalize_text(gold)
        for m in _NUM_TOKEN.finditer(text):
            value = number_value(m.group(0))
            if value is not None:
                out.add(value)
        for m in re.finditer(r"\d+(?:\.\d+)?", text.replace(",", "")):
            _add_fraction(out, m.group(0))
    return out


def _add_fraction(values: set[Fraction], digits: str) -> None:
    try:
        values.add(Fraction(digits))
    except ValueError:  # beyond Python's digit limit: no number we could compare anyway
        pass


# ------------------------------------------------------------------ 4. lists
FILLER_WORDS = frozenset(
    """a an the answer answers final is are was were be would will should it its it's i i'm i'd we my our
    think believe guess say so therefore thus hence then correct result value get got gives give have has
    this that here there maybe probably likely approximately approx about around roughly exactly total
    equals equal solution which as of my best estimate""".split()
)
_SEPARATORS = re.compile(
    r"\n|;|\s\|\s|\s&\s|\band\b|、|\\quad\b|\\qquad\b|\\\\"
    r"|(?:(?<=[^\W\d_]{2})|(?<=\x00)|(?<=\x00 ))\s*/\s*(?=[^\W\d_]{2}|\s?\x00)",
    re.IGNORECASE,
)
_SEPARATORS = Cued(_SEPARATORS, re.compile(r"\n|;|\||&|and|、|\\|/"), lowered=True)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_YEAR_COMMA = re.compile(r",(?=\s*\d{4}\b)")
_OPEN, _CLOSE = "([{", ")]}"


def _split_commas(text: str, keep_bracketed: bool) -> list[str]:
    protected = {m.start() for m in _THOUSANDS.finditer(text)} | {m.start() for m in _YEAR_COMMA.finditer(text)}
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == "," and i not in protected and not (keep_bracketed and depth > 0):
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parts(text: str, keep_bracketed: bool) -> list[str]:
    out = []
    for chunk in _SEPARATORS.split(text):
        out.extend(_split_commas(chunk, keep_bracketed))
    return [p.strip() for p in out if p.strip()]


def split_parts(text: str, golds: Sequence[str] = ()) -> list[str]:
    """``text`` split into list parts as rule 4 splits it (each gold occurrence one part, never split)."""
    golds = [normalize_text(g) for g in golds if str(g).strip()]
    keep_bracketed = any(re.search(r"[(\[{][^)\]}]*,", g) for g in golds)
    masked = mask_gold(normalize_text(text), golds)
    return [p.replace(_GOLD, " gold ") for p in _parts(masked, keep_bracketed) if not _is_filler(p)]


def _is_filler(part: str) -> bool:
    if _GOLD in part or re.search(r"\d", part):
        return False
    words = re.findall(r"[^\W\d_]+(?:'[a-z]+)?", part.lower())
    return all(w in FILLER_WORDS for w in words)


def _gold_parts(gold: str, keep_bracketed: bool) -> int:
    return max(1, len([p for p in _parts(normalize_text(gold), keep_bracketed) if not _is_filler(p)]))


# ------------------------------------------------------------------ 5. values in one part
# close spaces around operators and inside brackets (``4\\sqrt{3} / 2`` and ``( x + 1 )`` are one token each),
# but not between a closing brace and a word: ``\\frac{34}{1} ou \\frac{33}{1}`` is three tokens
_TIGHTEN = Cued(
    re.compile(r"\s*([-+*/^×÷·_=])\s*|\s+(?=\\(?!text|mbox))|(?<=[{(\[])\s+|\s+(?=[})\]])"),
    re.compile(r"[-+*/^×÷·_=\s]"),  # an operator or a space: nothing else is tightened
)

_UNIT_TOKEN = re.compile(r"([A-Za-z°µμ]+(?:/[A-Za-z]+)?)(?:\^\{?-?\d\}?|[²³])?")


def _token_value(token: str) -> Fraction | None:
    token = token.strip(_EDGE_PUNCT)
    if _BARE_NUMBER.fullmatch(token):
        return number_value(token)
    if re.fullmatch(r"-?\\[dt]?frac\{-?\d+(?:\.\d+)?\}\{-?\d+(?:\.\d+)?\}", token):
        return number_value(token)
    if re.fullmatch(r"[\d\s.()+\-*/]+", token) and re.search(r"\d", token):
        try:
            return evaluate(token)
        except (ArithmeticError_, ValueError, ZeroDivisionError, TypeError):
            return None
    return None


_DIGIT = re.compile(r"\d")


def _value_candidates(value: str, golds: Sequence[str], gnums: set[Fraction]) -> set[object]:
    """The candidates one value names: every token holding a digit, and inside a token that holds the gold,
    every other number (``\\frac{34}{1}?\\frac{33}{1}`` names 34 and 33)."""
    found: set[object] = set()
    for token in _TIGHTEN.sub(r"\1", value).split():
        token = token.strip(_EDGE_PUNCT)
        while len(token) > 2 and token[0] in "([" and token[-1] in ")]":
            token = token[1:-1].strip(_EDGE_PUNCT)
        if not token or (not _DIGIT.search(token) and _GOLD not in token):
            masked_word = mask_gold(token, golds)
            if _GOLD in masked_word:
                found.add(_GOLD)
            continue
        unit = _UNIT_TOKEN.fullmatch(token)
        if unit and (unit.group(1) in UNITS or unit.group(1).lower() in UNITS):
            continue
        number = _token_value(token)
        if number is not None:
            found.add(_GOLD if number in gnums else number)
            continue
        masked = mask_gold(token, golds) if _GOLD not in token else token
        if _GOLD in masked and golds:
            whole = _token_value(masked.replace(_GOLD, golds[0].strip()))
            if whole is not None:  # one number after all (``\\frac{34}{1}``, ``204/205``)
                found.add(_GOLD if whole in gnums else whole)
                continue
        if _GOLD in masked:
            found.add(_GOLD)
            for m in _NUM_TOKEN.finditer(masked.replace(_GOLD, " ")):
                other = number_value(m.group(0))
                if other is not None and other not in gnums and -other not in gnums:
                    found.add(other)
        else:
            found.add(token.lower())
    return found


def _working_ok(segment: str, right: Fraction | None, question_numbers: set[Fraction]) -> bool:
    """Whether one left side of ``=`` is working for the value ``right`` (see rule 5)."""
    if _GOLD in segment or not re.search(r"\d", segment):
        return True
    if _BARE_NUMBER.fullmatch(segment.strip().strip(_EDGE_PUNCT)):  # "205 = 204" names two values
        return right is not None and number_value(segment) == right
    numbers = {number_value(m.group(0)) for m in _NUM_TOKEN.finditer(segment)}
    if numbers and all(n is not None and (n in question_numbers or -n in question_numbers) for n in numbers):
        return True
    left = _value_of(segment)
    return left is not None and right is not None and left == right


# ------------------------------------------------------------------ the rule
def hedge_reason(answer: str, golds: Sequence[str] = (), question: str = "") -> str | None:
    """Why ``answer`` (already unwrapped; see :func:`answer_region`) commits to more than one candidate,
    or ``None`` when it commits to at most one. ``golds`` are the gold aliases, ``question`` the task text."""
    golds = [normalize_text(g) for g in golds if str(g).strip()]
    text = normalize_text(answer)
    if not text.strip():
        return None
    if len(text) > MAX_ANSWER_CHARS:
        return f"it is over {MAX_ANSWER_CHARS} characters long, more than one answer needs"
    marker = alternative_marker(text, golds)
    if marker is not None:
        return f"it offers alternatives ({marker})"
    masked = mask_gold(text, golds)
    keep_bracketed = any(re.search(r"[(\[{][^)\]}]*,", g) for g in golds)
    gold_width = max((_gold_parts(g, keep_bracketed) for g in golds), default=1)
    gnums = gold_numbers(golds)
    qnums = _numbers_in(normalize_text(question)) if question else set()
    weight = 0
    for part in _parts(masked, keep_bracketed):
        if _is_filler(part):
            continue
        weight += gold_width if _GOLD in part else 1
        segments = [s for s in re.split(r"(?<![<>=!])=(?!=)|≈", part) if s.strip()]
        if not segments:
            continue
        value = segments[-1]
        right = _value_of(value.replace(_GOLD, golds[0] if golds else "")) if len(segments) > 1 else None
        if not all(_working_ok(s, right, qnums) for s in segments[:-1]):
            return "a working step states another value"
        value = value.replace(_GOLD, f" {_GOLD} ")
        if len(_value_candidates(value, golds, gnums)) > 1:
            return "it names several values"
    if weight > max(1, gold_width):
        return "it lists several candidates"
    return None


@dataclass(frozen=True)
class Commitment:
    """The answer a prediction commits to (``text``), its last ``a = b`` side (``value``), and why it
    hedges (``hedge``, ``None`` when it commits to at most one candidate)."""

    text: str
    hedge: str | None

    @property
    def value(self) -> str:
        """The right-hand side of the last ``=`` (the whole text when there is none)."""
        return re.split(r"(?<![<>=!])=(?!=)", self.text)[-1].strip() if "=" in self.text else self.text


def read_commitment(
    prediction: object, golds: Iterable[object] = (), question: str = "", span: AnswerSpan | None = None
) -> Commitment:
    """The committed answer of ``prediction`` (its answer span, :func:`~agentflow_env.scoring.extract.extract_answer`)
    and, when it hedges, why (see the module doc for the rule). ``span`` reuses an extraction already made."""
    gold_list = [normalize_text(g) for g in golds if g is not None and str(g).strip()]
    if span is None:
        span = extract_answer(prediction, gold_list)
    hedge = span.hedge
    if hedge is None:
        hedge = hedge_reason(span.text, gold_list, question)
    return Commitment(span.text, hedge)
