"""Answer grammar 5 (the -v5 ids), class by class, through ``env.step`` in all three action formats: revisions
after any correction or negation cue (and uncertain revisions as hedges), code fences and JSON objects as
presentation, a frame of words around one value, renderings compared by type, more rival cues.
The older ids' pins: tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar5 import negated_only, number_words, presentation, read_answer
from agentflow_env.scoring.typed import same_date5, same_name5, same_quantity5, typed_equal
from agentflow_env.types import ListTaskSource, Task
from benchmarks.specs import make_env
from tests.answer_styles import FORMATS, action
from tests.reward_cases import golds_of

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


def _qa(answer: str, question: str, grammar: int = 5) -> gym.Env:
    tasks = ListTaskSource([Task("t", question, [answer], family="search")])
    return make_env("Bamboogle", tasks=tasks, grammar=grammar)


def _rewards(env: gym.Env, answer: str, index: int | None = None) -> list[float]:
    """The reward of ``answer`` in each action format (text, JSON, tool call)."""
    out = []
    for fmt in FORMATS:
        env.reset(options={"index": index} if index is not None else None)
        _, reward, terminated, _, _ = env.step(action(answer, fmt))
        assert terminated
        out.append(reward)
    return out


GOLD, RIVAL = "321", "312"
QUESTION = "Find the remainder when the product of the listed numbers is divided by 1000."


@pytest.fixture(scope="module")
def number_envs() -> dict[int, gym.Env]:
    return {4: _qa(GOLD, QUESTION, 4), 5: _qa(GOLD, QUESTION, 5)}


def _both_orders(template: str) -> list[str]:
    return [template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)]


# ------------------------------------------------------------------ revisions
@pytest.mark.parametrize(
    "template",
    [
        "Answer: {b}\n\nWait, I made an error above. Correct answer: {a}",
        "Hmm, {b}? No. Let me recompute... it's {a}.",
        "Not {b} — it's {a}.",
        "~~{b}~~ **{a}**",
        "{b}. Oops, that's wrong. The correct answer is {a}.",
    ],
)
def test_a_revision_reads_the_last_committed_value(number_envs, template):
    right, wrong = template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)
    assert _rewards(number_envs[5], right) == [1.0, 1.0, 1.0]
    assert _rewards(number_envs[5], wrong) == [0.0, 0.0, 0.0]  # the struck-out or negated value is never read


@pytest.mark.parametrize(
    "template",
    [
        "{a}... wait, maybe {b}? I'm not sure.",
        "{a}? No wait, possibly {b}. Hard to say.",
        "{a}. Actually, perhaps {b}?",
    ],
)
def test_an_uncertain_revision_is_a_hedge_in_either_order(number_envs, template):
    for answer in _both_orders(template):
        assert _rewards(number_envs[5], answer) == [0.0, 0.0, 0.0], answer
        assert read_answer(answer, [GOLD], "number").hedge is not None


# ------------------------------------------------------------------ presentation
@pytest.mark.parametrize(
    "answer",
    [
        f"```text\n{GOLD}\n```",
        f"```\n{GOLD}\n```",
        f'```json\n{{"answer": "{GOLD}"}}\n```',
        f'{{"final_answer": {GOLD}}}',
        f"$$\n{GOLD}\n$$",
        f"| Question | Answer |\n|---|---|\n| The remainder | {GOLD} |",
        f"The answer is **{GOLD}**.\n\n### Explanation\n1. I multiplied the numbers.\n2. I reduced mod 1000.",
        f"{GOLD}\n\nSources:\n- Wikipedia\n- A textbook",
        f"The remainder is {GOLD}, as the tables show¹.",  # after a digit a superscript is an exponent: kept
    ],
)
def test_presentation_is_read_through(number_envs, answer):
    assert _rewards(number_envs[5], answer) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "template",
    [
        '{{"answer": "{a}", "final_answer": "{b}"}}',
        '```json\n{{"answer": "{a}", "result": "{b}"}}\n```',
        "| Case | Answer |\n|---|---|\n| one | {a} |\n| two | {b} |",
        "{a}\n\nSources:\n- {b}",
    ],
)
def test_presentation_does_not_hide_a_second_answer(number_envs, template):
    for answer in _both_orders(template):
        assert "{" not in answer or read_answer(answer, [GOLD], "number").hedge is not None, answer
        # the text format is left out for JSON objects: the turn parser reads "Final Answer: {..}" as a JSON
        # action and hands the scorer one field (agentflow_env/turn/parsing.py), before any grammar
        rewards = _rewards(number_envs[5], answer)
        assert rewards[1:] == [0.0, 0.0] and ("{" in answer or rewards[0] == 0.0), answer


# ------------------------------------------------------------------ a frame of words around one value
@pytest.mark.parametrize(
    "answer",
    [f"Happy to help! {GOLD}", f"Simplifying, we get {GOLD}.", f"Given the information above, {GOLD} is the answer."],
)
def test_a_frame_of_words_commits_to_its_one_value(number_envs, answer):
    assert _rewards(number_envs[5], answer) == [1.0, 1.0, 1.0]
    assert _rewards(number_envs[4], answer) == [0.0, 0.0, 0.0]  # grammar 4 read none of these


@pytest.mark.parametrize(
    "template",
    [
        "Happy to help! {a} or {b}",
        "Simplifying, we get {a}, not {b}... or {b}.",
        "It is not {b}. Happy to help! {a} {b}",
    ],
)
def test_a_frame_with_two_values_commits_to_neither(number_envs, template):
    for answer in _both_orders(template):
        assert _rewards(number_envs[5], answer) == [0.0, 0.0, 0.0], answer


@pytest.mark.parametrize(
    "answer", ["Zürich¹", "Zürich (Source: Wikipedia)", "Zürich\n\nSources:\n- Wikipedia\n- Britannica"]
)
def test_citations_are_not_answers(answer):
    assert _rewards(_qa("Zürich", "In which city was the company founded?"), answer) == [1.0, 1.0, 1.0]


def test_a_negated_frame_is_not_read_as_a_commitment():
    env = _qa("1879", "In what year was the founder born?")
    assert _rewards(env, "Happy to help! Certainly not 1879.") == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "template",
    [
        "It is not {a}.",
        "It's not {a}.",
        "The answer is not {a}.",
        "Not {a}.",
        "Definitely not {a}",
        "It can't be {a}.",
        "I don't think it's {a}.",
        "{a}? No.",
    ],
)
def test_an_answer_that_only_denies_the_gold_scores_zero(number_envs, template):
    # "It is not 321." names 321 only to deny it: it commits to no value (grammar 4 paid it)
    assert _rewards(number_envs[4], template.format(a=GOLD))[0] == 1.0
    assert _rewards(number_envs[5], template.format(a=GOLD)) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "template", ["It's {a}, not {b}.", "Not {b} — it's {a}.", "It is not {b} but {a}.", "Not {b}. It's {a}."]
)
def test_denying_a_rival_and_stating_the_gold_still_scores_one(number_envs, template):
    assert _rewards(number_envs[5], template.format(a=GOLD, b=RIVAL)) == [1.0, 1.0, 1.0]


def test_a_negative_gold_and_a_yes_no_gold_are_not_denials():
    assert _rewards(_qa("not guilty", "What was the verdict?"), "Not guilty.") == [1.0, 1.0, 1.0]
    assert not negated_only("It is not Spain.", ["no"])  # a yes/no gold: "no" in other words, not a denial


# ------------------------------------------------------------------ renderings by type
@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("25", "twenty-five"),
        ("3", "Three studio albums."),
        ("16/7", "2 2/7"),
        ("2785692", "2,785,692 (about 2.8 million)"),
        ("528845/66", "528845/66 ≈ 8012.8030"),
        ("330 metres", "330 m"),
        ("330 metres", "330 meters"),
        ("330 metres", "0.33 km"),
        ("42.195 km", "42,195 m"),
        ("330 metres", "330 metres (1,083 ft)"),
        ("June 18, 1815", "Jun. 18, 1815"),
        ("June 18, 1815", "Sunday, June 18, 1815"),
        ("December 5, 1890", "05.12.1890"),
        ("Saint Petersburg", "St. Petersburg"),
        ("Bong Joon-ho", "Bong Joon Ho"),
        ("broccoli, celery, fresh basil", "- broccoli\n- celery\n- fresh basil"),
        ("broccoli, celery, fresh basil", "1. broccoli\n2. celery\n3. fresh basil"),
    ],
)
def test_renderings_of_the_same_value_score_one(gold, answer):
    env = _qa(gold, "How many studio albums, or what value, is asked for?")
    assert _rewards(env, answer) == [1.0, 1.0, 1.0], (gold, answer)


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("25", "twenty-six"),
        ("16/7", "2 3/7"),
        ("2785692", "2,785,692 (about 3.8 million)"),  # a gloss that restates another value is a second value
        ("151240298366399111376", "151240298366399111376 (about 151240298366399111736)"),  # exact, not a float
        ("151240298366399111376", "151240298366399111376 (or 151240298366399111736)"),
        ("330 metres", "0.34 km"),
        ("330 metres", "330 metres (2,083 ft)"),
        ("June 18, 1815", "Monday, June 19, 1815"),
        ("December 5, 1890", "12.05.1890"),
        ("broccoli, celery, fresh basil", "- broccoli\n- celery\n- thyme"),
    ],
)
def test_renderings_of_another_value_score_zero(gold, answer):
    env = _qa(gold, "What is the value asked for?")
    assert _rewards(env, answer) == [0.0, 0.0, 0.0], (gold, answer)


def test_the_typed_comparisons_of_grammar_5():
    assert same_quantity5("0.33 km", "330 metres") and same_quantity5("212 degrees F", "212 °F")
    assert not same_quantity5("330 s", "330 m") and not same_quantity5("330", "330 m")
    assert same_date5("Jun. 18, 1815", "June 18, 1815") and not same_date5("June 18, 1815", "June 18, 1815")
    assert same_name5("St Petersburg", "Saint Petersburg") and not same_name5("Petersburg", "Saint Petersburg")
    assert not typed_equal("0.33 km", ["330 metres"]) and typed_equal("0.33 km", ["330 metres"], version=5)
    assert number_words("twenty-five") == "25" and number_words("the one with more") == "the one with more"
    assert presentation('{"answer": "\\frac{9}{4}"}', ["\\frac{9}{4}"], "number") == ("\\frac{9}{4}", None)


# ------------------------------------------------------------------ rivals
@pytest.mark.parametrize(
    "template",
    [
        "{a}. {b} would also be acceptable.",
        "{a}. {b} is also possible.",
        "Likely {a}. Less likely: {b}.",
        "{a} vs {b}",
        "{a} is more probable than {b}, but I'm not certain.",
        "{a}. If that's wrong, try {b}.",
    ],
)
def test_a_second_value_under_any_cue_is_a_rival(number_envs, template):
    for answer in _both_orders(template):
        assert _rewards(number_envs[5], answer) == [0.0, 0.0, 0.0], answer


@pytest.mark.parametrize(
    "answer", ["no. yes would also be acceptable.", "yes, not no.", "\\boxed{no, yes}", "yes\n\nno"]
)
def test_yes_and_no_together_commit_to_neither(answer):
    env = _qa("no", "Are the Louvre and the Prado in the same country?")
    assert _rewards(env, answer) == [0.0, 0.0, 0.0]
    assert _rewards(env, "No, the Louvre is in France and the Prado is in Spain.") == [1.0, 1.0, 1.0]


def test_game_of_24_reads_its_one_expression_and_rejects_two():
    env = gym.make("agentflow/Gen-GameOf24-v5")
    base = env.unwrapped
    index = next(i for i, t in enumerate(base.tasks) if sorted(t.metadata["numbers"]) == [2, 7, 8, 8])
    solution = "((2 - 7) + 8) * 8"
    assert _rewards(env, f"Happy to help! {solution}", index) == [1.0, 1.0, 1.0]
    assert _rewards(env, f"8 / 8 = 1\n7 - 1 = 6\n\nExpression: {solution}", index) == [1.0, 1.0, 1.0]
    assert _rewards(env, "\\boxed{(2 - 7 + 8) \\times 8}", index) == [1.0, 1.0, 1.0]
    assert _rewards(env, f"{solution}. 8 * 8 - 7 * 2 is also possible.", index) == [0.0, 0.0, 0.0]
    assert _rewards(env, f"Not {solution} — it's 8 * 8 - 7 * 2.", index) == [0.0, 0.0, 0.0]


def test_multiple_choice_frames_read_one_letter_only():
    env = gym.make("agentflow/Gen-Science-v5")
    base = env.unwrapped
    gold = golds_of(base.tasks[0])[0]
    other = next(letter for letter in "ABCD" if letter != gold)
    assert _rewards(env, f"Happy to help! {gold}", 0) == [1.0, 1.0, 1.0]
    for answer in (f"[{gold}, {other}]", f"{other}/{gold}", f"{gold} vs {other}", f"\\boxed{{{gold}, {other}}}"):
        assert _rewards(env, answer, 0) == [0.0, 0.0, 0.0], answer


def test_the_reader_stays_linear_on_unclosed_fences_and_delimiters():
    import time

    for hostile in ("```" * 5000, "$$" * 5000 + "1", "~~" * 5000, "{" * 5000, "| a |\n" * 3000, "Not 1 — " * 2000):
        t0 = time.perf_counter()
        read_answer(hostile, ["1"], "number")
        assert time.perf_counter() - t0 < 2.0, hostile[:20]
