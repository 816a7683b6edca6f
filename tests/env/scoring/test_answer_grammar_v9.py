"""Answer grammar 9 (the -v9 ids), through ``env.step`` in all three action formats: a value the answer marks as not
its answer (negated in a contrast, withdrawn, changed from, a draft before a final label, eliminated) is no
candidate, in nine languages; each mark with its mirror image (the two values swapped), which must score 0, and the
doubting, conditional and either-or forms, which are hedges in both orders. Then the wrappers and localized values.
The examples are written here in the classes' own words; none is copied from the answer set the classes were found
with. The older ids' pins: tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar9 import drop_marked, localize, read_answer, wrappers
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


number_env, name_env, yes_env = grammar_fixtures(9)


# {old}: the value the answer marks as dropped, {new}: the one it commits to
MARKED = [
    "Not {old} but {new}.",
    "It's {new}, not {old}.",
    "Berichtigung: nicht {old}, sondern {new}.",
    "Me corrijo: no es {old}, sino {new}.",
    "Retificando: a contagem dá {new}, e não {old}.",
    "Correggo: sono {new}, non {old}.",
    "Ce n'est pas {old}, c'est {new}.",
    "Уточнение: не {old}, а {new}.",
    "修正一下：不是{old}，而是{new}。",
    "すみません、{old}ではなく{new}です。",
    "Result updated: {old} → {new}",
    "{new} (previously {old})",
    "Status: changed my answer from {old} to {new} once the boundary was checked.",
    "Strike {old}. The count is {new}.",
    "Initial answer: {old}\nAfter recounting the boundary.\nFinal answer: {new}",
    "Ruled out: {old}\nKept: {new}",
    "The count is {new}. (I typed {old} by mistake earlier.)",
    "I wrote {old}, but the boundary points were double-counted; the count is {new}.",
    "Previous result ({old}) withdrawn. Current result: {new}",
    "{old} — no wait, I dropped a row. {new}.",
    "Result: {old} ⇒ corrected to {new}",
    "{old}, later revised to {new}.",
    "Before, I said {old}. That is not right; the count is {new}.",
    "My initial answer was {old}; after recounting the boundary it is {new}.",
    "Meine erste Antwort war {old}, aber richtig sind {new}.",
]

# marks that are not asserted: both values stay, a hedge in either order
NOT_MARKED = [
    "Not only {old} but also {new}.",
    "Not {old} but {new}, I think.",
    "If not {old}, then {new}.",
    "不是{old}就是{new}。",
    "It's {new}, not {old}? Hard to say.",
    "Initial answer: {old}\nFinal answer: maybe {new}",
    "{old}? {new}? I can't determine which with certainty.",
    "Candidates I couldn't eliminate: {old}, {new}.",
    "The data supports both {old} and {new}.",
    "Strike {old}? Perhaps {new}.",
]


@pytest.mark.parametrize("template", NOT_MARKED)
def test_an_unasserted_mark_keeps_both_values(number_env: gym.Env, template: str) -> None:
    assert rewards(number_env, template.format(old=RIVAL, new=GOLD)) == NONE, template
    assert rewards(number_env, template.format(old=GOLD, new=RIVAL)) == NONE, template


NAME_MARKED = [
    "It was {new}, not {old}.",
    "Oops, a slip above. It's {new}, not {old}.",
    "Eliminated: {old}\nRemaining: {new}",
    "Draft answer: {old}\nFinal answer: {new}",
    "Revised: {new} (was {old}).",
    "Corrigindo: a resposta certa é {new}, e não {old}.",
    "{new}. Sorry, I initially typed {old}.",
]


@pytest.mark.parametrize(
    ("env_name", "template"), [("number_env", t) for t in MARKED] + [("name_env", t) for t in NAME_MARKED]
)
def test_a_marked_value_is_no_candidate_and_the_mirror_scores_0(
    env_name: str, template: str, request: pytest.FixtureRequest
) -> None:
    env = request.getfixturevalue(env_name)
    gold, rival = (GOLD, RIVAL) if env_name == "number_env" else (NAME, OTHER)
    assert rewards(env, template.format(old=rival, new=gold)) == ALL, template
    assert rewards(env, template.format(old=gold, new=rival)) == NONE, template


def test_yes_and_no_marks(yes_env: gym.Env) -> None:
    assert rewards(yes_env, "Not no but yes.") == ALL
    assert rewards(yes_env, "Not yes but no.") == NONE
    assert rewards(yes_env, "Earlier answer (no) retracted. Final: yes") == ALL
    assert rewards(yes_env, "Earlier answer (yes) retracted. Final: no") == NONE
    assert rewards(yes_env, "Yes or no, I can't decide between them.") == NONE


@pytest.mark.parametrize(
    "answer",
    [
        "Thought: I have what I need.\nAction: Finish[508]",
        "Finish[508]",
        "Thought: the count is settled.\n508",
        "assistant\n\n508",
        "1. 508",
        "## Conclusion\n- Checked twice: ✓\n- **Answer: 508**",
        "508. Let me know if you need the working.",
    ],
)
def test_wrappers_are_presentation(number_env: gym.Env, answer: str) -> None:
    assert rewards(number_env, answer) == ALL, answer
    assert rewards(number_env, answer.replace("508", "580")) == NONE, answer


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("yes", "Ja."),
        ("yes", "Oui !"),
        ("yes", "是的。"),
        ("no", "Nein."),
        ("no", "いいえ"),
        ("14 July 1789", "Le 14 juillet 1789."),
        ("14 July 1789", "Es war der 14. Juli 1789."),
        ("14 July 1789", "Fue el 14 de julio de 1789."),
        ("14 July 1789", "1789年7月14日"),
        ("2418000", "Die Summe beträgt 2.418.000."),
        ("Ada Lovelace", "Lovelace, Ada"),
    ],
)
def test_localized_values(gold: str, answer: str) -> None:
    env = qa_env(gold, "What is it?", 9)
    assert rewards(env, answer) == ALL, answer


def test_localized_values_never_make_a_wrong_value_right() -> None:
    assert rewards(qa_env("yes", "Is it?", 9), "Nein.") == NONE
    assert rewards(qa_env("14 July 1789", "When?", 9), "Le 15 juillet 1789.") == NONE
    assert rewards(qa_env("2418000", "How many?", 9), "2.418.001") == NONE
    assert rewards(qa_env("Ada Lovelace", "Who?", 9), "Lovelace, Augusta") == NONE


def test_restated_question_numbers_are_no_rivals() -> None:
    env = qa_env("321", "Find the remainder when the product is divided by 1000.", 9, benchmark="AIME24", family="math")
    assert rewards(env, "The remainder when the product is divided by 1000 is 321.") == ALL
    assert rewards(env, "The remainder when the product is divided by 1000 is 322.") == NONE
    assert rewards(env, "The remainder when the product is divided by 1000 is 321 or 322.") == NONE


def test_steps_leave_an_unmarked_answer_as_it_is() -> None:
    for text in ("508", "The answer is 508.", "508 or 580", "Maybe 508, not 580."):
        assert drop_marked(text, "number") == text
    assert wrappers("The answer is 508.") == "The answer is 508."
    assert localize("The answer is 508.", ["508"]) == "The answer is 508."


def test_grammar_9_is_linear() -> None:
    """Grammar 9's own steps are a bounded number of linear passes: a long answer of marks reads in time linear in its
    length. ("(was 5) " repeated is not: grammars 4 to 11 read a chain of predicate clauses again at each link, which
    grammar 12 corrects; tests/env/scoring/test_answer_grammar_v12.py.)"""
    for piece in ("not 12 but 13, ", "Strike 7. ", "(was 5)\n", "不是3，而是4。"):
        short, long_ = piece * 500, piece * 2000
        start = time.process_time()
        read_answer(short, ["13"], "number", QUESTION)
        small = time.process_time() - start
        start = time.process_time()
        read_answer(long_, ["13"], "number", QUESTION)
        assert time.process_time() - start < max(10 * small, 0.5), piece
