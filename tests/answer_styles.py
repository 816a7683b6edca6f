"""Answer styles built from parts, each part family split in two halves: ``tune`` and ``held`` (held out).

A reward that generalises scores answer styles it was never tuned on the way it scores those it was. So the
styles here are not a list of examples but products of parts:

- **prefixes** ("The answer is ", "### Final Answer\\n", ...), **decorations** of the value (bold, a box,
  ``$..$``, quotes, an ``<answer>`` tag, ...), **value renderings** by the gold's type (a number with
  thousands separators or in scientific notation, a date in another format, a name without diacritics or
  with initials, an option's letter or text, a Game-of-24 expression with other operators), **trailers**
  (confidence lines, citations, verification marks, sign-offs);
- **self-corrections**: a wrong draft, then the committed value ("I first thought 34, but after checking,
  it is 33"): correct answers;
- **rival placements**: the gold and a distractor in one answer that does not commit ("33 (34 in some
  sources)", "A (second choice: B)"): hedges, written in both candidate orders.

Every family's parts are split in two halves by hand, so both halves hold every kind of part; the reader
is tuned on ``tune`` only, and ``perf/reward_quality.py`` reports both error rates on ``held`` beside
``tune`` (the gap is the number that matters). Answers are sent through ``env.step`` in the three
documented action formats (:func:`action`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from agentflow_env.types import Task
from tests.answer_sentences import sentence_styles
from tests.reward_cases import distractor, golds_of

HALVES = ("tune", "held")
FORMATS = ("text", "json", "tool_call")


@dataclass(frozen=True)
class Style:
    """One answer: ``kind`` is ``correct`` (must score 1) or ``hedge`` (must score 0, ``order`` says whether
    the gold comes first or second); ``parts`` names the parts it was built from."""

    kind: str
    answer: str
    parts: str
    order: str = ""


def action(answer: str, fmt: str) -> str | dict:
    """``answer`` as a final-answer action in format ``fmt``: ``text`` (``Final Answer: ..``), ``json``
    (``{"final_answer": ..}``) or ``tool_call`` (an OpenAI assistant message calling ``final_answer``)."""
    if fmt == "text":
        return f"Final Answer: {answer}"
    if fmt == "json":
        return json.dumps({"final_answer": answer})
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "final_answer", "arguments": json.dumps({"answer": answer})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


# ------------------------------------------------------------------ parts: (tune half, held half)
PREFIXES = (
    [
        "",
        "The answer is ",
        "Answer: ",
        "**Answer:** ",
        "So the final answer is ",
        "Based on the search results, the answer is ",
        "### Final Answer\n",
        "I believe it is ",
        "Final answer: ",
        "**Final Answer**\n\n",
        "My answer: ",
        "I'm fairly sure it's ",
    ],
    [
        "Here is the answer: ",
        "The correct answer is ",
        "Result: ",
        "## Answer\n",
        "Based on my research, the answer is ",
        "**Final answer:** ",
        "> ",
        "Short answer: ",
        "Therefore, the answer is ",
        "To conclude, the answer is ",
        "**Conclusion**\n",
        "It is ",
    ],
)
DECORATIONS: tuple[list[Callable[[str], str]], list[Callable[[str], str]]] = (
    [
        lambda v: v,
        lambda v: f"**{v}**",
        lambda v: f"\\boxed{{{v}}}",
        lambda v: f"${v}$",
        lambda v: f"“{v}”",
        lambda v: f"<answer>{v}</answer>",
        lambda v: f"\\(\\boxed{{{v}}}\\)",
        lambda v: f"*{v}*",
    ],
    [
        lambda v: v,
        lambda v: f"`{v}`",
        lambda v: f"$\\boxed{{{v}}}$",
        lambda v: f"\\[\\boxed{{{v}}}\\]",
        lambda v: f'"{v}"',
        lambda v: f"__{v}__",
        lambda v: f"$\\displaystyle {v}$",
        lambda v: f"<answer> {v} </answer>",
    ],
)
TRAILERS = (
    [
        "",
        "\n\nConfidence: 90%",
        " [1]",
        "\n\nI verified this with two sources.",
        "\n\nLet me know if you need anything else!",
        " ✓",
        "\n\nSources: Wikipedia",
        "\n\n**Confidence:** high",
    ],
    [
        "",
        "\n\n(Confidence: high)",
        "[^2]",
        "\n\nThis is consistent with the retrieved documents.",
        " ✅",
        "\n\nI'm 95% sure.",
        "【1†source】",
        "\n\nHope this helps!",
    ],
)
SELF_CORRECTIONS = (
    [
        "I first thought {w}, but after checking, it is {v}",
        "The answer is {w}. Wait, actually it's {v}.",
        "{w}? No, wait. Actually {v}.",
        "On first pass I got {w}. On second thought, it is {v}.",
    ],
    [
        "Initially I got {w}; after double-checking, the answer is {v}.",
        "Answer: {w}\nCorrection: the answer is {v}",
        "My first guess was {w}, but the correct answer is {v}.",
        "{w}. Hmm, no. Actually, it's {v}.",
    ],
)
RIVALS = (
    [
        "{a} ({b} in some sources)",
        "{a}\n\nBut {b} is also a reasonable answer.",
        "{a}; if not, {b}",
        "<answer>{a}</answer> <answer>{b}</answer>",
        "{a} (second choice: {b})",
        "{a}\n{b}",
        "{a}, though {b} is possible",
        "The answer is {a}. Wait, actually {b}, or maybe {a}.",
    ],
    [
        "{a}. Some sources say {b}.",
        "{a} (alternatively {b})",
        "Primary answer: {a}\nBackup answer: {b}",
        "{a} — or possibly {b}",
        "{a}. Otherwise, {b}.",
        "{a} (I can't rule out {b})",
        "{a}\n\nAnother possibility is {b}.",
        "Answer: {a}\nIf that is wrong, {b}.",
    ],
)
GAME24_TRAILERS = ([" = 24 ✓", " = 24"], [" = 24 ✅", " (= 24)"])
GAME24_PREFIXES = (["One solution is ", "The expression is "], ["A valid expression is ", "Solution: "])


# ------------------------------------------------------------------ value renderings by the gold's type
_INT = re.compile(r"-?\d+")
_DEC = re.compile(r"-?\d+\.\d+")
_FRAC = re.compile(r"(-?)(\d+)/(\d+)")
_WITH_UNIT = re.compile(r"(-?\d+(?:\.\d+)?)\s+([A-Za-z]{1,3})")
_MONTHS = "January February March April May June July August September October November December".split()
_DATE_DMY = re.compile(r"(\d{1,2}) (" + "|".join(_MONTHS) + r") (\d{3,4})")
_DATE_MDY = re.compile(r"(" + "|".join(_MONTHS) + r") (\d{1,2}), (\d{3,4})")
_UNIT_WORDS = {"m": "meters", "km": "kilometers", "cm": "centimeters", "kg": "kilograms", "g": "grams", "s": "seconds"}
_FOLD = str.maketrans("áàâäãåéèêëíìîïóòôöõúùûüñçÁÉÍÓÚÑÇ", "aaaaaaeeeeiiiiooooouuuuncAEIOUNC")


def _sci(n: int) -> str | None:
    if abs(n) < 1000:
        return None
    digits = str(abs(n)).rstrip("0")
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return ("-" if n < 0 else "") + f"{mantissa} \\times 10^{{{len(str(abs(n))) - 1}}}"


def renderings(gold: str, person: bool = False) -> tuple[list[str], list[str]]:
    """Correct renderings of ``gold`` by its type: (tune half, held half); the gold as written is in both.
    ``person``: the question asks for a person, so initials may stand for given names."""
    g = gold.strip()
    if _INT.fullmatch(g):
        n = int(g)
        tune, held = [g, f"x = {g}"], [g, f"{g}.0"]
        if abs(n) >= 1000:
            tune.append(f"{n:,}")
            held.append(f"{n:,}".replace(",", " "))
            sci = _sci(n)
            if sci is not None:
                held.append(sci)
        return tune, held
    if _DEC.fullmatch(g):
        return [g, f"{g}0"], [g, f"x = {g}"]
    m = _FRAC.fullmatch(g)
    if m:
        sign, a, b = m.groups()
        return [g, f"{sign}\\frac{{{a}}}{{{b}}}"], [g, f"{sign}\\dfrac{{{a}}}{{{b}}}"]
    m = _WITH_UNIT.fullmatch(g)
    if m:
        number, unit = m.groups()
        held = [g, f"{number} {_UNIT_WORDS[unit]}"] if unit in _UNIT_WORDS else [g]
        return [g, number, f"{number}{unit}"], held
    m = _DATE_DMY.fullmatch(g)
    if m:
        d, mon, y = m.groups()
        iso = f"{int(y):04d}-{_MONTHS.index(mon) + 1:02d}-{int(d):02d}"
        return [g, f"{mon} {d}, {y}"], [g, iso, f"{mon[:3]} {d}, {y}"]
    m = _DATE_MDY.fullmatch(g)
    if m:
        mon, d, y = m.groups()
        iso = f"{int(y):04d}-{_MONTHS.index(mon) + 1:02d}-{int(d):02d}"
        return [g, f"{d} {mon} {y}"], [
            g,
            iso,
            f"{d}th of {mon} {y}" if d not in ("1", "2", "3") else f"{d} {mon[:3]} {y}",
        ]
    words = g.split()
    tune, held = [g, g.lower()], [g, g.upper()]
    if g.translate(_FOLD) != g:
        tune.append(g.translate(_FOLD))
        held.append(g.translate(_FOLD).lower())
    if person and 2 <= len(words) <= 4 and all(w[:1].isupper() and w.isalpha() for w in words):
        held.append(" ".join(f"{w[0]}." for w in words[:-1]) + " " + words[-1])
        tune.append(words[0][0] + ". " + " ".join(words[1:]))
    items = [p.strip() for p in re.split(r",\s*(?:and\s+)?|\s+and\s+", g)]
    if (
        (" and " in g or g.count(", ") >= 2) and len(items) >= 2 and len(g) < 80
    ):  # a list (two items and a comma: a place)
        tune.append(", ".join(items))
        held.append(", ".join(items[:-1]) + " and " + items[-1] if " and " not in g else " & ".join(items))
    return tune, held


def _choice_renderings(task: Task) -> tuple[list[str], list[str], list[str]]:
    options = list(task.metadata["options"])
    letters = "ABCDEFGHIJ"[: len(options)]
    gold = str(task.answer).strip().upper()
    text = options[letters.index(gold)].strip()
    unique = options.count(options[letters.index(gold)]) == 1 and len(text) < 120
    tune = [gold, f"({gold})", f"Option {gold}"] + ([f"{gold}. {text}"] if unique else [])
    held = [gold, f"{gold})", f"Choice {gold}"] + ([f"({gold}) {text}"] if unique else [])
    wrong = [x for x in letters if x != gold]
    return tune, held, wrong


def _game24_renderings(solution: str) -> tuple[list[str], list[str]]:
    spaced = re.sub(r"\s*([-+*/])\s*", r" \1 ", solution).strip()
    return [solution, solution.replace("*", "×")], [spaced, solution.replace("*", "·").replace("/", "÷")]


# ------------------------------------------------------------------ styles for one task
def _wrong_value(gold: str, pool: list[str]) -> str:
    return distractor(gold, [p for p in pool if p.strip().lower() != gold.strip().lower()])


def task_styles(
    task: Task, kind: str, pool: list[str], half: str, per_kind: int, seed: int = 0, sentences: bool = True
) -> list[Style]:
    """``per_kind`` correct answers and ``per_kind`` hedges (half in each candidate order) for ``task``,
    built from the ``half`` parts (``tune`` or ``held``); ``kind`` is ``value``, ``choice`` or ``game24``.
    ``sentences``: also the sentence families of :mod:`tests.answer_sentences` (``per_kind // 2`` of each,
    drawn from their own random stream, so the other styles are the same with or without them)."""
    h = HALVES.index(half)
    rng = random.Random(f"{seed}:{task.id}:{half}")
    prefixes, trailers = list(PREFIXES[h]), list(TRAILERS[h])
    if kind == "choice":
        tune, held, wrong_letters = _choice_renderings(task)
        values = (tune, held)[h]
        wrongs = [rng.choice(wrong_letters)]
        render_wrong: Callable[[str], str] = lambda w: w  # noqa: E731
    elif kind == "game24":
        solution = _game24_solution(task)
        if solution is None:
            return []
        values = _game24_renderings(solution)[h]
        numbers = list(task.metadata["numbers"])
        wrong = "+".join(str(n) for n in numbers) if sum(numbers) != 24 else "*".join(str(n) for n in numbers)
        wrongs = [wrong]
        prefixes = prefixes + list(GAME24_PREFIXES[h])
        trailers = trailers + list(GAME24_TRAILERS[h])
        render_wrong = lambda w: w  # noqa: E731
    else:
        golds = golds_of(task)
        if not golds or len(golds[0].split()) > 10:
            return []  # a gold that is a sentence (one HotpotQA record) is no short answer to restyle
        values = renderings(golds[0], bool(re.search(r"(?i)\bwho(?:m|se)?\b", task.question)))[h]
        wrongs = [_wrong_value(golds[0], pool)]
        render_wrong = lambda w: w  # noqa: E731
    decorations = DECORATIONS[h]
    out: list[Style] = []
    for i in range(per_kind):
        value = rng.choice(values)
        deco = rng.randrange(len(decorations))
        decorated = decorations[deco](value)
        trailer = rng.choice(trailers)
        if i % 3 == 2:  # a self-correction: a wrong draft, then the value
            frame = rng.choice(SELF_CORRECTIONS[h])
            draft = render_wrong(rng.choice(wrongs))
            answer = frame.format(w=draft, v=decorated) + trailer
            parts = f"correction:{SELF_CORRECTIONS[h].index(frame)}|deco:{deco}|trailer:{trailers.index(trailer)}"
        else:
            prefix = rng.choice(prefixes)
            answer = prefix + decorated + trailer
            parts = f"prefix:{prefixes.index(prefix)}|deco:{deco}|value:{values.index(value)}"
            parts += f"|trailer:{trailers.index(trailer)}"
        out.append(Style("correct", answer, parts))
    for i in range(per_kind):
        value, wrong = rng.choice(values), render_wrong(rng.choice(wrongs))
        rival = rng.choice(RIVALS[h])
        order = "gold-first" if i % 2 == 0 else "gold-second"
        a, b = (value, wrong) if order == "gold-first" else (wrong, value)
        prefix = rng.choice(prefixes) if "{a}" == rival[:3] and not rival.startswith("{a}\n") else ""
        trailer = rng.choice(trailers)
        answer = prefix + rival.format(a=a, b=b) + trailer
        out.append(Style("hedge", answer, f"rival:{RIVALS[h].index(rival)}|trailer:{trailers.index(trailer)}", order))
    if sentences:  # the families of tests/answer_sentences.py: answers inside sentences
        wrong_values = [render_wrong(w) for w in wrongs]
        for kind_, answer, parts, order in sentence_styles(task, kind, values, wrong_values, half, per_kind // 2, seed):
            out.append(Style(kind_, answer, parts, order))
    return out


def _game24_solution(task: Task) -> str | None:
    golds = [g for g in golds_of(task) if g and g != "None"]
    if golds:
        return golds[0].replace("×", "*").replace("÷", "/")
    from tests.reward_cases import _solve

    return _solve(tuple(task.metadata["numbers"]))
