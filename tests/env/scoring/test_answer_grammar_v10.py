"""Answer grammar 10 (the -v10 ids), through ``env.step`` in all three action formats: the answer after a reasoning
block, an agent's ``final_answer(..)`` code action, drafts reported with more verbs, "shows otherwise", a check
against a second source, foreign answer labels before yes or no, headers alone on a line, boxed drafts; each with its
mirror image (the values swapped), which must score 0, and the forms that stay hedges. The examples are written here
in the classes' own words; none is copied from the answer set the classes were found with. The older ids' pins:
tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar10 import (
    after_reasoning,
    canonical_drafts,
    code_answer,
    drop_draft_sentence,
    labels_and_headers,
    option_lines,
    read_answer,
    second_source,
    template_braces,
)
from tests.answer_styles import FORMATS, action
from tests.env.scoring.answer_env import (
    ALL,
    GOLD,
    NAME,
    NONE,
    OTHER,
    QUESTION,
    RIVAL,
    grammar_fixtures,
    qa_env,
    rewards,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


number_env, name_env, yes_env = grammar_fixtures(10)


# {old}: the draft, {new}: the value the answer commits to
COMMITTED = [
    "<think>\nThe count looks like {old}. Hmm, the boundary points were counted twice; it is {new}.\n</think>\n\n{new}",
    "<thinking>{old} or {new}? Recount the rows.</thinking>\n**{new}**",
    "<reasoning>\nFirst pass: {old}\n</reasoning>\nThe count is {new}.",
    "Thought: the count is {old} or {new}; the recount settles it.\nCode:\n```py\nfinal_answer({new})\n```<end_code>",
    'Code:\n```python\n# the recount\nfinal_answer("{new}")\n```',
    "My initial calculation came to {old}, but I had missed a row. The count is {new}.",
    "The first pass yielded {old}; after recounting the boundary, the count is {new}.",
    "I originally computed {old}. Recounting the rows gives {new}.",
    "Previously, I obtained {old}. The correct count is {new}.",
    "At first I arrived at {old}, but the boundary was double-counted; it is {new}.",
    "I first wrote {old}, but the recount says otherwise. The count is {new}.",
    "Initially I said {old}; the figure proves otherwise. Settling on {new}.",
    "I first got $\\boxed{{{old}}}$, but a row was missing. Recounting:\n\n$$\\boxed{{{new}}}$$",
    "My first attempt gave {old}, but that was not reduced. Recounting:\n\n{new}",
]


@pytest.mark.parametrize("template", COMMITTED)
def test_the_committed_value_is_read_and_the_mirror_scores_0(number_env: gym.Env, template: str) -> None:
    assert rewards(number_env, template.format(old=RIVAL, new=GOLD)) == ALL, template
    assert rewards(number_env, template.format(old=GOLD, new=RIVAL)) == NONE, template


# still hedges, in either order
HEDGES = [
    "{old}; otherwise {new}.",
    "<think>\nsettled\n</think>\n\n{old} or {new}",
    "Code:\n```py\nfinal_answer({old})\n```\nor perhaps\n```py\nfinal_answer({new})\n```",
    "My initial calculation came to {old}, but maybe it is {new}.",
    "I originally computed {old}. If the boundary counts, {new}.",
    "{old}, though a second source gives {new}.",
]


@pytest.mark.parametrize("template", HEDGES)
def test_the_hedges_stay_hedges(number_env: gym.Env, template: str) -> None:
    assert rewards(number_env, template.format(old=RIVAL, new=GOLD)) == NONE, template
    assert rewards(number_env, template.format(old=GOLD, new=RIVAL)) == NONE, template


@pytest.mark.parametrize(
    "template",
    [
        "**Answer:** {v}\n\n**Explanation:** I read the prize records and verified the fact against a second source.",
        "- **Answer:** {v}\n- **How:** I cross-checked the laureate list with another reference.",
        "{v}\n\nNotes:\n- Both biographies agree on this.",
        "<think>\nCould be {w}. No: {w} won later.\n</think>\n\n{v}",
    ],
)
def test_a_text_answer_with_a_corroborating_note(name_env: gym.Env, template: str) -> None:
    assert rewards(name_env, template.format(v=NAME, w=OTHER)) == ALL, template
    assert rewards(name_env, template.format(v=OTHER, w=NAME)) == NONE, template


def test_a_second_source_that_names_a_value_is_still_a_rival(name_env: gym.Env) -> None:
    assert rewards(name_env, f"{NAME}. A second source says {OTHER}.") == NONE
    assert rewards(name_env, f"{NAME}. I checked another source, which names {OTHER}.") == NONE
    assert second_source("checked against a second source, which says 12.") == (
        "checked against a second source, which says 12."
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Antwort: Ja", ALL),
        ("Die Antwort ist: Nein", NONE),
        ("Réponse : **Oui**", ALL),
        ("La respuesta es Sí.", ALL),
        ("A resposta é Não.", NONE),
        ("答案：是", ALL),
        ("Ответ: да", ALL),
        ("Yes\n\nEvidence:\n- The Danube is about 2,850 km long.", ALL),
    ],
)
def test_foreign_labels_and_headers(yes_env: gym.Env, answer: str, expected: list[float]) -> None:
    assert rewards(yes_env, answer) == expected, answer


def test_option_lines_alone_are_a_hedge() -> None:
    env = gym.make("agentflow/Gen-Science-v10")
    env.reset(options={"index": 0})
    task = env.unwrapped.task
    options = task.metadata["options"]
    gold = "ABCD".index(task.answer)
    other = (gold + 1) % len(options)
    one, two = f"{task.answer}) {options[gold]}", f"{'ABCD'[other]}) {options[other]}"
    for text, expected in (
        (one, 1.0),
        (f"{one}\n{two}", 0.0),
        (f"{two}\n{one}", 0.0),
        (f"{one}\n{two}\n\nAnswer: {task.answer}", 1.0),
    ):
        for fmt in FORMATS:
            env.reset(options={"index": 0})
            assert env.step(action(text, fmt))[1] == expected, (text, fmt)
    assert option_lines("A) one\nB) two", "number") is None


@pytest.mark.parametrize("template", ["{new}, not {old}.", "{new} (not {old})", "Not {old} but {new}."])
def test_a_contrast_of_expressions_reads_the_kept_one(template: str) -> None:
    env = gym.make("agentflow/Gen-GameOf24-v10")
    env.reset(options={"index": 0})
    numbers = sorted(env.unwrapped.task.metadata["numbers"])
    assert numbers == [2, 7, 8, 8]  # the generator's first task (seeded)
    good, bad = "(8-7+2)*8", "(8-7)*2*8"
    for fmt in FORMATS:
        for new, old, expected in ((good, bad, 1.0), (bad, good, 0.0)):
            env.reset(options={"index": 0})
            assert env.step(action(template.format(new=new, old=old), fmt))[1] == expected, (template, fmt)
    env.reset(options={"index": 0})
    assert env.step(action(f"{good}, not {bad}?", "text"))[1] == 0.0  # a question keeps both


def test_two_game_of_24_expressions_that_differ_by_their_brackets_are_two_candidates() -> None:
    """Grammars 3 to 9 set every bracket aside when they counted the expressions over the given numbers, so
    ``(8-7)*2*8`` and ``(8-7*2)*8``-like pairs were one expression and the line that reached 24 was paid."""
    env = gym.make("agentflow/Gen-GameOf24-v10")
    good, bad = "(8-7+2)*8", "8-7+2*8"  # 24 and 17: the same numbers and operators, other brackets
    for text, expected in ((f"{good}\n{bad}", 0.0), (f"{bad}\n{good}", 0.0), (good, 1.0), (f"{good} = 24", 1.0)):
        for fmt in FORMATS:
            env.reset(options={"index": 0})
            assert env.step(action(text, fmt))[1] == expected, (text, fmt)


@pytest.mark.parametrize(
    "template",
    [
        "My first attempt gave {old}, but that page was about a different rocket. The corrected answer is {new}.",
        "Earlier I said {old}, but the search result shows otherwise. Going with {new}.",
        "I initially wrote {old}, but that biography covers someone else. {new}.",
    ],
)
def test_a_text_answer_drops_the_sentence_that_reports_its_draft(name_env: gym.Env, template: str) -> None:
    assert rewards(name_env, template.format(old=OTHER, new=NAME)) == ALL, template
    assert rewards(name_env, template.format(old=NAME, new=OTHER)) == NONE, template


def test_a_boxed_option_draft_is_dropped() -> None:
    env = gym.make("agentflow/Gen-Science-v10")
    env.reset(options={"index": 0})
    gold = env.unwrapped.task.answer
    other = "ABCD"[("ABCD".index(gold) + 1) % 4]
    template = "I first got $\\boxed{{{old}}}$, but I had misread the units. Redoing it:\n\n$$\\boxed{{{new}}}$$"
    for old, new, expected in ((other, gold, 1.0), (gold, other, 0.0)):
        for fmt in FORMATS:
            env.reset(options={"index": 0})
            assert env.step(action(template.format(old=old, new=new), fmt))[1] == expected, (old, new, fmt)


def test_a_lower_case_draft_is_dropped_too() -> None:
    env = qa_env("wool merchant", "What was his father's trade?", 10)
    template = "My first attempt gave {old}, but that page was about his uncle. The corrected answer is {new}."
    assert rewards(env, template.format(old="pilot", new="wool merchant")) == ALL
    assert rewards(env, template.format(old="wool merchant", new="pilot")) == NONE


def test_a_draft_reason_may_name_the_question_s_own_numbers() -> None:
    env = qa_env(
        "321", "Find the remainder when the product is divided by 1000.", 10, benchmark="AIME24", family="math"
    )
    template = "My first attempt gave {old}, but that was not reduced modulo 1000. The corrected answer is {new}."
    assert rewards(env, template.format(old="1321", new="321")) == ALL
    assert rewards(env, template.format(old="321", new="1321")) == NONE
    named = "My first attempt gave 1321, but 1321 exceeds 999. The corrected answer is 321."
    assert drop_draft_sentence(named, "number", "Find the remainder mod 1000.") == named


def test_a_draft_sentence_whose_reason_names_someone_is_kept(name_env: gym.Env) -> None:
    answer = f"I initially wrote {OTHER}, but Wikipedia says Pierre. {NAME}."
    assert rewards(name_env, answer) == NONE
    assert rewards(name_env, f"My first answer was {OTHER}, but maybe that was right. {NAME}.") == NONE


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("1959, Carthage", NONE),
        ("Carthage; 1959", NONE),
        ("* 1959\n* Carthage", NONE),
        ("1959 | Carthage", NONE),
        ("$\\boxed{1959}$ $\\boxed{Carthage}$", NONE),
        ("1959. Carthage.", NONE),
        ("1959", ALL),
        ("1959. Done.", ALL),
        ("1959\n\nTERMINATE", ALL),
        ("<think>\nchecked\n</think>\n\n**Final Answer**\n\\boxed{1959}", ALL),
        ("Answer\n1959", ALL),
        ("Thus, 1959.", ALL),
        ("Carthage, 1959.", NONE),
        ("$\\boxed{1959}$\n\n**Verification**", ALL),
        ("1959, when the ratifications were exchanged.", ALL),
        ("- **Answer:** 1959\n- Source: census records", ALL),
    ],
)
def test_a_number_beside_a_word_is_a_hedge(answer: str, expected: list[float]) -> None:
    env = qa_env("1959", "In which year did the treaty take effect?", 10)
    assert rewards(env, answer) == expected, answer


def test_steps_leave_other_answers_as_they_are() -> None:
    for text in ("508", "The answer is 508.", "508 or 580", "<think>508</think>", "final_answer(x)"):
        assert after_reasoning(code_answer(text)) == text
        assert canonical_drafts(text) == text
        assert labels_and_headers(text, ["508"]) == text
        assert template_braces(text) == text
    assert code_answer("Code:\n```py\nn = 508\nfinal_answer(n)\n```") == "Code:\n```py\nn = 508\nfinal_answer(n)\n```"
    assert code_answer('final_answer("508")\nfinal_answer("580")').count("final_answer") == 2


def test_a_doubled_brace_object_is_read_without_error(number_env: gym.Env) -> None:
    """A doubled-brace object with a quote inside (a template's escaped braces) raised in grammars 7 to 9's Python
    dict step (the env scored it 0 with a ``score_error``); grammar 10 reads it."""
    for answer, expected in (('{{"answer": "it\'s 508"}}', 1.0), ('{{"answer": "it\'s 580"}}', 0.0)):
        number_env.reset()
        _, reward, _, _, info = number_env.step(action(answer, "text"))
        assert reward == expected and "score_error" not in info, answer


def test_grammar_10_is_linear() -> None:
    """Every step is a bounded number of linear passes: a long answer reads in time linear in its length."""
    for piece in ("<think>12</think> ", "My first attempt gave 7, but ", "final_answer(", "Notes:\n- x\n"):
        short, long_ = piece * 500, piece * 2000
        start = time.process_time()
        read_answer(short, ["13"], "number", QUESTION)
        small = time.process_time() - start
        start = time.process_time()
        read_answer(long_, ["13"], "number", QUESTION)
        assert time.process_time() - start < max(20 * small, 0.5), piece
