"""Answer grammar 7 (the -v7 ids), class by class, through ``env.step`` in all three action formats: chat-template
debris, labels in more layouts, remarks that trail the answer, more rejections and repeats, more hedges; each
class with its mirror image (the rival committed, or both candidates kept), which must score 0. The examples are
written here, in the classes' own words; none is copied from the answer sets the classes were found with. The
older ids' pins: tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar7 import read_answer, trailing_remarks
from benchmarks.specs import make_env
from tests.env.scoring.answer_env import ALL, NONE, qa_env, rewards

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")

GOLD, RIVAL = "321", "312"
QUESTION = "Find the remainder when the product of the listed numbers is divided by 1000."
NAME, OTHER = "James Madison", "John Adams"
WHO = "Who was the fourth president of the United States?"


def _qa(answer: str, question: str, grammar: int = 7) -> gym.Env:
    return qa_env(answer, question, grammar)


_rewards = rewards


@pytest.fixture(scope="module")
def number_env() -> gym.Env:
    return _qa(GOLD, QUESTION)


@pytest.fixture(scope="module")
def name_env() -> gym.Env:
    return _qa(NAME, WHO)


def _both_orders(template: str, a: str = GOLD, b: str = RIVAL) -> list[str]:
    return [template.format(a=a, b=b), template.format(a=b, b=a)]


# ------------------------------------------------------------------ 1. chat-template debris
@pytest.mark.parametrize(
    "answer",
    [
        f"The answer is {GOLD}<|im_end|>",
        f"{GOLD}<|eot_id|>",
        f"{GOLD}</s>",
        f"{GOLD} [/INST]",
        f"**{GOLD}**<end_of_turn>",
        f"<b>{GOLD}</b>",
        f"The remainder is <strong>{GOLD}</strong>.",
        f'<span class="answer">{GOLD}</span>',
    ],
)
def test_chat_template_debris_and_html_formatting_are_presentation(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


def test_debris_keeps_a_rival_it_carries(number_env):
    for answer in _both_orders("<b>{a}</b> or <b>{b}</b>") + _both_orders("{a}<|im_end|>\n{b}<|im_end|>"):
        assert _rewards(number_env, answer) == NONE, answer
    assert "<sup>" in read_answer("x<sup>2</sup>", ["x2"], "text").text  # a superscript changes a value: kept


# ------------------------------------------------------------------ 2. labels in more layouts
@pytest.mark.parametrize(
    "answer",
    [
        f"Sure, here's what I found as the result:\n\n**{GOLD}**",
        f"Final answer:\n{GOLD}",
        f"- **Final answer**\n  - {GOLD}",
        f"| Step | Value |\n|---|---|\n| **Result** | {GOLD} |",
    ],
)
def test_labels_in_more_layouts(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


def test_a_table_with_a_second_row_is_not_read_as_its_answer_row(number_env):
    for answer in _both_orders("| Field | Value |\n|---|---|\n| Answer | {a} |\n| Alternative | {b} |"):
        assert _rewards(number_env, answer) == NONE, answer


@pytest.mark.parametrize("answer", [f"最終的な答えは{NAME}です。", f"답은 {NAME}입니다.", f"正解：{NAME}"])
def test_japanese_and_korean_answer_frames(name_env, answer):
    assert _rewards(name_env, answer) == ALL, answer


# ------------------------------------------------------------------ 3. remarks that trail the answer
@pytest.mark.parametrize(
    "answer",
    [
        f"The answer is {GOLD}. Let me know if you would like me to show the working.",
        f"{GOLD}\n\nNote: you may want to double-check this against the original data.",
        f"{GOLD}\n\n1. I listed every number in the product.\n2. I multiplied them and kept the remainder.",
        f"{GOLD}\n\nUser: great, thanks\nAssistant: Glad I could help!",
        f"I'm confident in this one: {GOLD}. Feel free to ask if anything is unclear.",
    ],
)
def test_remarks_after_the_answer_are_not_the_answer(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


@pytest.mark.parametrize(
    "template",
    [
        "{a}\n\nLet me know if you would rather go with {b}.",  # speaks to the reader, but names a candidate
        "{a}\n\nUser: is it {b}?\nAssistant: It could well be {b}.",  # a leaked turn that names one
        "The answer is {a}. Though some would say {b}.",
        "{a}\n\nThe other value that fits the data is {b}.",
    ],
)
def test_a_remark_that_names_a_candidate_is_read(number_env, template):
    for answer in _both_orders(template):
        assert _rewards(number_env, answer) == NONE, answer


def test_remarks_on_text_answers(name_env):
    assert _rewards(name_env, f"{NAME}. Let me know if you'd like the sources I used.") == ALL
    assert _rewards(name_env, f"{NAME}\n\nPlease verify this against a primary source if it matters.") == ALL
    for answer in (f"{NAME}\n{OTHER.lower()}", f"{NAME}\n\nUser: or {OTHER.lower()}?"):  # lower-case rivals
        assert _rewards(name_env, answer) == NONE, answer
    # a lower-case answer in prose is never a remark, and neither is a conclusion
    text = f"First I found the {NAME} article. Then I read it twice. So it is {NAME.lower()} in the end."
    assert NAME.lower() in trailing_remarks(text, "text", [NAME])


# ------------------------------------------------------------------ 4. rejections and repeats
@pytest.mark.parametrize(
    "template",
    [
        "Not {b} — {a}.",
        "Edit: {a} (I previously wrote {b} by mistake).",
        "It's {a} rather than {b}.",
        "The value is {a} instead of {b}.",
        "Although {b} is often cited, the correct answer is {a}.",
        "After checking every step I am comfortable giving {a} as the answer.",
    ],
)
def test_rejections_commit_to_the_value_kept(number_env, template):
    answer, mirror = _both_orders(template)
    assert _rewards(number_env, answer) == ALL, answer
    assert _rewards(number_env, mirror) == NONE, mirror  # the same shape committed to the rival


@pytest.mark.parametrize(
    "answer",
    [
        f"The answer is {GOLD}. The answer is {GOLD}.",
        f"{GOLD}\n{GOLD}\n{GOLD}",
        f"Question: {QUESTION}\n\n{GOLD}",
        f"Three hundred twenty-one ({GOLD})",
    ],
)
def test_repeats_question_quotes_and_glossed_number_words(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


def test_repeats_that_differ_are_two_answers(number_env):
    for answer in _both_orders("The answer is {a}. The answer is {b}.") + ["Three hundred twelve (321)"]:
        assert _rewards(number_env, answer) == NONE, answer


def test_not_sure_is_no_rejection(number_env):
    for answer in _both_orders("Not sure — {a} or {b}."):
        assert _rewards(number_env, answer) == NONE, answer


def test_so_yeah_is_a_conclusion(name_env):
    assert _rewards(name_env, f"I checked the list of presidents. So yeah, {NAME}.") == ALL


# ------------------------------------------------------------------ 5. more hedges
@pytest.mark.parametrize(
    "template",
    ["{a}? {b}?", "Soit {a}, soit {b}.", "**Final Answer:** {a}\n\n**Final Answer:** {b}", "Is it {a}? Or maybe {b}?"],
)
def test_more_hedges_score_zero_in_either_order(number_env, template):
    for answer in _both_orders(template):
        assert _rewards(number_env, answer) == NONE, answer


def test_the_most_likely_option_is_a_commitment():
    env = make_env("Gen-Science", grammar=7)
    env.reset(options={"index": 0})
    task = env.unwrapped.task
    gold = str(task.answer)
    rival = next(letter for letter in "ABCD" if letter != gold)
    others = [letter for letter in "ABCD" if letter != gold]
    for answer, want in (
        (f"The most likely answer is **{gold}**.", 1.0),
        (f"The most likely answer is **{rival}**.", 0.0),
        (f"{', '.join(others)} can be ruled out. That leaves {gold}.", 1.0),
        (f"{', '.join(sorted({*others, gold} - {rival}))} can be ruled out. That leaves {rival}.", 0.0),
        (f"{gold} or {rival}, most likely.", 0.0),
    ):
        env.reset(options={"index": 0})
        assert env.step(f"Final Answer: {answer}")[1] == want, answer
    env.close()


def test_grammar_6_reads_as_before():
    """The -v6 reader is unchanged: grammar 7's classes still score as they did there."""
    env6 = _qa(GOLD, QUESTION, grammar=6)
    assert _rewards(env6, f"<b>{GOLD}</b>") == NONE
    assert _rewards(env6, f"The answer is {GOLD}<|im_end|>") == NONE


# ------------------------------------------------------------------ the fifth set's classes (a second round)
@pytest.mark.parametrize(
    "answer",
    [
        f"Answer: {RIVAL}\nCorrection — Answer: {GOLD}",  # a correction label with a dash
        f"My first pass gave {RIVAL}, but I had misread one of the inputs. Redoing that step gives {GOLD}.",
        f"I need to correct myself: it isn't {RIVAL}. It's {GOLD}.",
        f"Not {RIVAL}. {GOLD}.",
        f"✅ {GOLD}\n❌ {RIVAL}",  # a candidate marked wrong is rejected
        f"Result(answer='{GOLD}', confidence=0.8)",
        f"final_answer('{GOLD}')",
        f"{{'answer': '{GOLD}'}}",
        f"| Field | Value |\n|---|---|\n| Answer | {GOLD} |\n| Status | checked |",
        f"{GOLD}</answer>",
        f"◁think▷The remainder repeats every 20 steps.◁/think▷{GOLD}",
        f"[scratchpad]\nlist the factors, multiply, reduce\n[/scratchpad]\n\nFinal: {GOLD}",
        f"> [!NOTE]\n> {GOLD}",
        f"<details>\n<summary>Answer</summary>\n\n{GOLD}\n\n</details>",
        f"Thought for 12 seconds\n\n{GOLD}",
        f"Here we go... the remainder comes out as {GOLD}!",
        f"Work finished. Final result: {GOLD}",
        f"{GOLD}\n\nTERMINATE",
        f"{GOLD}, if I'm reading the problem correctly.",
        f"<|start_of_role|>assistant<|end_of_role|>{GOLD}<|end_of_text|>",
        f"=={GOLD}==",
        f"**{GOLD}**\n\n**Why:**\n- I multiplied the numbers with the calculator.\n- Every other candidate fails.",
    ],
)
def test_more_presentation_and_revisions(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


@pytest.mark.parametrize(
    "template",
    [
        "Answer: {b}\nCorrection — Answer: {a}",  # the mirror of a correction: the later value commits
        "My first pass gave {b}, but I had misread one of the inputs. Redoing that step gives {a}.",
        "✅ {a}\n❌ {b}",
    ],
)
def test_a_revision_commits_to_the_later_value_either_way(number_env, template):
    answer, mirror = _both_orders(template)
    assert _rewards(number_env, answer) == ALL, answer
    assert _rewards(number_env, mirror) == NONE, mirror


@pytest.mark.parametrize(
    "template",
    [
        "The answer is {a}, though I can't exclude {b}.",
        "1) {a} — plausible\n2) {b} — plausible",
        "- {a}\n- {b}",
        "Result(answer='{a}', alternative='{b}')",
        "{{'answer': '{a}', 'alternative': '{b}'}}",
    ],
)
def test_more_hedges_of_the_second_round(number_env, template):
    for answer in _both_orders(template):
        assert _rewards(number_env, answer) == NONE, answer


@pytest.mark.parametrize("answer", [f"at least {GOLD}", f"x \\geq {GOLD}", f"not {GOLD}"])
def test_one_value_is_no_commitment_when_bounded_or_negated(number_env, answer):
    assert _rewards(number_env, answer) == NONE, answer


@pytest.mark.parametrize(
    "answer",
    [
        f"Het antwoord is {NAME}.",
        f"Svaret är {NAME}.",
        f"Vastaus on {NAME}.",
        f"Odpowiedź: {NAME}",
        f"Câu trả lời là {NAME}.",
        f"Η απάντηση είναι {NAME}.",
        f"Most likely {NAME}.",
    ],
)
def test_answer_labels_in_more_languages(name_env, answer):
    assert _rewards(name_env, answer) == ALL, answer
    assert _rewards(name_env, answer.replace(NAME, f"{NAME} or {OTHER}")) == NONE


# ------------------------------------------------------------------ the sixth set's classes (a third round)
@pytest.mark.parametrize(
    "template",
    [
        '{{"initial_answer": "{b}", "revised_answer": "{a}"}}',
        "{b}… いや、違います。{a} です。",
        "{b} – nein, Korrektur: {a}.",
        "{b}。不对，应该是 {a}。",
        "{b}. Нет, поправка: {a}.",
        "{b}. Perdón, me equivoqué: es {a}.",
        "{b}… Non, en fait, c'est {a}.",
        "Hmm, {b}? No, that's not right. It's {a}.",
        "{b} ❌ → {a} ✅",
        "<del>{b}</del> {a}",
        "The correct answer is {a} (and not {b}).",
    ],
)
def test_revisions_strikes_and_crosses_read_the_later_value_either_way(number_env, template):
    answer, mirror = _both_orders(template)
    assert _rewards(number_env, answer) == ALL, answer
    assert _rewards(number_env, mirror) == NONE, mirror


@pytest.mark.parametrize(
    "answer",
    [
        f"{GOLD}, if I'm not mistaken.",
        f"Answer: {GOLD}\n\nBest,\nAssistant",
        f"{GOLD}\n\nEND",
        f"Thought for a few seconds\n\n{GOLD}",
        f"Here's what I found:\n\n**{GOLD}**",
        f"The listed numbers multiply to a large product. Answer: {GOLD}.",
        f"| Item | Value |\n|:--|:--|\n| Final answer | {GOLD} |\n| Confidence | High |",
    ],
)
def test_more_trailers_and_labels_of_the_third_round(number_env, answer):
    assert _rewards(number_env, answer) == ALL, answer


def test_methods_that_cannot_be_reconciled_are_a_hedge(number_env):
    for answer in _both_orders("Method 1 gives {a}; method 2 gives {b}. I can't reconcile them."):
        assert _rewards(number_env, answer) == NONE, answer


@pytest.mark.parametrize(
    "template",
    [
        "{b}? My mistake — it's {a}.",
        "Previous answer ({b}) retracted.\nFinal answer: {a}",
        "I apologize for the confusion — I said {b} earlier, but the correct answer is {a}.",
        "Although some sources list {b}, the correct answer is {a}.",
    ],
)
def test_text_revisions_read_the_later_value_either_way(name_env, template):
    answer, mirror = _both_orders(template, NAME, OTHER)
    assert _rewards(name_env, answer) == ALL, answer
    assert _rewards(name_env, mirror) == NONE, mirror


@pytest.mark.parametrize(
    "answer",
    [
        f"Sure! {NAME.lower()}.",
        f"Assistant: {NAME}",
        f"You're looking for {NAME.lower()}.",
        f"Simply put: {NAME}.",
        f"Ang sagot ay {NAME}.",
        f"Jawapannya ialah {NAME}.",
    ],
)
def test_openers_and_more_labels_on_text_answers(name_env, answer):
    assert _rewards(name_env, answer) == ALL, answer
    assert _rewards(name_env, answer.rstrip(".") + f" or {OTHER}.") == NONE


def test_a_table_before_an_answer_label_is_working():
    env = make_env("Gen-Science", grammar=7)
    env.reset(options={"index": 0})
    gold = str(env.unwrapped.task.answer)
    rows = "".join(f"| {x} | {'✓' if x == gold else '✗'} |\n" for x in "ABCD")
    for answer, want in ((f"| Option | Correct? |\n|---|---|\n{rows}\n**Answer: {gold}**", 1.0),):
        env.reset(options={"index": 0})
        assert env.step(f"Final Answer: {answer}")[1] == want, answer
    env.close()


@pytest.mark.parametrize("answer", [f"{GOLD}\nVienna ✓", f"Vienna\n{GOLD}\n\nI checked this with two sources."])
def test_one_value_beside_a_rival_of_another_type_is_no_commitment(number_env, answer):
    assert _rewards(number_env, answer) == NONE, answer


def test_the_reader_stays_linear_on_hostile_inputs():
    import time

    for hostile in (
        " " * 19_000,
        "\t" * 19_000,
        "a" * 19_000,
        "3❌ " * 5_000,
        "print( " * 3_000,
        "(previously " * 1_500,
        "◁think▷" * 2_500,
        "f(" + "a=1," * 4_000 + ")",
        "Not " * 4_000,
        "x\u0336" * 6_000,
        "| " * 9_000,
        "Answer:\n" * 2_000,
    ):
        t0 = time.process_time()  # CPU time: a busy machine slows the wall clock, not this
        read_answer(hostile, ["1"], "number", "Is it a or b?")
        assert time.process_time() - t0 < 2.0, hostile[:20]


def test_line_dropping_rules_keep_lines_that_keep_a_candidate(number_env):
    for answer in _both_orders("{a}\nQ: or {b}?"):  # a short "question" line is a remark, not a quoted question
        assert _rewards(number_env, answer) == NONE, answer
    # a retraction that is denied or doubted is no retraction: its line stays for the reader
    for answer in (
        f"Previous answer ({RIVAL}) has not been withdrawn.\nFinal answer: {GOLD}",
        f"{RIVAL} retracted? Maybe not.\nFinal answer: {GOLD}",
    ):
        assert RIVAL in read_answer(answer, [GOLD], "number").text, answer
    assert (
        RIVAL not in read_answer(f"Previous answer ({RIVAL}) retracted.\nFinal answer: {GOLD}", [GOLD], "number").text
    )
