"""Answer styles in sentences, built from parts split into ``tune`` and ``held`` halves (round 5 of issue 38).

The part families of :mod:`tests.answer_styles` put a value after a prefix. Models also write the answer
*inside a sentence*; these families write those classes, each part family split in two by hand as there:

- **restatements**: the answer in a sentence that restates the question's subject ("The founder of X was
  born in 1879.", "Danik Loreau is the mayor of ...", "There are 27 miles ..."), built from the task's own
  question by its shape (copula, "in what year", "how many", "find/compute", options, Game of 24);
- **reasoning first**: one or more sentences of reasoning (which may name the question's numbers and
  entities, and a wrong intermediate value), then the answer in a conclusion sentence or line;
- **bold sentences with a unit**: a number gold written with the question's unit, inside a bold sentence;
- **rivals after a gold-first statement**: a committed-looking statement followed by a remark that keeps
  another value alive (appositions, "also", "or perhaps", "alternatively", parentheses, footnotes, "some
  say", a second sentence naming another value): hedges, written in both candidate orders.

Both halves were written before the reader was changed for them; the reader is tuned on ``tune`` only.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from agentflow_env.types import Task

FAMILIES = ("restate", "reasoning", "bold_unit", "rival_after")


@dataclass(frozen=True)
class Shape:
    """The question read as a sentence: ``subject`` ("the founder of X"), ``verb`` phrase after the copula
    ("was born"), ``prep`` ("in"), ``copula`` ("is", "was"), ``unit`` (a unit word the question asks in)."""

    subject: str
    verb: str = ""
    prep: str = ""
    copula: str = "is"
    unit: str = ""
    how_many: bool = False


_UNIT_WORDS = (
    "miles|kilometers|km|meters|metres|m/s|km/h|litres|liters|people|years|dollars|mol|grams|g|kg|cm|"
    "seconds|minutes|hours|days|degrees|papers|cars|books|points|students|employees|inhabitants"
)


def _question_sentence(question: str) -> str:
    """The sentence of ``question`` that asks (its last ``?`` sentence, else its last sentence)."""
    text = re.sub(r"\s+", " ", question).strip()
    text = re.split(r"\s(?:Choices|Options)\s*:|\sA\.\s", text)[0]
    asks = re.findall(r"[^.?!]*\?", text)
    if asks:
        return asks[-1].strip()
    sentences = [s.strip() for s in re.split(r"(?<=[.!])\s+", text) if s.strip()]
    for s in reversed(sentences):
        if re.match(r"(?i)(?:find|compute|calculate|what|how|which|who|give|determine|evaluate)\b", s):
            return s
    return sentences[-1] if sentences else text


def shape(question: str) -> Shape:
    """The question's subject and verb, by its shape (a rough parse; a fallback keeps the question's words)."""
    s = _question_sentence(question).rstrip("?.! ")
    unit = ""
    m = re.search(rf"(?i)\bhow\s+many\s+({_UNIT_WORDS})\b", s) or re.search(rf"(?i)\bin\s+({_UNIT_WORDS})\b", s)
    if m:
        unit = m.group(1)
    m = re.match(r"(?i)^(?:in\s+)?what\s+year\s+(was|were|did)\s+(.+)\s+(\w+)$", s)
    if m:
        aux, subj, verb = m.groups()
        verb = verb if aux.lower() != "did" else (verb + "d" if verb.endswith("e") else verb + "ed")
        return Shape(subj, (aux + " " + verb) if aux.lower() != "did" else verb, "in", unit=unit)
    m = re.match(r"(?i)^(where|when)\s+(was|were|is|did|does)\s+(.+)\s+(\w+)$", s)
    if m:
        wh, aux, subj, verb = m.groups()
        verb = verb if aux.lower() in ("was", "were", "is") else (verb + "d" if verb.endswith("e") else verb + "ed")
        phrase = (aux + " " + verb) if aux.lower() in ("was", "were", "is") else verb
        return Shape(subj, phrase, "in" if wh.lower() == "where" else "on", unit=unit)
    m = re.match(r"(?i)^how\s+many\s+(.+?)\s+(is|are|was|were|will|would|do|does|did|lie|remain)\s+(.+)$", s)
    if m:
        noun, aux, rest = m.groups()
        return Shape(f"{noun} {aux} {rest}", copula="is", unit=unit or noun.split()[0], how_many=True)
    m = re.match(r"(?i)^(?:who|what|which(?:\s+\w+)?)\s+(is|was|are|were)\s+(.+)$", s)
    if m:
        return Shape(m.group(2), copula=m.group(1).lower(), unit=unit)
    m = re.match(r"(?i)^(?:find|compute|calculate|determine|evaluate|give)\s+(?:the\s+value\s+of\s+)?(.+)$", s)
    if m:
        return Shape(m.group(1), unit=unit)
    m = re.match(r"(?i)^(?:who|what|which)\s+(.+)$", s)
    if m:
        return Shape(f"the one that {m.group(1)}", unit=unit)
    return Shape(f"the answer to “{s}”", unit=unit)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _statement(sh: Shape, v: str, flip: bool = False) -> str:
    """One sentence (no final stop) that restates the question with ``v`` in it."""
    if sh.how_many:
        return f"there are {v} {sh.subject}" if not flip else f"the count of {sh.subject} comes to {v}"
    if sh.verb:
        if flip:
            return f"it was {sh.prep} {v} that {sh.subject} {sh.verb}"
        return f"{sh.subject} {sh.verb} {sh.prep} {v}"
    return f"{sh.subject} {sh.copula} {v}" if not flip else f"{v} {sh.copula} {sh.subject}"


# ------------------------------------------------------------------ parts: (tune half, held half)
Template = Callable[[Shape, str], str]
RESTATEMENTS: tuple[list[Template], list[Template]] = (
    [
        lambda sh, v: _cap(_statement(sh, v)) + ".",
        lambda sh, v: _cap(_statement(sh, v, flip=True)) + ".",
        lambda sh, v: "According to my search, " + _statement(sh, v) + ".",
        lambda sh, v: "After looking into it, I found that " + _statement(sh, v) + ".",
        lambda sh, v: "I can confirm that " + _statement(sh, v, flip=True) + ".",
        lambda sh, v: _cap(_statement(sh, f"**{v}**")) + ".",
    ],
    [
        lambda sh, v: "It turns out that " + _statement(sh, v) + ".",
        lambda sh, v: _cap(_statement(sh, v, flip=True)) + ", as far as the records show.",
        lambda sh, v: "From the retrieved documents: " + _statement(sh, v) + ".",
        lambda sh, v: "Yes — " + _statement(sh, v) + ".",
        lambda sh, v: "We find that " + _statement(sh, v, flip=True) + ".",
        lambda sh, v: _cap(_statement(sh, f"*{v}*", flip=True)) + ".",
    ],
)
REASONS = (
    [
        "The question asks about {subject}. I looked up the relevant records.",
        "First I identified {subject}. Then I checked the key fact in two documents.",
        "Let me work through this step by step. The first hop gives {wrong}, which is not the final answer yet.",
        "Reading the question carefully, we need {subject}. The search results agree on it.",
    ],
    [
        "To answer this, I first found {subject}, then verified the details.",
        "The documents mention {subject} several times. Cross-checking them settles the question.",
        "An intermediate step gives {wrong}. Following the chain one step further resolves it.",
        "We need to figure out {subject}. Breaking it down, the relevant facts are consistent.",
    ],
)
CONCLUSIONS: tuple[list[Template], list[Template]] = (
    [
        lambda sh, v: " So " + _statement(sh, v) + ".",
        lambda sh, v: "\n\nTherefore, " + _statement(sh, v) + ".",
        lambda sh, v: " Thus the answer: " + v,
        lambda sh, v: " Hence " + v + ".",
    ],
    [
        lambda sh, v: "\n\nIn conclusion, " + _statement(sh, v) + ".",
        lambda sh, v: " Putting this together, " + v + ".",
        lambda sh, v: " That gives " + v + ".",
        lambda sh, v: "\n\nConclusion: " + _statement(sh, v, flip=True) + ".",
    ],
)
BOLD_UNITS: tuple[list[Template], list[Template]] = (
    [
        lambda sh, v: "**" + _cap(_statement(sh, v)) + ".**",
        lambda sh, v: "The result is **" + v + "**.",
        lambda sh, v: "**Answer: " + v + "**",
        lambda sh, v: "**So " + _statement(sh, v) + ".**",
    ],
    [
        lambda sh, v: "**" + v + "** is the value: " + _statement(sh, v) + ".",
        lambda sh, v: "__" + _cap(_statement(sh, v)) + "__",
        lambda sh, v: "**It comes to " + v + " in total.**",
        lambda sh, v: "### " + v,
    ],
)
RIVALS_AFTER: tuple[list[str], list[str]] = (
    [
        "{s_a}, or perhaps {b}.",
        "{s_a}. Alternatively, {b}.",
        "{s_a} (though {b} also appears in one source).",
        "{s_a}.[^1]\n\n[^1]: Some sources give {b}.",
        "{s_a}. Some say {b}.",
        "{s_a}. {b} is also possible.",
        "{s_a}; {b} would be my second guess.",
        "{s_a}. But I've also seen {b}.",
    ],
    [
        "{s_a}, with {b} as a close second.",
        "{s_a}. Then again, it might be {b}.",
        "{s_a} ({b} according to another source).",
        "{s_a}. Note: one document lists {b} instead.",
        "{s_a}. Others put it at {b}.",
        "{s_a}. The other plausible value is {b}.",
        "{s_a}, although {b} is also cited.",
        "{s_a}. {b} is the other candidate.",
    ],
)


def _unit_value(value: str, sh: Shape) -> str | None:
    """``value`` with the question's unit, when the gold is a bare number and the question names a unit."""
    if not sh.unit or not re.fullmatch(r"-?\d[\d,]*(?:\.\d+)?", value.strip()):
        return None
    return f"{value} {sh.unit}"


def sentence_styles(
    task: Task, kind: str, values: list[str], wrongs: list[str], half: str, per_family: int, seed: int = 0
) -> list[tuple[str, str, str, str]]:
    """``(kind, answer, parts, order)`` for the four families, ``per_family`` answers each, from the ``half``
    parts; ``values`` are correct renderings of the gold (an option's letter, a Game-of-24 expression, a
    value), ``wrongs`` distractors of the same kind. ``kind`` is the task kind (``value``, ``choice``,
    ``game24``)."""
    h = ("tune", "held").index(half)
    rng = random.Random(f"{seed}:{task.id}:{half}:sentences")
    sh = shape(task.question)
    if kind == "choice":
        sh = Shape("the correct option", copula="is")
    elif kind == "game24":
        sh = Shape("an expression that makes 24 with these numbers", copula="is")
    out: list[tuple[str, str, str, str]] = []
    for i in range(per_family):
        value, wrong = rng.choice(values), rng.choice(wrongs)
        j = rng.randrange(len(RESTATEMENTS[h]))
        out.append(("correct", RESTATEMENTS[h][j](sh, value), f"restate:{j}", ""))
        r, c = rng.randrange(len(REASONS[h])), rng.randrange(len(CONCLUSIONS[h]))
        reason = REASONS[h][r].format(subject=sh.subject, wrong=wrong)
        out.append(("correct", reason + CONCLUSIONS[h][c](sh, value), f"reasoning:{r}.{c}", ""))
        with_unit = _unit_value(value, sh)
        if with_unit is not None or kind == "value":
            b = rng.randrange(len(BOLD_UNITS[h]))
            out.append(("correct", BOLD_UNITS[h][b](sh, with_unit or value), f"bold_unit:{b}", ""))
        k = rng.randrange(len(RIVALS_AFTER[h]))
        order = "gold-first" if i % 2 == 0 else "gold-second"
        a, b_ = (value, wrong) if order == "gold-first" else (wrong, value)
        s_a = _cap(_statement(sh, a)) if rng.random() < 0.5 else a
        out.append(("hedge", RIVALS_AFTER[h][k].format(s_a=s_a, b=b_), f"rival_after:{k}", order))
    return out
