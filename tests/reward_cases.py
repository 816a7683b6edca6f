"""Adversarial answers generated from gold answers: hedges (a careful human grader marks each wrong) and
committed correct answers (each marked right), in many templates, for every kind of registered env.

Used by ``tests/env/scoring/test_reward_quality.py`` (a deterministic sample, >= 10k of each) and
``perf/reward_quality.py`` (both error rates per env id, as JSON). The templates cover the classes of
issue 25: two-candidate LaTeX answers (``\\text{ ou }``, ``\\mbox{ oder }``, ``\\text{?}``, inside
``\\boxed{}``, five candidates), ``\\lor``/``‖``/``|``/Cyrillic "оr", lists, lines, sentences; and correct
answers with an explanation after them, units with ``^``, spaces as thousands separators, scientific
notation, quotes, filler phrases, negated alternatives, multiple choice with an explanation or naming the
rejected options, Game of 24 in a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from agentflow_env.types import Task

_FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
_INT = re.compile(r"-?\d+")
_DEC = re.compile(r"-?\d+\.\d+")


@dataclass(frozen=True)
class Case:
    """One answer to score: ``kind`` is ``hedge`` (must score 0) or ``correct`` (must score 1)."""

    kind: str
    template: str
    answer: str


def golds_of(task: Task) -> list[str]:
    answer = task.answer
    if answer is None:
        return []
    if isinstance(answer, (list, tuple)):
        return [str(a) for a in answer if a is not None and str(a).strip()]
    return [str(answer)] if str(answer).strip() else []


def _numeric(gold: str) -> Fraction | None:
    g = gold.strip()
    if _INT.fullmatch(g) or _DEC.fullmatch(g):
        return Fraction(g)
    return None


def _like(value: Fraction, gold: str) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return (
        f"{float(value):.{max(1, len(gold.split('.')[-1]))}f}"
        if "." in gold
        else f"{value.numerator}/{value.denominator}"
    )


def _spaced(n: int) -> str:
    s = f"{abs(n):,}".replace(",", " ")
    return ("-" if n < 0 else "") + s


def _scientific(n: int) -> str | None:
    """``2338520`` -> ``2.33852 \\times 10^{6}`` (exact)."""
    if abs(n) < 1000:
        return None
    digits = str(abs(n)).rstrip("0")
    exp = len(str(abs(n))) - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return ("-" if n < 0 else "") + f"{mantissa} \\times 10^{{{exp}}}"


def distractor(gold: str, others: list[str]) -> str:
    """A wrong answer of the same kind: gold + 1 for numbers, another task's gold for anything else."""
    value = _numeric(gold)
    if value is not None:
        return _like(value + 1, gold)
    g = gold.lower()
    for other in others:
        o = other.lower()
        if o and g not in o and o not in g and _numeric(other) is None and len(other) < 80:
            return other
    return "Xylophone Quartz"


# ------------------------------------------------------------------ value answers (QA, math, numbers)
def value_cases(gold: str, wrong: str, extra: list[str]) -> Iterator[Case]:
    """``gold`` is the task's gold, ``wrong`` one distractor, ``extra`` three more distractors."""
    g, w = gold.strip(), wrong.strip()
    a, b, c = (extra + ["Q1", "Q2", "Q3"])[:3]
    cyr_or = "\u043er"  # Cyrillic o + Latin r
    hedges = {
        "or": f"{w} or {g}",
        "or-reversed": f"{g} or {w}",
        "comma-list": f"{g}, {w}",
        "comma-list-reversed": f"{w}, {g}",
        "semicolon": f"{g}; {w}",
        "and": f"{g} and {w}",
        "lines": f"{g}\n{w}",
        "bullets": f"- {g}\n- {w}",
        "sentences": f"{g}. {w}.",
        "text-ou": f"{g} \\text{{ ou }} {w}",
        "text-or-reversed": f"{w} \\text{{ or }} {g}",
        "mbox-oder": f"{g} \\mbox{{ oder }} {w}",
        "text-question": f"{g}\\text{{?}}{w}",
        "boxed-text-ou": f"\\boxed{{{g} \\text{{ ou }} {w}}}",
        "five-candidates": f"{a}, {b}, {g}, {c}, {w}",
        "five-text-ou": f"{a} \\text{{ ou }} {b} \\text{{ ou }} {g} \\text{{ ou }} {c} \\text{{ ou }} {w}",
        "lor": f"{g}\\lor {w}",
        "double-bar": f"{g} ‖ {w}",
        "bar": f"{g}|{w}",
        "cyrillic-or": f"{g} {cyr_or} {w}",
        "slash": f"{g}/{w}",
        "paren-or": f"{g} (or {w})",
        "maybe": f"{g}, maybe {w}",
        "possibly": f"{g} or possibly {w}",
        "either": f"either {g} or {w}",
        "boxed-then-or": f"\\boxed{{{g}}} or {w}",
        "two-boxes": f"\\boxed{{{g}}} \\boxed{{{w}}}",
        "two-tags": f"<answer>{g}</answer><answer>{w}</answer>",
        "two-answer-lines": f"Answer: {g}\nAnswer: {w}",
        "answer-line-or": f"Answer: {g} or {w}\nExplanation: I could not decide between them.",
        "vs": f"{g} vs {w}",
        "questions": f"{g}? {w}?",
        "dash-perhaps": f"{g} — or perhaps {w}",
        "sentence-or": f"{g}. Or {w}.",
        "could-be": f"It is {g}, or it could be {w}.",
        "paren-possibly": f"{g} (possibly {w})",
        "but-might": f"I think {g}, but it might be {w}.",
        "full-width-or": f"{g.translate(_FULL_WIDTH)} or {w.translate(_FULL_WIDTH)}",
        "after-tag-or": f"<answer>{g}</answer> or {w}",
        "final-or": f"Final Answer: {w} or {g}",
    }
    value = _numeric(g)
    if value is not None:
        del hedges["slash"]  # "0/1" is one number, a fraction
        lo, hi = _like(value - 1, g), _like(value + 1, g)
        hedges.update(
            {
                "frac-text-ou": f"\\frac{{{g}}}{{1}} \\text{{ ou }} \\frac{{{w}}}{{1}}",
                "frac-mbox-oder": f"\\frac{{{w}}}{{1}} \\mbox{{ oder }} \\frac{{{g}}}{{1}}",
                "frac-text-question": f"\\frac{{{g}}}{{1}}\\text{{?}}\\frac{{{w}}}{{1}}",
                "boxed-frac-ou": f"\\boxed{{\\frac{{{g}}}{{1}} \\text{{ ou }} \\frac{{{w}}}{{1}}}}",
                "space": f"{w} {g}",
                "equals-chain": f"{w} = {g}",
                "plus-minus": f"{g} \\pm 1",
                "between": f"between {lo} and {hi}",
                "range": f"{lo}–{hi}",
                "at-least": f"at least {g}",
                "lor-tight": f"{g}\\lor{w}",
            }
        )
    for name, text in hedges.items():
        yield Case("hedge", name, text)

    correct = {
        "bare": g,
        "answer-is": f"The answer is {g}.",
        "final-answer": f"Final Answer: {g}",
        "answer-explanation": f"Answer: {g}\nExplanation: I found it in the retrieved documents and checked it twice.",
        "boxed": f"\\boxed{{{g}}}",
        "tag": f"<answer>{g}</answer>",
        "because": f"{g}, because I checked it with the calculator.",
        "then-sentence": f"{g}. I verified this with the tools.",
        "i-believe": f"I believe it is {g}.",
        "quotes": f"“{g}”",
        "not-other": f"The answer is {g}, not {w}.",
        "paren-explanation": f"It's {g} (I double-checked the sources).",
        "emphasis": f"**{g}**",
        "so-boxed": f"So the final answer is \\boxed{{{g}}}.",
        "then-paragraph": f"{g}\n\nI found this by searching the documents.",
        "dash-explanation": f"Final Answer: {g} — confirmed by two searches.",
        "fairly-confident": f"I'm fairly confident the answer is {g}.",
        "is-the-answer": f"{g} is the answer.",
        "markdown-answer": f"**Process summary:** I searched and read the sources.\n**Answer:** {g}",
        "heading": f"### Final Answer\n{g}",
        "not-then": f"Not {w} but {g}.",
    }
    if value is not None:
        correct.update(
            {
                "x-equals": f"x = {g}",
                "units-sq": f"{g} cm^2",
                "full-width": g.translate(_FULL_WIDTH),
                "because-numbers": f"{g}, which I computed step by step.",
            }
        )
        if value.denominator == 1 and abs(value) >= 1000:
            n = value.numerator
            correct.update({"thousand-spaces": _spaced(n), "thousand-commas": f"{n:,}"})
            sci = _scientific(n)
            if sci is not None:
                correct["scientific"] = sci
                correct["scientific-sentence"] = f"The total is {sci}."
    for name, text in correct.items():
        yield Case("correct", name, text)


# ------------------------------------------------------------------ multiple choice
def choice_cases(task: Task) -> Iterator[Case]:
    options = list(task.metadata["options"])
    letters = "ABCDEFGHIJ"[: len(options)]
    gold = str(task.answer).strip().upper()
    others = [x for x in letters if x != gold]
    o1, o2 = others[0], others[1 % len(others)]
    text = options[letters.index(gold)].strip()
    other_text = options[letters.index(o1)].strip()
    cyr_or = "\u043er"
    hedges = {
        "all-letters": ", ".join(letters),
        "all-or": " or ".join(letters),
        "all-lines": "\n".join(f"{x}. {t}" for x, t in zip(letters, options)),
        "or": f"{gold} or {o1}",
        "or-reversed": f"{o1} or {gold}",
        "answer-is-or": f"The answer is {gold} or {o1}.",
        "comma": f"{gold}, {o1}",
        "and": f"{gold} and {o1}",
        "slash": f"{gold}/{o1}",
        "boxed-or": f"\\boxed{{{gold}}} or {o1}",
        "two-boxes": f"\\boxed{{{gold}}}\\boxed{{{o1}}}",
        "two-tags": f"<answer>{gold}</answer><answer>{o1}</answer>",
        "lines": f"{gold}\n{o1}",
        "sentences": f"{gold}. {o1}.",
        "text-ou": f"{gold} \\text{{ ou }} {o1}",
        "bar": f"{gold}|{o1}",
        "double-bar": f"{gold} ‖ {o1}",
        "cyrillic-or": f"{gold} {cyr_or} {o1}",
        "two-answer-lines": f"Answer: {gold}\nAnswer: {o1}",
        "either": f"Either {gold} or {o1}.",
        "paren-maybe": f"{gold} (or maybe {o1})",
        "maybe": f"{gold}, maybe {o1}",
        "pick-or": f"I'd pick {gold} or {o1}",
        "three": f"{gold}, {o1} or {o2}",
        "correct-both": f"{gold} and {o1} are correct.",
    }
    if options.count(options[letters.index(o1)]) == 1 and other_text.lower() != text.lower():
        hedges["letter-other-text"] = f"{gold}. {other_text}"
    for name, answer in hedges.items():
        yield Case("hedge", name, answer)
    correct = {
        "letter": gold,
        "paren": f"({gold})",
        "answer-line": f"Answer: {gold}",
        "answer-explanation": (
            f"Answer: {gold}\nExplanation: the option fits every fact in the question; the others do not."
        ),
        "rejects-others": f"{gold} is correct; {o1} and {o2} are not.",
        "answer-is": f"The answer is {gold}.",
        "boxed": f"\\boxed{{{gold}}}",
        "choose": f"I'd choose ({gold}).",
        "emphasis": f"**{gold}**",
        "because": f"{gold}, because it is the only option consistent with the data.",
        "final": f"Final Answer: {gold}",
        "correct-option": f"The correct option is {gold}.",
        "not-other": f"{gold}, not {o1}.",
        "then-paragraph": f"{gold}\n\nThe other options contradict the question.",
    }
    if options.count(options[letters.index(gold)]) == 1:
        correct["letter-text"] = f"{gold}. {text}"
    for name, answer in correct.items():
        yield Case("correct", name, answer)


# ------------------------------------------------------------------ Game of 24
def game24_cases(task: Task, solution: str) -> Iterator[Case]:
    numbers = list(task.metadata["numbers"])
    wrong = "+".join(str(n) for n in numbers)
    if sum(numbers) == 24:
        wrong = "*".join(str(n) for n in numbers)
    sol = solution
    hedges = {
        "or": f"{sol} or {wrong}",
        "or-reversed": f"{wrong} or {sol}",
        "equals-or": f"{sol} = 24 or {wrong}",
        "lines": f"{sol}\n{wrong}",
        "semicolon": f"{sol}; {wrong}",
        "comma": f"{sol}, {wrong}",
        "text-ou": f"{sol} \\text{{ ou }} {wrong}",
        "boxed-or": f"\\boxed{{{sol}}} or {wrong}",
        "two-boxes": f"\\boxed{{{sol}}}\\boxed{{{wrong}}}",
        "two-tags": f"<answer>{sol}</answer><answer>{wrong}</answer>",
        "bar": f"{sol} | {wrong}",
        "two-answer-lines": f"Answer: {sol}\nAnswer: {wrong}",
        "sentence-or": f"The expression is {sol} or {wrong}.",
        "paren-or": f"{sol} (or {wrong})",
        "maybe": f"{sol}, maybe {wrong}",
        "either": f"either {sol} or {wrong}",
        "equals-chain": f"{sol} = {wrong}",
    }
    for name, answer in hedges.items():
        yield Case("hedge", name, answer)
    correct = {
        "bare": sol,
        "equals-24": f"{sol} = 24",
        "sentence": f"The expression is {sol}.",
        "boxed": f"\\boxed{{{sol}}}",
        "tag": f"<answer>{sol}</answer>",
        "answer-explanation": f"Answer: {sol}\nExplanation: each number is used exactly once.",
        "which": f"{sol} = 24, which uses each number once.",
        "i-believe": f"I believe it is {sol}.",
        "final": f"Final Answer: {sol}",
        "then-sentence": f"{sol}. Each number is used once.",
    }
    for name, answer in correct.items():
        yield Case("correct", name, answer)


# ------------------------------------------------------------------ per task
@cache
def _solve(numbers: tuple[int, ...]) -> str | None:
    from benchmarks.synthetic.game24 import solve_24

    return solve_24(list(numbers))


def task_cases(task: Task, scorer_kind: str, other_golds: list[str]) -> list[Case]:
    """Every case for one task; ``scorer_kind`` is ``choice``, ``game24`` or ``value``."""
    if scorer_kind == "choice":
        return list(choice_cases(task))
    if scorer_kind == "game24":
        golds = [g for g in golds_of(task) if g and g != "None"]
        solution = golds[0] if golds else _solve(tuple(task.metadata["numbers"]))
        if solution is None:
            return []
        return list(game24_cases(task, solution.replace("×", "*").replace("÷", "/")))
    golds = golds_of(task)
    if not golds:
        return []
    gold = golds[0]
    pool = [o for o in other_golds if o not in golds]
    wrong = distractor(gold, pool)
    extra = [distractor(gold, pool[i:]) for i in (3, 7, 11)]
    if _numeric(gold) is not None:
        v = _numeric(gold)
        extra = [_like(v + k, gold) for k in (2, 3, 5)]
    extra = [e for e in extra if e.lower() != gold.lower() and e.lower() != wrong.lower()]
    return list(value_cases(gold, wrong, extra))


def kind_of(scorer: object) -> str:
    from agentflow_env.scoring.choice import ChoiceScorer
    from agentflow_env.scoring.game24 import Game24Scorer
    from agentflow_env.scoring.versioned import unwrap_scorer

    scorer = unwrap_scorer(scorer)
    if isinstance(scorer, ChoiceScorer):
        return "choice"
    if isinstance(scorer, Game24Scorer):
        return "game24"
    return "value"


def spread(n: int, k: int) -> list[int]:
    """``k`` task indices spread evenly over ``n`` tasks (deterministic)."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})
