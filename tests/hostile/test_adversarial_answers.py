"""Adversarial answers against every registered env id, scored by the env itself (reset, then one
``Final Answer:`` step): answers that hedge between the gold and distractors, list every option, or
carry several expressions earn 0 reward; single-value forms of the gold earn 1.

Every hedge here is deterministic, so "not better than chance" means exactly 0. Paper ids run when
AgentFlow's test sets are present (they skip cleanly otherwise); generated ids always run. A few tasks per
id keep the whole file to seconds.
"""

from __future__ import annotations

import re
from fractions import Fraction

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.registration import registered_ids
from agentflow_env.scoring.choice import ChoiceScorer, option_letters
from agentflow_env.scoring.commitment import number_value
from agentflow_env.scoring.game24 import Game24Scorer
from agentflow_env.scoring.grammar9 import _surname_first
from agentflow_env.scoring.versioned import unwrap_scorer
from agentflow_env.tools.calculator.tool import CalculatorTool
from agentflow_env.types import Task
from benchmarks.paper.catalog import BENCHMARKS
from benchmarks.synthetic.game24 import solve_24

IDS = registered_ids()
pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")  # v0 ids still run
TASKS_PER_ID = 4
_FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def _make(env_id: str, request: pytest.FixtureRequest) -> gym.Env:
    kwargs = {"tools": [CalculatorTool()]}
    if gym.spec(env_id).kwargs.get("benchmark") in BENCHMARKS:
        kwargs["data_dir"] = str(request.getfixturevalue("testsets_dir"))
    return gym.make(env_id, **kwargs)


def _rewards(env: gym.Env, index: int, answer: str) -> tuple[float, float]:
    """The episode's reward for ``Final Answer: answer``, and the env's scorer on the raw answer."""
    env.reset(options={"index": index})
    _, reward, terminated, _, info = env.step(f"Final Answer: {answer}")
    assert terminated and info["answer"], (answer, info.get("answer"))
    base = env.unwrapped
    return float(reward), float(base.scorer(answer, base.task))


def _golds(task: Task) -> list[str]:
    answer = task.answer
    return [str(a) for a in answer] if isinstance(answer, (list, tuple)) else [str(answer)]


def _format_like(value: Fraction, gold: str) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):g}" if "." in gold else f"{value.numerator}/{value.denominator}"


def _numeric(gold: str) -> Fraction | None:
    return number_value(gold) if _NUMBER.fullmatch(gold.strip().replace(",", "")) else None


def _distractor(gold: str, others: list[str]) -> str:
    """A wrong answer of the same kind: gold + 1 for numbers, another task's gold for anything else."""
    value = _numeric(gold)
    if value is not None:
        return _format_like(value + 1, gold)
    g = gold.lower()
    for other in others:
        o = other.lower()
        if o and g not in o and o not in g:
            return other
    return "Xylophone Quartz"


def value_hedges(gold: str, wrong: str) -> list[str]:
    """Answers that name the gold and something else: every one must score 0."""
    g_fw, w_fw = gold.translate(_FULL_WIDTH), wrong.translate(_FULL_WIDTH)
    hedges = [
        f"{wrong} or {gold}",
        f"{gold} or {wrong}",
        f"{wrong}, {gold}",
        f"{gold}, {wrong}",
        f"1, 2, 3, {gold}",
        f"x = {wrong} or x = {gold}",
        f"either {wrong} or {gold}",
        f"{wrong} and/or {gold}",
        f"{wrong} and {gold}",
        f"{wrong}; {gold}",
        f"{wrong} | {gold}",
        f"{wrong}\n{gold}",
        f"- {wrong}\n- {gold}",
        f"{gold} (or maybe {wrong})",
        f"{gold} vs {wrong}",
        f"{gold} ± 1",
        f"{gold} \\pm 1",
        f"\\boxed{{{wrong}, {gold}}}",
        f"\\boxed{{{wrong}}} \\boxed{{{gold}}}",
        f"\\boxed{{{gold}}} or {wrong}",
        f"<answer>{wrong}</answer><answer>{gold}</answer>",
        f"{w_fw} or {g_fw}",
        f"{w_fw}, {g_fw}",
        f"{{{wrong}, {gold}}}",
        f"[{wrong}, {gold}]",
        f"The answer is {gold}, or maybe {wrong}.",
        # "The answer is {gold}, not {wrong}." commits to the gold since v2 (a negated alternative is not a
        # candidate); tests/env/scoring/test_reward_quality.py scores it as a correct answer
    ]
    value, other = _numeric(gold), _numeric(wrong)
    if value is not None and other is not None:
        lo, hi = sorted((value - 1, value + 1))
        hedges += [
            f"{wrong} {gold}",
            f"{wrong} = {gold}",
            f"between {_format_like(lo, gold)} and {_format_like(hi, gold)}",
            f"{_format_like(lo, gold)}–{_format_like(hi, gold)}",
            f"{_format_like(lo, gold)} to {_format_like(hi, gold)}",
            f"x \\geq {gold}",
            f"at least {gold}",
        ]
    return hedges


def value_singles(gold: str, numeric_scorer: bool) -> list[str]:
    """Single-value forms of the gold: every one must score 1."""
    forms = [gold, f"The answer is {gold}.", f"Final Answer: {gold}", f"<answer>{gold}</answer>", f"\\boxed{{{gold}}}"]
    if numeric_scorer:
        forms += [f"x = {gold}", gold.translate(_FULL_WIDTH), f"So the answer is \\boxed{{{gold}}}."]
    return forms


def choice_cases(task: Task) -> tuple[list[str], list[str]]:
    options = list(task.metadata["options"])
    letters = option_letters(len(options))
    gold = str(task.answer)
    other = next(x for x in letters if x != gold)
    rendered = "\n".join(f"{x}. {t}" for x, t in zip(letters, options))
    hedges = [
        ", ".join(letters),
        " or ".join(letters),
        "/".join(letters),
        " ".join(f"({x})" for x in letters),
        rendered,
        ", ".join(options),
        "\n".join(options),
        "".join(f"\\boxed{{{x}}}" for x in letters),
        "".join(f"<answer>{x}</answer>" for x in letters),
        f"The answer is {gold} or {other}.",
        f"{other} or {gold}",
        f"{gold}, {other}",
        f"{gold} and {other}",
        f"I'd choose ({other}) or ({gold})",
        f"\\boxed{{{gold}}} or {other}",
        f"{gold} ({options[letters.index(other)]})",
        f"{gold}. {options[letters.index(other)]}"
        if options.count(options[letters.index(other)]) == 1
        else ", ".join(letters),
    ]
    singles = [
        gold,
        f"({gold})",
        f"The answer is ({gold})",
        f"{gold} is correct.",
        f"I'd choose ({gold})",
        f"\\boxed{{{gold}}}",
        f"**{gold}**",
        f"Answer: {gold}",
    ]
    text = options[letters.index(gold)]
    if sum(o.strip() == text.strip() for o in options) == 1 and len(text.strip()) > 1:
        singles.append(text)
    return hedges, singles


def game24_cases(task: Task) -> tuple[list[str], list[str]]:
    numbers = list(task.metadata["numbers"])
    golds = [g for g in _golds(task) if g and g != "None"] or [solve_24(numbers)]
    solution = golds[0]
    wrong = "+".join(str(n) for n in numbers)
    if sum(numbers) == 24:
        wrong = "*".join(str(n) for n in numbers)
    hedges = [
        f"{solution}=24 or {wrong}",
        f"{solution} or {wrong}",
        f"{wrong} or {solution}",
        f"either {wrong} or {solution}",
        f"{wrong}, {solution}",
        f"{wrong}; {solution}",
        f"{wrong}\n{solution}",
        f"\\boxed{{{wrong}}}\\boxed{{{solution}}}",
        f"<answer>{wrong}</answer><answer>{solution}</answer>",
        f"{solution} = {wrong}",
    ]
    if len(golds) > 1:
        hedges.append(f"{golds[0]} or {golds[1]}")  # two right expressions are still two
    singles = [solution, f"{solution} = 24", f"\\boxed{{{solution}}}", f"<answer>{solution}</answer>"]
    return hedges, singles


def _pick(n: int) -> list[int]:
    return sorted({round(i * (n - 1) / max(1, TASKS_PER_ID - 1)) for i in range(TASKS_PER_ID)})


def _special(tasks) -> list[int]:
    """The first task with a list-valued gold and the first with a gold holding a comma and digits (a date,
    a thousands number), among the first 200: the golds whose own commas must not read as hedges."""
    found: dict[str, int] = {}
    for i in range(min(len(tasks), 200)):
        gold = _golds(tasks[i])[0]
        if re.search(r"[,;]", gold) and not re.search(r"\d", gold):
            found.setdefault("list", i)
        elif "," in gold and re.search(r"\d", gold):
            found.setdefault("digits", i)
    return list(found.values())


def _reads_comma_golds_as_names(env_id: str) -> bool:
    """The -v9 to -v11 ids: grammar 9's surname-first rule took a two-to-four-word gold holding a comma for a
    name, so "Germany, Oranienburg" read as the gold "Oranienburg, Germany" (agentflow_env/scoring/grammar12.py)."""
    return env_id.rsplit("-v", 1)[1] in ("9", "10", "11")


def _reordered_name(answer: str, golds: list[str]) -> bool:
    """``answer`` is read as a comma gold's name reordered by grammars 9-11 only ("Germany, Oranienburg")."""
    return _surname_first(answer, golds, True) != _surname_first(answer, golds, False)


@pytest.mark.parametrize("env_id", IDS)
def test_hedges_score_zero_and_single_values_score_one(env_id, request):
    env = _make(env_id, request)
    base = env.unwrapped
    tasks = base.tasks
    indices = sorted(set(_pick(min(len(tasks), 400))) | set(_special(tasks)))
    all_golds = [g for i in indices for g in _golds(tasks[i])]
    all_golds += [g for i in range(min(len(tasks), 12)) for g in _golds(tasks[i])]
    scorer = unwrap_scorer(base.scorer)  # the -v3 ids wrap it in the answer grammar
    numeric_scorer = not isinstance(scorer, (ChoiceScorer, Game24Scorer)) and type(scorer).__name__ not in (
        "QAScorer",
        "WorldAnswerScorer",
    )
    failures = []
    for index in indices:
        task = tasks[index]
        if isinstance(scorer, ChoiceScorer):
            hedges, singles = choice_cases(task)
        elif isinstance(scorer, Game24Scorer):
            hedges, singles = game24_cases(task)
        else:
            gold = _golds(task)[0]
            wrong = _distractor(gold, [g for g in all_golds if g not in _golds(task)])
            hedges = value_hedges(gold, wrong)
            singles = value_singles(gold, numeric_scorer or _numeric(gold) is not None)
            if re.search(r"[,;]", gold) and _numeric(gold) is None:  # a list-valued gold: exactly its items
                items = [p.strip() for p in re.split(r"[,;]", gold)]
                hedges.append(f"{gold}, {wrong}")
                if len(set(items)) > 1:
                    hedges.append(", ".join(reversed(items)))
        for answer in hedges:
            expected = (0.0, 0.0)
            if _reads_comma_golds_as_names(env_id) and _reordered_name(answer, _golds(task)):
                expected = (1.0, 1.0)  # grammars 9-11's known reading, kept for their ids (grammar 12 drops it)
            if _rewards(env, index, answer) != expected:
                failures.append(("hedge scored", task.id, _golds(task)[:2], answer))
        for answer in singles:
            if _rewards(env, index, answer) != (1.0, 1.0):
                failures.append(("single value missed", task.id, _golds(task)[:2], answer))
    env.close()
    assert not failures, "\n".join(map(repr, failures[:30]))
