"""Answer grammar 8 (the -v8 ids), through ``env.step`` in all three action formats: a retraction read by its
structure (the last asserted marker, then one committed value), in nine languages, diff blocks, struck values and
JSON revision keys; each class with its mirror image (the same words, the two values swapped), which must score 0,
and the conditional and unsure forms, which are hedges in both orders. The examples are written here, in the
classes' own words; none is copied from the answer set the classes were found with. The older ids' pins:
tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar8 import read_answer, retraction
from tests.env.scoring.answer_env import ALL, NONE, qa_env, rewards

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")

GOLD, RIVAL = "508", "580"
QUESTION = "How many lattice points lie strictly inside the triangle?"
NAME, OTHER = "Marie Curie", "Lise Meitner"
WHO = "Who was the first woman to win a Nobel Prize?"


def _qa(answer: str, question: str, grammar: int = 8) -> gym.Env:
    return qa_env(answer, question, grammar)


_rewards = rewards


@pytest.fixture(scope="module")
def number_env() -> gym.Env:
    return _qa(GOLD, QUESTION)


@pytest.fixture(scope="module")
def name_env() -> gym.Env:
    return _qa(NAME, WHO)


# {old}: the withdrawn value, {new}: the committed one. Each reads {new}; with the two swapped, the rival is
# committed and the answer scores 0.
RETRACTIONS = [
    "My first count gave {old}, which is wrong. The count is {new}.",
    "{old} was a slip — {new}.",
    "{old}? No, wait. That was a slip — {new}.",
    "I wrote {old} above; I made a mistake there. {new}.",
    "Earlier I had {old}. I miscounted the boundary points. So {new}.",
    "{old} is incorrect; I double-counted a vertex. It comes to {new}.",
    "Scratch that: {new}.",
    "Initially {old}. Correction: {new}",
    "{old}, no — {new}.",
    "The value {old} should be {new}.",
    "I meant {new}, not... I meant {new}.",
    "Revised answer: {new}",
    "The first pass said {old}, but the correct answer is {new}.",
    "Ich hatte {old} geschrieben, das ist falsch. Es sind {new}.",
    "J'avais trouvé {old}, c'était une erreur : il y en a {new}.",
    "Había puesto {old}, pero es incorrecto. Son {new}.",
    "Eu tinha dito {old}, mas está errado. São {new}.",
    "Avevo scritto {old}, ma è sbagliato. Sono {new}.",
    "Я написал {old}, но это неверно. Правильно: {new}.",
    "之前算的是{old}，算错了。应该是{new}。",
    "{old}と書きましたが、誤りです。{new}です。",
    "{old}라고 했는데 틀렸습니다. {new}입니다.",
]


@pytest.mark.parametrize("template", RETRACTIONS)
def test_a_retraction_reads_the_value_after_its_last_marker_and_its_mirror_scores_0(number_env, template):
    committed = template.format(old=RIVAL, new=GOLD)
    mirror = template.format(old=GOLD, new=RIVAL)
    assert _rewards(number_env, committed) == ALL, committed
    assert _rewards(number_env, mirror) == NONE, mirror


@pytest.mark.parametrize(
    "template",
    [
        "{a}. If that's wrong, then {b}.",
        "{a} — but I could be wrong; {b} is possible.",
        "{a}, unless I miscounted, in which case {b}.",
        "{a} is wrong. Maybe {b}?",
        "{a} is wrong, and so is {b}.",
        "My mistake: it's {a} or {b}.",
        "{a}. Revised answer: {b}. Toss-up.",
        "{a}. Nein, {b}. Vielleicht.",
        "{a}. Some sources say it's actually {b}.",
        '{a}. "Revised answer: {b}."',
        "{a}.\nIf so,\nno, {b}.",
        "{a}. I meant {b}. Hard to say.",
    ],
)
def test_a_conditional_or_unsure_retraction_commits_to_nothing_in_either_order(number_env, template):
    for answer in (template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)):
        assert _rewards(number_env, answer) == NONE, answer


def test_a_marker_after_the_rejected_value_leaves_the_answer_as_it_was(number_env):
    assert _rewards(number_env, f"It is {GOLD}. {RIVAL} is incorrect.") == ALL
    assert _rewards(number_env, f"It is {RIVAL}. {GOLD} is incorrect.") == NONE
    assert retraction(f"It is {GOLD}. {RIVAL} is incorrect.", "number") is None  # nothing follows the marker


@pytest.mark.parametrize(
    "template",
    [
        "```diff\n- {old}\n+ {new}\n```",
        "```diff\n--- draft\n+++ final\n-Answer: {old}\n+Answer: {new}\n```",
        "<s>{old}</s> {new}",
        "Answer: <s>{old}</s> <ins>{new}</ins>",
        '{{"answer": "{old}", "corrected_answer": "{new}"}}',
        '{{"final_answer": "{new}", "answer": "{old}"}}',
    ],
)
def test_markup_revisions_read_the_replacement_and_their_mirrors_score_0(number_env, template):
    assert _rewards(number_env, template.format(old=RIVAL, new=GOLD)) == ALL
    assert _rewards(number_env, template.format(old=GOLD, new=RIVAL)) == NONE


def test_a_lone_s_pair_around_the_whole_reply_is_a_template_token(number_env):
    assert _rewards(number_env, f"<s>{GOLD}</s>") == ALL


def test_a_diff_block_that_keeps_both_values_is_a_hedge(number_env):
    for a, b in ((GOLD, RIVAL), (RIVAL, GOLD)):
        assert _rewards(number_env, f"```diff\n+ {a}\n+ {b}\n```") == NONE


@pytest.mark.parametrize(
    "template",
    [
        "I first said {old}, but that was wrong. It's {new}.",
        "{old} — my mistake. The answer is {new}.",
        "Zuerst schrieb ich {old}, das ist falsch. Richtig ist {new}.",
    ],
)
def test_a_text_answer_retraction_reads_the_short_commitment_after_it(name_env, template):
    assert _rewards(name_env, template.format(old=OTHER, new=NAME)) == ALL
    assert _rewards(name_env, template.format(old=NAME, new=OTHER)) == NONE


def test_a_text_answer_after_a_replacement_cue_alone_is_not_a_retraction():
    # "actually" alone does not withdraw a text value: "many people confuse it with X" is a remark, not a commitment
    assert retraction(f"It's {NAME}. Actually, many people confuse her with {OTHER}.", "text") is None


def test_v7_reads_the_same_retractions_as_before():
    env = _qa(GOLD, QUESTION, grammar=7)
    assert _rewards(env, f"{RIVAL}, no — {GOLD}.") == NONE  # grammar 7 did not read this retraction


def test_retraction_reading_is_linear_in_the_answer():
    def cpu(n: int) -> float:
        text = ("that's wrong, no, " * n) + GOLD
        start = time.process_time()
        read_answer(text, [GOLD], "number")
        return time.process_time() - start

    small, big = min(cpu(200) for _ in range(3)), min(cpu(1600) for _ in range(3))
    assert big < 20 * max(small, 1e-3)  # 8x the text: far under quadratic


@pytest.mark.parametrize(
    "answer",
    [
        f"> Chain complete.\n{GOLD}",
        f"[output]\nvalue = {GOLD}",
        f"```console\n$ ./count --inside\n{GOLD}\n```",
        f"{GOLD}\n\n— Claude",
        f"Answer: {GOLD}\n\nSources:\n- Tool output\n- Memory step 2",
        f"Run finished (3/3 tools). Final answer → {GOLD}",
    ],
)
def test_one_value_beside_a_debris_line_is_read(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


def test_a_short_bare_line_after_the_value_may_be_a_rival_of_another_type(number_env):
    assert _rewards(number_env, f"{GOLD}\nLutetium") == NONE  # a word where a number is asked: no reading
    for a, b in ((GOLD, RIVAL), (RIVAL, GOLD)):
        assert _rewards(number_env, f"> Chain complete.\n{a}\n{b}") == NONE


@pytest.mark.parametrize(
    "template", ["{a}か{b}のどちらかです。", "{a}或者{b}。", "{a} 또는 {b}입니다.", "答えは{a}か{b}です。"]
)
def test_or_in_chinese_japanese_and_korean_keeps_two_values_in_either_order(number_env, template):
    for answer in (template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)):
        assert _rewards(number_env, answer) == NONE, answer


@pytest.mark.parametrize(
    "answer",
    [
        "Reply: -\\frac{5}{8}",
        "Sure thing — -\\frac{5}{8}.",
        "Per the tool output, -\\frac{5}{8}.",
        "Done: (-\\frac{5}{8})",
    ],
)
def test_a_latex_value_keeps_its_braces(answer):
    env = qa_env("-\\frac{5}{8}", "What is the slope of the line?", 8, "AMC23", "math")
    assert _rewards(env, answer) == ALL, answer
    assert _rewards(env, answer.replace("-\\frac{5}{8}", "\\frac{5}{8}")) == NONE  # the sign is the value


def test_a_latex_environment_around_one_value_is_presentation(number_env):
    assert _rewards(number_env, f"\\begin{{align*}}\n\\text{{Answer}} &= {GOLD}\n\\end{{align*}}") == ALL
    assert _rewards(number_env, f"\\begin{{align*}}\n\\text{{Answer}} &= {RIVAL}\n\\end{{align*}}") == NONE


@pytest.mark.parametrize(
    "template",
    [
        "{a} (sometimes mistaken for {b})",
        "It is {a} — {b} is a red herring here.",
        "The count is {a}. {b} is a common wrong answer.",
        "{a}\n\nNote: {b} is a frequent misconception.",
    ],
)
def test_a_value_named_only_as_a_decoy_is_no_rival(number_env, template):
    assert _rewards(number_env, template.format(a=GOLD, b=RIVAL)) == ALL
    assert _rewards(number_env, template.format(a=RIVAL, b=GOLD)) == NONE


def test_a_decoy_clause_that_is_the_whole_answer_is_read_as_before(number_env):
    for a, b in ((GOLD, RIVAL), (RIVAL, GOLD)):
        assert _rewards(number_env, f"{a} or {b}; {a} is a common trap.") == NONE


def test_a_footer_of_links_is_presentation_but_a_value_beside_it_is_not(number_env):
    assert _rewards(number_env, f"The count is **{GOLD}**. ²\n\nRead more: 1. mathworld.wolfram.com 2. oeis.org") == ALL
    assert _rewards(number_env, f"Sources: [1] https://oeis.org/A000{RIVAL}\n\n{GOLD}") == ALL
    for a, b in ((GOLD, RIVAL), (RIVAL, GOLD)):
        assert _rewards(number_env, f"{a}\n\nSee also: {b} (oeis.org)") == NONE  # a footer that names a value


def test_a_formula_gold_is_compared_by_its_symbols_and_a_word_joined_to_it_is_a_rival():
    gold = "(¬P → Q) ↔ (P ∨ Q)"
    env = _qa(gold, "Which of the statements is not equivalent to the others?")
    assert _rewards(env, gold) == ALL
    assert _rewards(env, f"The odd one out is {gold}.") == ALL
    assert _rewards(env, "(P → Q) ↔ (¬P ∨ Q)") == NONE  # the same letters, other symbols: another formula
    for answer in (f"{gold}, tautology", f"tautology; {gold}", f"{gold} / contradiction"):
        assert _rewards(env, answer) == NONE, answer
    v7 = _qa(gold, "Which of the statements is not equivalent to the others?", grammar=7)
    assert _rewards(v7, "(P → Q) ↔ (¬P ∨ Q)") == ALL  # grammar 7 folded a formula to its letters (kept for -v7)


@pytest.mark.parametrize("answer", ["Per the tool, 3\\sqrt{5}.", "> Finished.\n3\\sqrt{5}", "3\\sqrt{5}\n\n— Qwen"])
def test_one_latex_value_of_a_math_gold_is_read_as_a_number_is(answer):
    env = qa_env("3\\sqrt{5}", "What is the length of the diagonal?", 8, "AMC23", "math")
    assert _rewards(env, answer) == ALL
    assert _rewards(env, answer.replace("3\\sqrt{5}", "5\\sqrt{3}")) == NONE
    assert _rewards(env, answer.replace("3\\sqrt{5}", "3\\sqrt{5} or 5\\sqrt{3}")) == NONE


# Shapes a reward-seeking policy could use to name two values and be paid for one (found by red-teaming grammar 8):
# a revision that is doubted, attributed, conceded, quoted, offered as an alternative, or a second reading; each
# must score 0 in both orders.
@pytest.mark.parametrize(
    "template",
    [
        "{a}. Corrected answer: {b}. Could go either way.",
        "{a}. Make that {b} — I think.",
        "{a}. Others claim it should read {b}.",
        "{a}. Per a reviewer, scratch that: {b}.",
        "{a}. The key says `revised answer: {b}`.",
        "{a}\n```\nscratch that, {b}\n```",
        "{a} (or, my mistake: {b})",
        "{a}. Stimmt nicht, {b}. Vielleicht.",
        "{a}。不对，{b}。也许。",
        "<s>{a}</s> {b}?",
        "```diff\n- {a}\n+ {b}?\n```",
    ],
)
def test_a_doubted_attributed_quoted_or_offered_revision_pays_in_neither_order(number_env, template):
    for answer in (template.format(a=GOLD, b=RIVAL), template.format(a=RIVAL, b=GOLD)):
        assert _rewards(number_env, answer) == NONE, answer


@pytest.mark.parametrize(
    "template",
    [
        "{gold}. Oops, I first typed {rival}.",
        "{gold}. Correction of a draft that gave {rival}.",
        "{gold} (not {rival} — a typo in some editions)",
    ],
)
def test_a_note_about_an_earlier_draft_after_the_answer_is_not_a_retraction(number_env, name_env, template):
    assert _rewards(number_env, template.format(gold=GOLD, rival=RIVAL)) == ALL
    assert _rewards(name_env, template.format(gold=NAME, rival=OTHER)) == ALL


def test_a_decoy_clause_that_speaks_for_the_decoy_is_kept(number_env):
    for a, b in ((GOLD, RIVAL), (RIVAL, GOLD)):
        assert _rewards(number_env, f"{a} — often confused with {b}, which may also be right.") == NONE


def test_a_footer_that_says_more_than_its_links_is_kept(number_env, name_env):
    assert _rewards(number_env, f"{GOLD}\nLinks: https://oeis.org/A{RIVAL} (alternative)") == NONE
    assert _rewards(name_env, f"{NAME}\nSee also: {OTHER} (nobelprize.org)") == NONE
    assert _rewards(number_env, f"{GOLD}\nSources: 1. oeis.org 2. mathworld.wolfram.com") == ALL


def test_a_date_or_a_bracketed_title_is_no_formula():
    from agentflow_env.scoring.typed import formula_symbols

    assert formula_symbols("04/15/18") == [] and formula_symbols("Harry Potter (film)") == []
    assert formula_symbols("(¬P → Q)") == ["(", "¬", "→", ")"]
