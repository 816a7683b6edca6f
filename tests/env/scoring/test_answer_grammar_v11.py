"""Answer grammar 11 (the -v11 ids), through ``env.step`` in all three action formats: an agent's JSON final-answer
action, a revision after an arrow, drafts reported in other languages, a rival named as a distractor, a tentative
draft before a revision, agent and summary labels, a verdict table before an answer label; each with its mirror image
(the values swapped), which must score 0, and the forms that stay hedges. The examples are written here in the
classes' own words; none is copied from the answer set the classes were found with. The older ids' pins:
tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar11 import (
    arrow_revision,
    distractor,
    foreign_drafts,
    json_action,
    labels,
    read_answer,
    table_then_label,
    tentative_draft,
)
from tests.env.scoring.answer_env import (
    ALL,
    GOLD,
    NAME,
    NONE,
    OTHER,
    RIVAL,
    assert_committed,
    assert_hedge,
    grammar_fixtures,
    qa_env,
    rewards,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


number_env, name_env, yes_env = grammar_fixtures(11)


# {old}: the draft or the rival, {new}: the value the answer commits to
COMMITTED = [
    '```json\n{{\n  "action": "Final Answer",\n  "action_input": "{new}"\n}}\n```',
    'Thought: the lattice count is settled.\n```\n{{"action": "Final Answer", "action_input": {new}}}\n```',
    '{{"action": "final_answer", "action_input": "{new}"}}',
    "Count: {old} → corrected: {new}",
    "Result: {old} -> **updated answer**: {new}",
    "Answer: {old} ⇒ final: {new}",
    "Anfangs dachte ich an {old}, aber beim Nachzählen ergibt sich {new}.",
    "Ich dachte zuerst, es wäre {old}, aber die Randpunkte zählen nicht; es sind {new}.",
    "Au départ, j'ai cru que c'était {old}, mais en recomptant on obtient {new}.",
    "Al principio creí que era {old}, pero al recontar salen {new}.",
    "All'inizio pensavo a {old}, ma ricontando i punti sono {new}.",
    "No início pensei em {old}, mas recontando são {new}.",
    "Сначала я подумал, что {old}, но после пересчёта получилось {new}.",
    "起初我以为是{old}，但是重新数了一遍是{new}。",
    "最初は{old}だと思いましたが、数え直すと{new}です。",
    "The count is {new}; {old} is just a distractor.",
    "{new}. The value {old} is a common trap (it counts the boundary).",
    "Answer: {new}. {old} is a red herring here.",
    "This would give {old}. Wait, the boundary points were counted. The correct count is {new}.\n\nFinal answer: {new}",
    "That would suggest {old}.\n\nOn a second look, the earlier step was wrong, and the count is actually {new}.",
    "Key finding → {new}",
    "Final answer — {new}",
    "The count is {new}. TERMINATE",
    "Out - Final answer: {new}",
    "| Candidate | Check |\n|---|---|\n| {old} | ✗ counts the boundary |\n| {new} | ✓ interior |\n\nAnswer: {new}",
]


@pytest.mark.parametrize("template", COMMITTED)
def test_the_committed_value_is_read_and_the_mirror_scores_0(number_env: gym.Env, template: str) -> None:
    assert_committed(number_env, template, RIVAL, GOLD)


# still hedges, in either order
HEDGES = [
    '```json\n{{"action": "Final Answer", "action_input": "{old} or {new}"}}\n```',
    "Answer: {old} → revised: {new}? Not sure.",
    "Zuerst dachte ich an {old}, aber vielleicht sind es {new}.",
    "That would suggest {old}, but it could also be {new}.",
    "That would give {old}. Actually, it might be {new}.",
    "It is {old} or {new}; one of them is a distractor.",
    "| Candidate | Check |\n|---|---|\n| {old} | plausible |\n| {new} | plausible |\n\nAnswer: {old} or {new}",
    "Final answer — {old} or {new}",
]


@pytest.mark.parametrize("template", HEDGES)
def test_the_hedges_stay_hedges(number_env: gym.Env, template: str) -> None:
    assert_hedge(number_env, template, RIVAL, GOLD)


@pytest.mark.parametrize(
    "template",
    [
        "Primero pensé en {old}, pero tras revisarlo, la respuesta es {new}.",
        "The answer is {new}. {old} is a decoy.",
        "Final answer — {new}",
        "The answer is {new}. TERMINATE",
        "| Name | Verdict |\n|---|---|\n| {old} | rejected |\n| {new} | correct |\n\nAnswer: {new}",
    ],
)
def test_a_name_answer(name_env: gym.Env, template: str) -> None:
    assert_committed(name_env, template, OTHER, NAME)


def test_a_yes_no_answer_after_a_foreign_draft(yes_env: gym.Env) -> None:
    assert rewards(yes_env, "J'ai d'abord pensé que non, mais après vérification, la réponse est oui.") == ALL
    assert rewards(yes_env, "Zuerst dachte ich an Ja, aber nach erneuter Prüfung lautet die Antwort Nein.") == NONE


def test_only_a_final_answer_action_is_read() -> None:
    other = '{"action": "Search", "action_input": "lattice points"}'
    assert json_action(other) == other
    assert json_action('{"action": "Final Answer", "action_input": ["508"]}').startswith("{")
    assert json_action('{"action": "Final Answer", "action_input": true}').startswith("{")
    assert (
        json_action('{"action": "Final Answer", "action_input": "508"')
        == '{"action": "Final Answer", "action_input": "508"'
    )
    assert json_action('{"action": "Final Answer", "action_input": 508}') == "Final Answer: 508"


def test_a_tentative_draft_is_rewritten_only_before_a_revision() -> None:
    assert tentative_draft("That would suggest 580. Correction: 508.") == "That suggested 580. Correction: 508."
    assert tentative_draft("That would suggest 580.") == "That would suggest 580."
    # a condition in the revision's own sentence still counts
    assert tentative_draft("If that's wrong, it would give 508.") == "If that's wrong, it would give 508."


def test_steps_leave_other_answers_as_they_are() -> None:
    plain = "The count is 508, since each row adds 4 points -> 127 rows."
    for step in (json_action, arrow_revision, foreign_drafts, distractor, tentative_draft, labels, table_then_label):
        assert step(plain) == plain, step.__name__
    assert arrow_revision("x -> y") == "x -> y"
    assert labels("The answer - as computed - is 508.") == "The answer - as computed - is 508."
    assert labels("TERMINATE the process, then 508.") == "TERMINATE the process, then 508."


def test_a_long_hostile_answer_is_read_in_linear_time() -> None:
    for text in (
        "Zuerst dachte ich an " + "1, " * 8000,
        "That would suggest " + "x " * 9000 + "actually 5",
        "```json\n{" + '"a": 1, ' * 3000 + "}\n```" + " action_input",
        "| a |\n" * 5000 + "Answer: 5",
        "→ revised" * 2000,
        "That would give 1. " * 1000 + "Actually 2.",
        "That would give 1. Actually 2. " * 600,
        "x is a trap, " * 1500,
    ):
        start = time.process_time()
        read_answer(text, [GOLD], "number")
        assert time.process_time() - start < 2.0, text[:40]


def test_the_v10_id_keeps_its_verdict() -> None:
    answer = f"The count is {GOLD}; {RIVAL} is just a distractor."
    assert rewards(qa_env(GOLD, "How many?", 10), answer) == NONE
    assert rewards(qa_env(GOLD, "How many?", 11), answer) == ALL


@pytest.mark.parametrize(
    "answer,expected",
    [
        ("04/15/18, egalitarian", NONE),
        ("egalitarian; 04/15/18", NONE),
        ("- 04/15/18\n- egalitarian", NONE),
        ("Morarji Desai, Claude Shannon, 04/15/18, mice, egalitarian", NONE),
        ("04/15/18", ALL),
        ("04/15/18, approximately", ALL),
        ("The date is 04/15/18.", ALL),
    ],
)
def test_a_date_beside_a_lower_case_word_is_a_hedge(answer: str, expected: list[float]) -> None:
    env = qa_env("04/15/18", "When was the label added, in MM/DD/YY?", 11)
    assert rewards(env, answer) == expected, answer


def test_a_role_header_or_a_note_in_brackets_is_no_rival(number_env: gym.Env, name_env: gym.Env) -> None:
    assert rewards(number_env, f"assistant\n\n{GOLD}") == ALL
    note = "**{new}**\n\n(Watch out: {old} is a tempting distractor, but it's incorrect.)"
    assert_committed(name_env, note, OTHER, NAME)
