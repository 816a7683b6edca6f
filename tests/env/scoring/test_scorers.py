"""Hand-checked (prediction, gold, expected) tables for the single-commitment rule and the QA, math,
multiple-choice and Game-of-24 scorers (the judge's are in test_judge.py), plus math-verify inside threads
and a subprocess, and its time bound."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentflow_env.error import ConfigError
from agentflow_env.scoring import math as math_scoring
from agentflow_env.scoring.choice import ChoiceScorer, extract_choice
from agentflow_env.scoring.commitment import read_commitment
from agentflow_env.scoring.game24 import Game24Scorer, check_24
from agentflow_env.scoring.math import MathScorer
from agentflow_env.scoring.qa import QAScorer, exact_match, gaia_match, normalize_answer, token_f1, unwrap_answer
from agentflow_env.types import Task

# ------------------------------------------------------------------ the single-commitment rule
# (answer, gold aliases, question): each names more than one candidate
HEDGES = [
    ("205 or 204", ["204"], ""),  # AIME24 index 12
    ("205, 204", ["204"], ""),
    ("1, 2, 3, 204", ["204"], "Add 1, 2 and 3."),  # question numbers in a list are still a list
    ("x = 205 or x = 204", ["204"], ""),
    ("1 or -1", ["-1"], ""),  # AMC23
    ("-1, 1", ["-1"], ""),
    ("either 205 or 204", ["204"], ""),
    ("205 and/or 204", ["204"], ""),
    ("204 (or maybe 205)", ["204"], ""),
    ("204 vs 205", ["204"], ""),
    ("between 203 and 205", ["204"], ""),
    ("203–205", ["204"], ""),
    ("203 to 205", ["204"], ""),
    ("204 ± 1", ["204"], ""),
    ("204 \\pm 1", ["204"], ""),
    ("x \\geq 204", ["204"], ""),
    ("at least 204", ["204"], ""),
    ("204\n205", ["204"], ""),
    ("- 205\n- 204", ["204"], ""),
    ("205; 204", ["204"], ""),
    ("205 | 204", ["204"], ""),
    ("205 204", ["204"], ""),
    ("205 = 204", ["204"], ""),
    ("{204, 205}", ["204"], ""),
    ("[204, 205]", ["204"], ""),
    ("\\boxed{205, 204}", ["204"], ""),
    ("\\boxed{205} \\boxed{204}", ["204"], ""),
    ("\\boxed{204} or 205", ["204"], ""),
    ("<answer>205</answer><answer>204</answer>", ["204"], ""),
    ("<answer>204</answer> or 205", ["204"], ""),
    ("２０５ or ２０４", ["204"], ""),  # full-width digits read as digits
    ("２０５, ２０４", ["204"], ""),
    ("20\u200b5 o\u200br 204", ["204"], ""),  # zero-width characters are dropped
    ("The answer is 204, maybe 205.", ["204"], ""),
    ("204, not 205, or maybe 206", ["204"], ""),  # the negated clause goes; "or maybe 206" stays
    ("Paris, London", ["Paris"], ""),
    ("Paris and London", ["Paris"], ""),
    ("Paris/London", ["Paris"], ""),
    ("Paris or London", ["Paris"], ""),
    ("Velmora (founded 1615)", ["Velmora"], ""),
    ("Indonesia, Myanmar, Thailand", ["Indonesia, Myanmar"], ""),  # a list gold takes its items only
    ("March 3, 1901 or March 4, 1901", ["March 3, 1901"], ""),
    ("March 3, 1901, 1902", ["March 3, 1901"], ""),
    ("1898 and 1959 and 1960", ["1898 and 1959"], ""),
]

# one candidate each, often with numbers, commas or "and" that belong to the gold
SINGLE = [
    ("204", ["204"], ""),
    ("The answer is 204, not 205.", ["204"], ""),  # a negated alternative is not a candidate (issue 25)
    ("x = 204", ["204"], ""),
    ("The answer is 204.", ["204"], ""),
    ("\\boxed{204}", ["204"], ""),
    ("I get 205 first, but: \\boxed{204}", ["204"], ""),  # working before the box is not read
    ("12 \\times 17 = 204", ["204"], "What is 12 times 17?"),  # restating the question's numbers
    ("3*68 = 204", ["204"], ""),  # working equal to the value
    ("m + n = 33 + 171 = 204", ["204"], ""),
    ("２０４", ["204"], ""),
    ("The answer is:\n204", ["204"], ""),
    ("\\frac{3}{4}", ["0.75"], ""),
    ("3/4", ["\\frac{3}{4}"], ""),
    ("\\sqrt{12}", ["2\\sqrt{3}"], ""),
    ("4\\sqrt{3} / 2", ["2\\sqrt{3}"], ""),
    ("1,000", ["1000"], ""),
    ("The total is 1,234,567 jars.", ["1234567"], ""),
    ("204/205", ["204"], ""),  # one value (a fraction), just not the gold
    ("March 3, 1901", ["March 3, 1901"], ""),
    ("June 20th, 1837", ["20 June 1837"], ""),
    ("India and Bangladesh", ["India and Bangladesh"], ""),
    ("Bangladesh and India", ["India and Bangladesh"], ""),
    ("Indonesia, Myanmar", ["Indonesia, Myanmar"], ""),
    ("Sea, Air, and Land", ["Sea, Air, and Land"], ""),
    ("75,000 to 100,000", ["75,000 to 100,000"], ""),
    ("1943–1992", ["1943–1992"], ""),
    ("(1,2)", ["(1, 2)"], ""),
    ("(¬A → B) ↔ (A ∨ ¬B)", ["(¬A → B) ↔ (A ∨ ¬B)"], ""),
    ("Oregon", ["Oregon"], ""),  # "or" inside a word is no marker
    ("Al Gore", ["Al Gore"], ""),
    ("It was James Madison, I think", ["james madison"], ""),
    ("President James Madison", ["James Madison"], ""),
    ("4884 m", ["4,884 m"], ""),
    ("Paris", ["London"], ""),  # wrong, but one candidate
]


@pytest.mark.parametrize(("answer", "golds", "question"), HEDGES)
def test_hedges_are_caught(answer, golds, question):
    assert read_commitment(answer, golds, question).hedge is not None


@pytest.mark.parametrize(("answer", "golds", "question"), SINGLE)
def test_single_commitments_pass(answer, golds, question):
    assert read_commitment(answer, golds, question).hedge is None


def test_commitment_text_and_value():
    committed = read_commitment("<answer>Final Answer: x = 12*17 = 204</answer>", ["204"], "12 and 17")
    assert committed.hedge is None and committed.text == "x = 12*17 = 204" and committed.value == "204"
    assert read_commitment("\\boxed{２０４}", ["204"]).text == "204"


def test_hostile_long_answers_cost_linear_time():
    # each once took tens of seconds (a number regex retried at every digit, a box scan per "\\boxed{")
    hostile = ["1" * 19_000, "\\boxed{" * 4_000, "1=" * 9_000, "between " * 2_400, "1," * 9_000, "(" * 19_000]
    hostile += ["<answer>" * 2_000, "1~" * 9_000, "x = 205 or " * 2_000, "9" * 30_000]
    task = Task("h", "Add 12 and 17.", ["204"])
    start = time.perf_counter()
    for text in hostile:
        read_commitment(text, ["204"], task.question)
        extract_choice(text, OPTIONS)
        check_24(text, [1, 2, 3, 4])
        assert QAScorer("gaia")(text, task) == 0.0
    assert time.perf_counter() - start < 30  # a bound to catch a quadratic regression, not a speed claim
    assert read_commitment("7 " * 11_000, ["7"]).hedge is not None  # over MAX_ANSWER_CHARS


# ------------------------------------------------------------------ QA
NORMALIZE = [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  A  cat, an apple & the dog. ", "cat apple dog"),
    ("U.S.A.", "usa"),
    ("Theater", "theater"),  # "the" inside a word stays
    ("James   MADISON", "james madison"),
]


@pytest.mark.parametrize(("text", "expected"), NORMALIZE)
def test_hotpotqa_normalisation(text, expected):
    assert normalize_answer(text) == expected


# (prediction, gold, em, f1) — F1 values computed by hand from token overlaps
QA_TABLE = [
    ("James Madison", ["james madison"], 1.0, 1.0),
    ("the Prussian", ["Prussian"], 1.0, 1.0),
    ("Madison", ["James Madison"], 0.0, 2 / 3),  # p=1, r=1/2
    ("President James Madison", ["James Madison"], 0.0, 0.8),  # p=2/3, r=1
    ("yes", ["no"], 0.0, 0.0),
    ("yes it is", ["yes"], 0.0, 0.0),  # yes/no must match exactly, no partial credit
    ("March 29, 2018", ["March 29, 2018"], 1.0, 1.0),
    ("29 March 2018", ["March 29, 2018"], 0.0, 1.0),  # same bag of tokens
    ("<answer>Let's Make Money</answer>", ["Let'S Make Money"], 1.0, 1.0),
    ("Final Answer: Colorectal cancer", ["colorectal cancer"], 1.0, 1.0),
    ("London", ["Paris", "London"], 1.0, 1.0),  # best over aliases
    ("", ["Paris"], 0.0, 0.0),
    ("An apple a day", ["apple day"], 1.0, 1.0),  # articles drop out
]


@pytest.mark.parametrize(("pred", "gold", "em", "f1"), QA_TABLE)
def test_qa_table(pred, gold, em, f1):
    task = Task("t", "q?", gold, family="search")
    assert QAScorer("em")(pred, task) == pytest.approx(em)
    assert QAScorer("f1")(pred, task) == pytest.approx(f1)
    assert QAScorer().details(pred, task)["f1"] == pytest.approx(f1)


@pytest.mark.parametrize("metric", ["em", "f1", "cover", "gaia"])
def test_qa_hedges_score_zero_under_every_metric(metric):
    scorer = QAScorer(metric)
    task = Task("t", "Who?", ["Paris"], family="search")
    for hedge in ("Paris or London", "Paris, London", "London\nParis", "Paris and London", "Paris/London"):
        assert scorer(hedge, task) == 0.0, hedge
    assert scorer("The answer is Paris.", task) == 1.0 and scorer("<answer>Paris</answer>", task) == 1.0
    assert QAScorer(metric).details("Paris; London", task) == {"em": 0.0, "f1": 0.0, "cover": 0.0, "gaia": 0.0}


def test_qa_numbers_and_cover_names_nothing_else():
    numeric = Task("n", "How many?", ["204"], family="search")
    assert QAScorer("em")("x = 204", numeric) == 1.0 and QAScorer("em")("205, 204", numeric) == 0.0
    assert QAScorer("gaia")("1, 2, 3, 204", numeric) == 0.0
    # cover: the gold plus filler words only ("Paris London" names another entity)
    assert QAScorer("cover")("Paris London", Task("c", "Where?", "Paris")) == 0.0
    assert QAScorer("cover")("I think it is Paris", Task("c", "Where?", "Paris")) == 1.0


def test_qa_primitives_and_bad_metric():
    assert exact_match("An Apple", "apple") == 1.0
    assert token_f1("w x y z", "y z u v") == pytest.approx(0.5)
    assert token_f1("a b c d", "c d e f") == pytest.approx(4 / 7)  # "a" is an article: p=2/3, r=1/2
    assert QAScorer("cover")("it was James Madison, I think", Task("t", "q", "james madison")) == 1.0
    assert QAScorer("cover")("Madisonville", Task("t", "q", "madison")) == 0.0
    with pytest.raises(ConfigError, match="metric"):
        QAScorer("bleu")


GAIA_TABLE = [
    ("34689", "34689", 1.0),
    ("34,689", "34689", 1.0),
    ("$41", "41", 1.0),
    ("17%", "17", 1.0),
    ("17.0", "17", 1.0),
    ("18", "17", 0.0),
    ("egalitarian", "egalitarian", 1.0),
    ("Egalitarian.", "egalitarian", 1.0),
    ("Indonesia,Myanmar", "Indonesia, Myanmar", 1.0),
    ("Myanmar, Indonesia", "Indonesia, Myanmar", 0.0),  # lists are ordered
    ("Indonesia", "Indonesia, Myanmar", 0.0),
    ("3.1.3.1; 1.11.1.7", "3.1.3.1; 1.11.1.7", 1.0),
    ("So we had to let it die", "So we had to let it die.", 1.0),
    ("seventeen", "17", 0.0),
    ("1, 2, 3", "123", 0.0),  # a list is not the number 123
    ("Indonesia, Myanmar, Thailand", "Indonesia, Myanmar", 0.0),  # no extra items
    ("White; 5876", "White; 5876", 1.0),
]


@pytest.mark.parametrize(("pred", "gold", "expected"), GAIA_TABLE)
def test_gaia_quasi_exact_match(pred, gold, expected):
    assert gaia_match(pred, gold) == expected


def test_unwrap_answer():
    assert unwrap_answer("reasoning... <answer> 42 </answer>") == "42"
    assert unwrap_answer("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert unwrap_answer("**Final Answer:** Paris") == "Paris"
    assert unwrap_answer(None) == ""


# ------------------------------------------------------------------ math
MATH_TABLE = [
    ("33", 33, 1.0),
    ("\\boxed{33}", "33", 1.0),
    ("34", 33, 0.0),
    ("The answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("3/4", "\\frac{3}{4}", 1.0),
    ("\\sqrt{8}", "2\\sqrt{2}", 1.0),
    ("x+1", "1+x", 1.0),
    ("10\\%", "0.1", 1.0),
    ("<answer>1,000</answer>", "1000", 1.0),
    ("\\pi", "3.14159", 0.0),
    ("(1,2)", "(1, 2)", 1.0),
    ("-1", -1, 1.0),
    ("no idea", "5", 0.0),
    ("x = 204", 204, 1.0),
    ("The answer is 204.", 204, 1.0),
    ("２０４", 204, 1.0),
    ("205 or 204", 204, 0.0),  # math-verify alone scored these four 1.0
    ("205, 204", 204, 0.0),
    ("1, 2, 3, 204", 204, 0.0),
    ("x = 205 or x = 204", 204, 0.0),
    ("\\boxed{205, 204}", 204, 0.0),
    ("\\boxed{205}\\boxed{204}", 204, 0.0),
    ("\\{203, 204\\}", 204, 0.0),
    ("1 or -1", -1, 0.0),
]


@pytest.fixture(scope="module")
def math_scorer():
    return MathScorer(timeout_s=20.0)


@pytest.mark.parametrize(("pred", "gold", "expected"), MATH_TABLE)
def test_math_table(math_scorer, pred, gold, expected):
    assert math_scorer(pred, Task("m", "q", gold)) == expected


def test_math_in_threads_both_isolations():
    cases = [(p, g, e) for p, g, e in MATH_TABLE if not isinstance(g, int)][:8]
    for isolation in ("process", "thread"):
        scorer = MathScorer(timeout_s=20.0, isolation=isolation)
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda c, s=scorer: s(c[0], Task("m", "q", c[1])), cases))
        assert got == [e for _, _, e in cases], isolation


def test_math_in_subprocess():
    code = (
        "from agentflow_env.scoring.math import MathScorer\n"
        "from agentflow_env.types import Task\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "s = MathScorer(timeout_s=20)\n"
        "print(s('\\\\sqrt{8}', Task('a', 'q', '2\\\\sqrt{2}')), s('\\\\frac{1}{3}', Task('b', 'q', '0.5')))\n"
        "with ThreadPoolExecutor(2) as p:\n"
        "    print(list(p.map(lambda g: s('x+1', Task('c', 'q', g)), ['1+x', 'x+2'])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["1.0 0.0", "[1.0, 0.0]"]


def test_math_time_bound_thread(monkeypatch):
    def slow(prediction, golds):  # a hung check: it uses no CPU, so the wall-time cap (WALL_CAP x budget) ends it
        time.sleep(60)
        return True

    monkeypatch.setattr(math_scoring, "math_equal", slow)
    scorer = MathScorer(timeout_s=0.2, isolation="thread")
    start = time.perf_counter()
    assert scorer("\\sqrt{8}", Task("m", "q", "2\\sqrt{2}")) == 0.0
    assert time.perf_counter() - start < 30.0  # cut at 12 x 0.2 s, long before the minute
    assert scorer.overruns == 1


def test_math_time_bound_process_kills_and_recovers():
    # the helper's start-up is not on the check's clock (issue 25): a budget far below it still passes
    quick = MathScorer(timeout_s=0.2, isolation="process")
    assert quick("\\sqrt{8}", Task("m", "q", "2\\sqrt{2}")) == 1.0 and quick.overruns == 0
    # a check that needs minutes overruns and its helper is killed ...
    hostile = MathScorer(timeout_s=0.5, isolation="process")
    assert hostile("(x+1)^{100000}", Task("m", "q", "(x+1)^{2}")) == 0.0
    assert hostile.overruns == 1
    # ... and the next check gets a fresh helper
    assert MathScorer(timeout_s=30, isolation="process")("\\sqrt{8}", Task("m", "q", "2\\sqrt{2}")) == 1.0


def test_math_bad_options():
    with pytest.raises(ConfigError):
        MathScorer(isolation="fork")
    with pytest.raises(ConfigError):
        MathScorer(timeout_s=0)


# ------------------------------------------------------------------ multiple choice
OPTIONS = ["0.9", "0.7", "0.1", "0.3"]
CHOICE_TABLE = [
    ("B", "B"),
    ("(B)", "B"),
    ("b", "B"),
    ("Answer: B", "B"),
    ("B. 0.7", "B"),
    ("**B**", "B"),
    ("\\boxed{B}", "B"),
    ("<answer>D</answer>", "D"),
    ("The correct answer is (C).", "C"),
    ("I think the answer is option D because of the redshift.", "D"),
    ("0.7", "B"),  # the option's own text
    ("The answer is 0.3", "D"),
    ("C)", "C"),
    ("A or B", None),  # hedging picks nothing
    ("C is correct.", "C"),
    ("I'd choose (C)", "C"),
    ("The answer is (C)", "C"),
    ("A, B, C, D", None),  # every option at once
    ("(A) (B) (C) (D)", None),
    ("A/B", None),
    ("A. 0.9\nB. 0.7\nC. 0.1\nD. 0.3", None),
    ("0.9, 0.7, 0.1, 0.3", None),
    ("0.7 or 0.9", None),
    ("\\boxed{A}\\boxed{B}", None),
    ("\\boxed{A} or B", None),
    ("<answer>A</answer><answer>B</answer>", None),
    ("The answer is A or B because both fit", None),
    ("B. 0.9", None),  # the letter of one option with the text of another
    ("B (0.9)", None),
    ("B (0.7)", "B"),
    ("The answer is a large ratio", None),  # 'a' here is an article, not option A
    ("E", None),  # not one of the four options
    ("", None),
]


@pytest.mark.parametrize(("pred", "letter"), CHOICE_TABLE)
def test_choice_extraction_table(pred, letter):
    assert extract_choice(pred, OPTIONS) == letter


def test_choice_by_option_text_medqa():
    options = ["Hemolytic uremic syndrome", "Oral ulcers", "Colorectal cancer", "Pancreatic cancer"]
    task = Task("m", "q", "C", family="science", metadata={"options": options})
    scorer = ChoiceScorer()
    assert scorer("Colorectal cancer", task) == 1.0
    assert scorer("The patient is at greatest risk of colorectal cancer.", task) == 1.0
    assert scorer("cancer", task) == 0.0  # two options contain it
    assert scorer("D", task) == 0.0
    # verbatim text tells apart options that normalise alike
    signed = Task("s", "q", "A", metadata={"options": ["-12*hbar/25", "12*hbar/25", "25*hbar/2", "-25*hbar/2"]})
    assert scorer("-12*hbar/25", signed) == 1.0


def test_choice_option_text_case_sensitive_first():
    # GPQA task 239: two options differ only by L vs l
    options = ["E = q/(4 pi eps0 L^2)", "E = q/(4 pi eps0 l^2)", "E = 0", "E = q/(4 pi eps0 R^2)"]
    assert extract_choice("E = q/(4 pi eps0 L^2)", options) == "A"
    assert extract_choice("E = q/(4 pi eps0 l^2)", options) == "B"
    assert extract_choice("e = Q/(4 PI EPS0 L^2)", options) is None  # case-insensitively it is ambiguous
    assert extract_choice("e = 0", options) == "C"  # case-insensitive, and unambiguous


def test_choice_bare_label_options():
    # GPQA row 168: the options are the question's statement labels a-d; after a shuffle label "c" may be B
    options = ["d", "c", "a", "b"]
    assert extract_choice("B", options) == "B"  # an upper-case letter is the option letter
    assert extract_choice("c", options) == "B"  # a lower-case letter is the option text
    assert extract_choice("(a)", options) == "C"
    assert extract_choice("Answer: d", options) == "A"
    assert extract_choice("a or c", options) is None
    # without bare-label options a lower-case letter stays a letter
    assert extract_choice("c", OPTIONS) == "C"


# ------------------------------------------------------------------ Game of 24
GAME24 = [
    ("(13+13)-(1+1)", True),
    ("(13+13)-(1+1) = 24", True),
    ("(13 + 13) – (1 + 1)", True),  # an en dash is a minus sign here
    ("Final Answer: (13+13)-(1+1)", True),
    ("Here it is:\n\\boxed{(13+13)-(1+1)}", True),
    ("(13+13)-(1+1) = 26-2 = 24", True),  # working equal to the expression
    ("(13+13)-(1+1)=24 or 13*2-2", False),
    ("either (13+13)-(1+1) or 13*2-2", False),
    ("13*2-2\n(13+13)-(1+1)", False),
    ("(13+13)-(1+1); 13*2-2", False),
    ("(13+13)-(1+1), 13+13-1-1", False),  # two right expressions are still two
    ("\\boxed{(13+13)-(1+1)}\\boxed{13*2-2}", False),
    ("<answer>13*2-2</answer><answer>(13+13)-(1+1)</answer>", False),
    ("(13+13)-(1+1) = 25", False),
]


@pytest.mark.parametrize(("answer", "ok"), GAME24)
def test_game24_takes_exactly_one_expression(answer, ok):
    assert check_24(answer, [13, 13, 1, 1])[0] is ok
    task = Task("g", "Make 24 from 13 13 1 1", [], metadata={"numbers": [13, 13, 1, 1]})
    assert Game24Scorer()(answer, task) == float(ok)
