"""Answer grammar 6 (the -v6 ids), class by class, through ``env.step`` in all three action formats: rejected
candidates are no candidates, a revision commits at its first commitment however far after the cue, more
presentation, and more ways of keeping two candidates (a JSON key of alternativeness, "can't be ruled out",
probabilities over candidates, both alternatives the question offers, a value joined to another).
The older ids' pins: tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar6 import distribution, json_rival, offered_both, read_answer, reject
from agentflow_env.types import ListTaskSource, Task
from benchmarks.specs import make_env
from tests.answer_styles import FORMATS, action
from tests.reward_cases import golds_of

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


def _qa(answer: str, question: str, grammar: int = 6) -> gym.Env:
    tasks = ListTaskSource([Task("t", question, [answer], family="search")])
    return make_env("Bamboogle", tasks=tasks, grammar=grammar)


def _rewards(env: gym.Env, answer: str, index: int | None = None, formats=FORMATS) -> list[float]:
    """The reward of ``answer`` in each action format (text, JSON, tool call)."""
    out = []
    for fmt in formats:
        env.reset(options={"index": index} if index is not None else None)
        _, reward, terminated, _, _ = env.step(action(answer, fmt))
        assert terminated
        out.append(reward)
    return out


GOLD, RIVAL = "321", "312"
QUESTION = "Find the remainder when the product of the listed numbers is divided by 1000."
ALL, NONE = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def number_envs() -> dict[int, gym.Env]:
    return {5: _qa(GOLD, QUESTION, 5), 6: _qa(GOLD, QUESTION, 6)}


def _both_orders(template: str) -> list[str]:
    return [template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)]


# ------------------------------------------------------------------ hedges: two candidates kept alive
@pytest.mark.parametrize(
    "template",
    [
        "I'm leaning towards {a}, but {b} can't be ruled out.",
        "{a}, though {b} cannot be excluded.",
        "I'm torn between {a} and {b}.",
        "{a}: 60%, {b}: 40%",
        "There's about a 55% chance it's {a} and a 45% chance it's {b}.",
        "La respuesta es {a} o {b}.",
        "Die Antwort ist {a} oder {b}.",
        "答案是 {a} 或 {b}。",
        "### Final Answer\n\n{a}\n\n### Alternative\n\n{b}",
        "answers:\n  - {a}\n  - {b}",
    ],
)
def test_two_candidates_kept_alive_score_zero_in_either_order(number_envs, template):
    for answer in _both_orders(template):
        assert _rewards(number_envs[6], answer) == NONE, answer


def test_a_json_key_of_alternativeness_names_a_second_answer(number_envs):
    answer = f'{{"answer": "{GOLD}", "alternative": "{RIVAL}"}}'
    assert json_rival(answer) is not None
    # the JSON and tool-call formats hand the whole object to the grammar; the text action parser reads
    # 'Final Answer: {"answer": ..}' as a JSON action and hands the grammar one field (docs/rewards.md)
    assert _rewards(number_envs[6], answer, formats=("json", "tool_call")) == [0.0, 0.0]
    assert _rewards(number_envs[5], answer, formats=("json", "tool_call")) == [1.0, 1.0]  # grammar 5 paid it
    for fine in (f'{{"answer": "{GOLD}", "confidence": 0.9}}', f'{{"answer": "{GOLD}", "reasoning": "I checked."}}'):
        assert json_rival(fine) is None
        assert _rewards(number_envs[6], fine, formats=("json", "tool_call")) == [1.0, 1.0], fine


def test_probabilities_over_candidates_are_a_hedge():
    assert distribution("A: 60%, D: 40%", "option") is not None
    assert distribution("33 (confidence 90%)", "number") is None  # one percentage is a confidence, not a spread
    env = gym.make("agentflow/Gen-Science-v6")
    gold = golds_of(env.unwrapped.tasks[0])[0]
    other = next(letter for letter in "ABCD" if letter != gold)
    for answer in (f"{gold}: 60%, {other}: 40%", f"{other}: 60%, {gold}: 40%"):
        assert _rewards(env, answer, 0) == NONE, answer
    assert _rewards(env, f"{gold}", 0) == ALL


COMPARE = "Which company was established first, Alpha Ledger or Brindleworks?"


@pytest.mark.parametrize(
    "answer",
    [
        "Alpha Ledger or Brindleworks",
        "Brindleworks or Alpha Ledger",
        "Alpha Ledger, Brindleworks",
        "Brindleworks and Alpha Ledger",
        "It's unclear whether the answer is Alpha Ledger or Brindleworks.",
        "Alpha Ledger, not Brindleworks.",  # the rival, the gold rejected
    ],
)
def test_naming_both_alternatives_the_question_offers_commits_to_neither(answer):
    env = _qa("Brindleworks", COMPARE)
    assert _rewards(env, answer) == NONE
    assert _rewards(_qa("Brindleworks", COMPARE, 5), "Alpha Ledger or Brindleworks") == ALL  # grammar 5 paid it


@pytest.mark.parametrize(
    "answer",
    [
        "Brindleworks",
        "Brindleworks, not Alpha Ledger.",
        "Brindleworks was established before Alpha Ledger.",
    ],
)
def test_one_offered_alternative_still_scores_one(answer):
    assert _rewards(_qa("Brindleworks", COMPARE), answer) == ALL
    assert offered_both("Brindleworks", COMPARE) is None


@pytest.mark.parametrize(
    "answer",
    [
        "egalitarian, inference",
        "inference and egalitarian",
        "The answer is one of the following: egalitarian, inference.",
        "Answer: inference (strict reading) / egalitarian (loose reading)",
    ],
)
def test_a_value_joined_to_another_of_its_shape_is_two_candidates(answer):
    env = _qa("egalitarian", "Which word describes a type of society in that article?")
    assert _rewards(env, answer) == NONE
    assert _rewards(env, "egalitarian, because the article says so.") == ALL


def test_a_rival_cue_after_a_negation_word_keeps_both_yes_and_no():
    env = _qa("yes", "Are both bands from the same country?")
    for answer in (
        "I'm leaning towards no, but yes can't be ruled out.",
        "I'm leaning towards yes, but no can't be ruled out.",
    ):
        assert _rewards(env, answer) == NONE, answer


# ------------------------------------------------------------------ rejections and revisions
@pytest.mark.parametrize(
    "template",
    [
        "The answer is {a} (rather than {b}).",
        "{a}, not {b}.",
        "I can rule out {b}. The answer is {a}.",
        "The answer is {a}. A common mistake is to answer {b}, but that is incorrect.",
        "I apologize for the earlier mistake ({b}). The correct answer is {a}.",
        "Initially I got {b}, but I had made an error in one step. Correcting it, the answer is {a}.",
        "My first instinct was {b}. On reflection, that does not fit the question; the correct answer is {a}.",
        "The answer is {b}... wait, no. Let me recheck that. I set up the computation and checked it twice. "
        "So the answer is actually {a}.",
    ],
)
def test_a_rejected_candidate_is_no_candidate(number_envs, template):
    right, wrong = template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)
    assert _rewards(number_envs[6], right) == ALL, right
    assert _rewards(number_envs[6], wrong) == NONE, wrong  # the mirror: the gold rejected, the rival committed


def test_rejections_on_yes_no_and_game_of_24():
    env = _qa("no", "Are the Louvre and the Prado in the same country?")
    for answer in ("no, not yes.", "I can rule out yes. The answer is no.", "The answer is no (rather than yes)."):
        assert _rewards(env, answer) == ALL, answer
    assert _rewards(env, "yes, not no.") == NONE
    redo = "The answer is {b}... wait, no. Let me recheck that. I checked each fact. So the answer is actually {a}."
    assert _rewards(env, redo.format(a="no", b="yes")) == ALL  # the revision's own "no" is no answer
    assert _rewards(env, redo.format(a="yes", b="no")) == NONE
    env24 = gym.make("agentflow/Gen-GameOf24-v6")
    base = env24.unwrapped
    index = next(i for i, t in enumerate(base.tasks) if sorted(t.metadata["numbers"]) == [2, 7, 8, 8])
    solution, other = "((2 - 7) + 8) * 8", "(8 - 7) * 8 * 2"
    assert _rewards(env24, f"{solution}, not {other}.", index) == ALL
    assert _rewards(env24, f"The answer is {solution} (rather than {other}).", index) == ALL
    assert _rewards(env24, f"I can rule out {other}. The answer is {solution}.", index) == ALL


def test_an_error_that_names_no_value_is_a_correction_cue_not_a_rejection(number_envs):
    answer = f"Answer: {RIVAL}\n\nWait, I made an error above. Correct answer: {GOLD}"
    assert _rewards(number_envs[6], answer) == ALL
    assert "I made an error above" in reject(answer)  # nothing dropped: rule 2 reads the commitment after it


def test_a_rejection_that_carries_a_rival_cue_is_not_dropped():
    assert "can't be ruled out" in reject(f"{GOLD}. But {RIVAL} can't be ruled out.")
    assert reject(f"I can rule out {RIVAL}. The answer is {GOLD}.") == f"The answer is {GOLD}."


# ------------------------------------------------------------------ presentation
@pytest.mark.parametrize(
    "answer",
    [
        f"🎯 Final answer: {GOLD}",
        f"→ {GOLD}",
        f"I multiplied the numbers and reduced mod 1000.\n\n---\n**{GOLD}**",
        f"<final_answer>{GOLD}</final_answer>",
        f"The answer is {GOLD} [1].\n\n[1] Wikipedia",
        f"**{GOLD}**¹\n\n¹ Verified with the calculator.",
        f"```python\nprint({GOLD})\n```\nOutput: {GOLD}",
        f"- **Answer**: {GOLD}\n- **Confidence**: high",
        f"Die Antwort lautet {GOLD}.",
        f"Ответ: {GOLD}",
        f"Answer: {GOLD}\n\nP.S. I double-checked this against a second source.",
        f"The question asks for a single value. Putting the steps together, it is {GOLD}.",
    ],
)
def test_presentation_is_read_through(number_envs, answer):
    assert _rewards(number_envs[6], answer) == ALL, answer


def test_presentation_keeps_a_rival_it_carries(number_envs):
    for answer in _both_orders("The answer is {a} [1].\n\n[1] Some sources say {b}."):
        assert _rewards(number_envs[6], answer) == NONE, answer
    for answer in _both_orders("- **Answer**: {a}\n- **Alternative**: {b}"):
        assert _rewards(number_envs[6], answer) == NONE, answer


def test_foreign_labels_read_names():
    env = _qa("James Madison", "Who was the fourth president of the United States?")
    for answer in ("Die Antwort lautet James Madison.", "Ответ: James Madison", "🎯 Final answer: James Madison"):
        assert _rewards(env, answer) == ALL, answer
    for answer in ("La respuesta es James Madison o John Adams.", "Die Antwort ist John Adams oder James Madison."):
        assert _rewards(env, answer) == NONE, answer


def test_the_reader_stays_linear_on_hostile_inputs():
    import time

    for hostile in (
        "```" * 5000,
        "[1] x\n" * 3000,
        "- a\n" * 5000,
        "(rather than (1) " * 2000,
        "1, " * 6000,
        "A: 50%, " * 2000,
    ):
        t0 = time.perf_counter()
        read_answer(hostile, ["1"], "number", "Is it a or b?")
        assert time.perf_counter() - t0 < 2.0, hostile[:20]
