"""The value a sentence commits to, read by the gold's type (answer grammar 4).

Models restate the question around the answer: "The founder of Embery Instruments was born in 1879.",
"Danik Loreau is the mayor of Palgrad.", "There are 27 miles between them." A sentence that restates the
question commits to the one value it states. :func:`sentence_value` finds that value by the *type* of the
gold, never by the sentence's shape, so it reads restatements it was never shown:

1. **The question's words are not candidates.** Every token of the sentence that the question also holds
   (case and diacritics folded) is the question restated, not an answer; a gold occurrence is never masked.
   Numbers the question gives are *quantities from the question* ("k from 1 to 3604", "in 2019"): they are
   not candidates either, unless a number equals the gold's value (a question may contain its answer).
2. **Candidates are the spans of the gold's type** among the rest:

   - a number gold (with or without a unit, a fraction): every number, with the unit word after it;
   - a date gold: every date ("30 April 1789", "April 30, 1789", "1789-04-30"), and every other number;
   - an expression gold (LaTeX, ``\\sqrt``, ``\\pi``): every token with a digit or a LaTeX command;
   - any other gold (a name, a place, a list, a word): every occurrence of the gold, every run of words
     that starts with a capital letter (not the sentence's first word when that is a common word), and
     every token with a digit; lowercase words are the sentence's frame ("is", "turns out", "records").
     For a list gold of *n* items, *n* such runs are one candidate: the list they name, in order.
3. **One candidate is a commitment; two that differ are a rival.** Exactly one distinct candidate is the
   value the sentence commits to (it is then compared with the gold by the scorer and by type). Two or more
   distinct candidates are a hedge (:attr:`SentenceValue.hedge`), whichever comes first. No candidate is no
   reading (the scorer's own verdict stands). An alternative marker outside the question ("or", a range,
   "at least") is a hedge too.

Why the question's quantities are not rivals: restating the question ("the sum of k^5 for k from 1 to
3604 is 3655...") cannot buy a second chance, because the question's numbers are fixed by the task, not
chosen by the model; a number the question does *not* give is a value the model chose, so two of them are
two answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from agentflow_env.scoring.extract import normalize_span, normalize_text

__all__ = ["SentenceValue", "gold_type", "sentence_value"]

MAX_SENTENCE_CHARS = 600  # longer spans are not one sentence


@dataclass(frozen=True)
class SentenceValue:
    """What a sentence commits to: ``value`` (the one candidate span, ``None`` when there is none or
    several) and ``hedge`` (why it names a rival, ``None`` when it does not)."""

    value: str | None
    hedge: str | None = None


_EDGE = ".,;:!?\"'“”‘’()[]{}*_`$"
_NUMBER = re.compile(
    r"\\[dt]?frac\s*\{\s*-?\d+(?:\.\d+)?\s*\}\s*\{\s*-?\d+(?:\.\d+)?\s*\}"
    r"|(?<![\w.^_])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?(?![\w^])%?"
)
_DATE = re.compile(
    r"(?i)\b\d{1,2}(?:st|nd|rd|th)?(?:\s+of)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?,?\s+\d{3,4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{3,4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{3,4}\b"
    r"|\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}[/.]\d{1,2}[/.]\d{4}\b"
)
_UNIT_AFTER = re.compile(r"\s*(?:\\,|~)?\s*([A-Za-z°µμ%$€£]+(?:/[A-Za-z]+)?(?:\^\{?-?\d\}?|[²³])?)")
_LATEX_CMD = re.compile(r"\\[A-Za-z]+")
_FRAME_START = frozenset(
    """the a an it its this that these those there here so thus hence therefore then yes no well overall
    finally in on at from after according based given since because as i we you they he she my our your
    answer result conclusion according putting looking to for with by of and but or also both each which
    what who when where how one""".split()
)
# grammar 5: a sentence may also open with a preposition or a conjunction ("Between A and B, the larger is C")
_FRAME_START5 = _FRAME_START | frozenset(
    """between among amongst of following starting comparing considering looking while whereas although though
    unless once whenever before during""".split()
)
# words that are a sentence's frame, never a candidate, when a part of a list is checked for content
_FRAME_WORDS = _FRAME_START | frozenset(
    """is was are were be been being am has have had do does did will would can could should may might must
    not very just also only even still about around nearly exactly roughly approximately total totals
    my search research records record show shows documents document sources source results result found
    find confirm confirmed checked check looking look turns turned out far as according answer question
    asks asked value number correct option choice final me us him her them their his its into""".split()
)
_CONNECTORS = frozenset("of de da del della di du la le les van von der den y and & the bin ibn al el st. st".split())


def _fold(token: str) -> str:
    from agentflow_env.scoring.typed import fold

    return fold(token.strip(_EDGE))


def gold_type(golds: Sequence[str]) -> str:
    """``number``, ``date``, ``expression`` or ``text``: the type of the first gold that has one."""
    from agentflow_env.scoring.extract import number_with_unit
    from agentflow_env.scoring.typed import _date_parts

    for gold in golds:
        g = gold.strip()
        if not g:
            continue
        if number_with_unit(g) is not None or re.fullmatch(r"-?\d+\s*/\s*\d+", g):
            return "number"
        if _DATE.fullmatch(g) and _date_parts(g) is not None:
            return "date"
        if _LATEX_CMD.search(g) or re.fullmatch(r"[-+*/^().\d\sA-Za-z]*\d[-+*/^().\d\sA-Za-z]*", g):
            return "expression" if re.search(r"[-+*/^\\]", g.lstrip("-")) else "text"
        return "text"
    return "text"


def _plain_question(question: str) -> str:
    """The question as the reader sees an answer: math delimiters (``$``, ``\\(``, ``\\[``) dropped."""
    return re.sub(r"\$|\\[()\[\]]", "", normalize_text(question))


def _question_tokens(question: str) -> set[str]:
    return {t for t in (_fold(raw) for raw in _plain_question(question).split()) if t}


def _numbers(text: str) -> set[Fraction]:
    from agentflow_env.scoring.markers import number_value

    out = set()
    for m in _NUMBER.finditer(text):
        value = number_value(m.group(0).rstrip("%"))
        if value is not None:
            out.add(value)
    return out


def _gold_spans(text: str, golds: Sequence[str]) -> list[tuple[int, int]]:
    from agentflow_env.scoring.extract import _gold_intervals

    return _gold_intervals(text, golds)


def _inside(a: int, b: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(x <= a and b <= y for x, y in spans)


def _overlaps(a: int, b: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(a < y and x < b for x, y in spans)


def _number_candidates(
    text: str, golds: Sequence[str], qnums: set[Fraction], gspans: list[tuple[int, int]], skip: list[tuple[int, int]]
) -> list[tuple[str, object]]:
    from agentflow_env.scoring.commitment import gold_numbers, number_value

    gnums = gold_numbers(golds)
    out: list[tuple[str, object]] = []
    for m in _NUMBER.finditer(text):
        if _overlaps(m.start(), m.end(), skip):
            continue
        value = number_value(m.group(0).rstrip("%"))
        if value is None:
            continue
        if value in qnums and value not in gnums:
            continue  # a quantity from the question
        unit = _UNIT_AFTER.match(text, m.end())
        span = m.group(0) + (unit.group(0) if unit and _is_unit(unit.group(1)) else "")
        out.append((span.strip(), value))
    return out


def _is_unit(word: str) -> bool:
    from agentflow_env.scoring.extract import UNITS

    base = re.sub(r"\^.*|[²³]$", "", word)
    return base in UNITS or base.lower() in UNITS or base.split("/")[0] in UNITS or base in "%$€£"


_DIGIT = re.compile(r"\d")
_ENDS_SENTENCE = re.compile(r"[.!?:;]$")
_ENDS_PUNCT = re.compile(r"[,.;:!?]$")
_ENDS_RUN = re.compile(r"[,;:!?()]$|(?<!\b[A-Z])\.$")


def _text_candidates(
    text: str,
    qtokens: set[str],
    gspans: list[tuple[int, int]],
    qnums: set[Fraction],
    frame_start: frozenset[str] = _FRAME_START,
) -> list[tuple[str, object]]:
    """Gold occurrences, capitalised runs and digit tokens outside the question (rule 2's last case); with
    grammar 5's frame words, "I." is an initial ("I. Doukaina"), not the pronoun."""
    v5 = frame_start is _FRAME_START5
    out: list[tuple[str, object]] = [(text[a:b], "\x00gold") for a, b in gspans]
    run: list[str] = []
    first = True

    def flush() -> None:
        while run and _fold(run[-1]) in _CONNECTORS:
            run.pop()
        if run:
            out.append((" ".join(run), _fold(" ".join(run))))
        run.clear()

    for m in re.finditer(r"\S+", text):
        raw = m.group(0)
        token = raw.strip(_EDGE)
        starts = first
        first = bool(_ENDS_SENTENCE.search(raw)) or raw in ("—", "–", "-")
        if not token or _overlaps(m.start(), m.end(), gspans):
            flush()
            continue
        folded = _fold(token)
        content = False
        if _DIGIT.search(token):
            number = _numbers(token)
            content = not (number and number <= qnums) and folded not in qtokens
        elif (
            token[:1].isupper() and folded not in qtokens and (token != "I" or (v5 and re.fullmatch(r"[*_]*I\.", raw)))
        ):
            content = not (starts and folded in frame_start)
        if content:
            run.append(token)
        elif run and folded in _CONNECTORS and not _ENDS_PUNCT.search(raw):
            run.append(token)
            continue
        else:
            flush()
        if _ENDS_RUN.search(raw):
            flush()
    flush()
    return out


def _mask_restated(text: str, question: str) -> str:
    """``text`` with every run of three or more words that the question writes in the same order masked:
    the question restated ("lies on either a side or a diagonal") holds no alternative marker of the
    answer's own ("at least 902" does)."""
    if not question:
        return text
    q = " " + " ".join(t for t in (raw.strip(_EDGE).lower() for raw in _plain_question(question).split()) if t) + " "
    words = [(m.start(), m.end(), m.group(0).strip(_EDGE).lower()) for m in re.finditer(r"\S+", text)]
    out, i = [], 0
    while i < len(words):
        j = i
        while j < len(words) and words[j][2] and f" {' '.join(w for _a, _b, w in words[i : j + 1])} " in q:
            j += 1
        if j - i >= 3:
            out.append((words[i][0], words[j - 1][1]))
            i = j
        else:
            i += 1
    for a, b in reversed(out):
        text = text[:a] + " Q " + text[b:]
    return text


def _is_list(text: str, golds: Sequence[str], question: str, version: int = 4) -> bool:
    """Whether ``text`` is a list of candidates rather than one sentence: two or more of its parts
    (split as the single-commitment rule splits, gold commas kept) name something outside the question,
    or are bare values (no word: "1, 2, 3, 33" lists the question's numbers too)."""
    from agentflow_env.scoring.commitment import split_parts

    qtokens = _question_tokens(question)
    content = 0
    parts = split_parts(text, golds)
    if not _gold_spans(text, golds):  # a list gold written another way ("A, the B" for "A and the B")
        content -= max((len(_list_items(g)) for g in golds), default=1) - 1
    for part in parts:
        tokens = [_fold(t) for t in part.split() if _fold(t)]
        if not re.search(r"[A-Za-z]{2,}", part) and re.search(r"\d", part):
            content += 1
        elif version >= 5 and _frame_part(part, qtokens):
            continue  # "Given the information above", "Between A and B" (the question's names): the frame
        elif any(t not in qtokens and t not in _FRAME_WORDS for t in tokens):
            content += 1
    return content > 1


def _frame_part(part: str, qtokens: set[str]) -> bool:
    """Grammar 5: a comma part that opens with a preposition, a participle of the frame or a conjunction
    (:data:`_FRAME_START5`) and names nothing but the question's words after it is the sentence's frame."""
    words = part.split()
    if len(words) < 2 or re.search(r"\d", part) or _fold(words[0]) not in _FRAME_START5:
        return False
    return all(not w[:1].isupper() or _fold(w) in qtokens or w.strip(_EDGE) == "Q" for w in words[1:])


def _list_items(gold: str) -> list[str]:
    from agentflow_env.scoring.typed import _items

    return _items(gold)


def sentence_value(span: str, golds: Sequence[str], question: str = "", version: int = 4) -> SentenceValue:
    """The value the sentence ``span`` commits to (see the module doc), with ``golds`` the task's gold
    aliases and ``question`` the task's question. From ``version`` 5 on, a comma part of lower-case words
    (its first word aside: "Given the information above, X") is the sentence's frame, not a list item, and a
    sentence's first word that is a preposition or a conjunction ("Between A and B, ..") is no candidate."""
    from agentflow_env.scoring.markers import alternative_marker
    from agentflow_env.scoring.typed import _date_parts

    golds = [normalize_text(g).strip() for g in golds if str(g).strip()]
    text = normalize_span(normalize_text(span)).strip()
    if not text or not golds or len(text) > MAX_SENTENCE_CHARS:
        return SentenceValue(None)
    if not re.search(r"[^\W\d_]{2,}", _LATEX_CMD.sub(" ", text)):
        return SentenceValue(None)  # no sentence: "2 = 1", "2 1" are read by the single-commitment rule
    restated = _mask_restated(text, question)
    if (
        "|" in restated
        or re.search(r"[^\W\d_]{2}\.?\s*/\s*[^\W_]{2}", restated)
        or _is_list(restated, golds, question, version)
    ):
        return SentenceValue(None)  # a list of values is read by the single-commitment rule, not as a sentence
    marker = alternative_marker(restated, golds)
    if marker is not None:
        return SentenceValue(None, f"the sentence offers alternatives ({marker})")
    kind = gold_type(golds)
    qnums = _numbers(normalize_text(question)) if question else set()
    qtokens = _question_tokens(question) if question else set()
    gspans = _gold_spans(text, golds)
    found: list[tuple[str, object]]
    if kind == "date":
        dates = [(m.group(0), _date_parts(m.group(0))) for m in _DATE.finditer(text)]
        spans = [m.span() for m in _DATE.finditer(text)]
        found = [(s, k) for s, k in dates if k is not None]
        found += _number_candidates(text, golds, qnums, gspans, spans)
    elif kind == "number":
        found = _number_candidates(text, golds, qnums, gspans, [])
    elif kind == "expression":
        found = [(text[a:b], "\x00gold") for a, b in gspans]
        for m in re.finditer(r"\S+", text):
            token = m.group(0).strip(".,;:!?\"'“”‘’*_`$")
            if _overlaps(m.start(), m.end(), gspans) or not token:
                continue
            if (re.search(r"\d", token) or _LATEX_CMD.search(token)) and _fold(token) not in qtokens:
                if not (_numbers(token) and _numbers(token) <= qnums and not _LATEX_CMD.search(token)):
                    found.append((token, token.replace(" ", "")))
    else:
        found = _text_candidates(text, qtokens, gspans, qnums, _FRAME_START5 if version >= 5 else _FRAME_START)
    distinct = {k for _s, k in found}
    items = max((len(_list_items(g)) for g in golds), default=1)
    if kind == "text" and items > 1 and len(found) == items and "\x00gold" not in distinct:
        return SentenceValue(", ".join(s for s, _k in found))  # a list gold: its items, in order
    if len(distinct) > 1:
        return SentenceValue(None, f"the sentence names {len(distinct)} candidates of the answer's type")
    if not found:
        return SentenceValue(None)
    return SentenceValue(found[-1][0])


_LETTER = re.compile(r"(?<![\w-])\(?([A-J])(?:\)|\.(?!\w)|:|(?=[\s,;!?]|$))")


def option_value(span: str, options: Sequence[str]) -> SentenceValue:
    """The one option a sentence commits to, for a multiple-choice task with ``options`` (rule 2 for options:
    every option letter, and every option text written out, is a candidate; "A" followed by a lowercase
    word is the article, not a letter)."""
    text = normalize_text(span).strip()
    if not text or len(text) > MAX_SENTENCE_CHARS or not options:
        return SentenceValue(None)
    letters = "ABCDEFGHIJ"[: len(options)]
    found: list[str] = []
    for m in _LETTER.finditer(text):
        letter = m.group(1)
        after = text[m.end() :].lstrip()
        if letter not in letters or (
            letter == "A" and m.group(0) == "A" and re.match(r"[a-z]", after) and not re.match(r"(?:is|was)\b", after)
        ):
            continue
        found.append(letter)
    folded = _fold(text)
    for letter, option in zip(letters, options):
        name = _fold(str(option))
        if len(name) >= 4 and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", folded):
            found.append(letter)
    distinct = set(found)
    if len(distinct) > 1:
        return SentenceValue(None, f"the sentence names {len(distinct)} options")
    return SentenceValue(found[0] if found else None)


_FRAME_NEGATION = re.compile(
    r"(?i)\bnot\b|n't\b|\bnever\b|\b(?:incorrect|wrong|false|rather\s+than|instead\s+of|ruled\s+out|excluded?|rejected?)\b"
)


_VALUE_RUN = re.compile(r"\d[^\w\n]{0,4}(?:[,;/|]|\band\b|&)[^\w\n]{0,4}\d")


def _mask_question_tokens(text: str, question: str) -> str:
    """``text`` with every token that the question writes verbatim and that holds a symbol (``|z|^2``,
    ``f(x)``) masked: the question's own notation is no value and no alternative marker."""
    if not question:
        return text
    tokens = {t for t in _plain_question(question).split() if re.search(r"[^\w\s.,;:!?'\"]", t) and len(t) > 2}
    if not tokens:
        return text
    return " ".join(" Q " if raw.strip(".,;:!?") in tokens else raw for raw in text.split(" "))


def frame_value(text: str, golds: Sequence[str], question: str = "") -> SentenceValue:
    """Grammar 5: the one value of a number or date gold's type in a short answer of words around it
    ("Happy to help! 33", "Simplifying, we get 33.", "Sunday, June 18, 1815"). Words are never candidates
    of a number or a date, so a frame of words around exactly one such value commits to it; two distinct
    values are a hedge, and a negation anywhere ("not 33") is no reading. Other golds: no reading."""
    from agentflow_env.scoring.markers import alternative_marker
    from agentflow_env.scoring.typed import _date_parts

    golds = [normalize_text(g).strip() for g in golds if str(g).strip()]
    text = normalize_span(normalize_text(text)).strip()
    kind = gold_type(golds)
    if not text or kind not in ("number", "date") or len(text) > MAX_SENTENCE_CHARS or _FRAME_NEGATION.search(text):
        return SentenceValue(None)
    if not re.search(r"[^\W\d_]{2,}", _LATEX_CMD.sub(" ", text)) or _VALUE_RUN.search(text):
        return SentenceValue(None)  # no frame of words, or a run of values ("1, 2, 3, 33") is a list
    text = _mask_question_tokens(text, question)
    restated = _mask_restated(text, question)
    marker = alternative_marker(restated, golds)
    if marker is not None:
        return SentenceValue(None, f"the answer offers alternatives ({marker})")
    qnums = _numbers(normalize_text(question)) if question else set()
    spans = [m.span() for m in _DATE.finditer(text)] if kind == "date" else []
    found: list[tuple[str, object]] = []
    if kind == "date":
        found = [(text[a:b], _date_parts(text[a:b])) for a, b in spans]
        found = [(s, k) for s, k in found if k is not None]
    found += _number_candidates(text, golds, qnums, _gold_spans(text, golds), spans)
    distinct = {k for _s, k in found}
    if len(distinct) > 1:
        return SentenceValue(None, f"the answer names {len(distinct)} candidates of the answer's type")
    return SentenceValue(found[-1][0]) if found else SentenceValue(None)
