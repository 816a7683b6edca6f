"""Answer grammar 12 (the -v12 ids), through ``env.step`` in all three action formats: a surname-first name is read
as the gold's name only when the gold holds no comma. A comma-joined gold's items in the other order score 0, as
under grammars 3 to 8; grammars 9 to 11 keep their reading (1). A chain of clauses that are only predicates reads in
linear time. Everything else is grammar 11's reader."""

from __future__ import annotations

import time

import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring import grammar11, grammar12
from tests.env.scoring.answer_env import ALL, NONE, qa_env, rewards

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")

WHERE = "In which town was the chemist born?"

# (gold, answer): a gold holding a comma, and its items written in the other order
LIST_REORDERED = [
    ("Oranienburg, Germany", "Germany, Oranienburg"),
    ("Indonesia, Myanmar", "Myanmar, Indonesia"),
    ("located in Olathe, Kansas", "Kansas, located in Olathe"),
    ("Paris, Texas", "The answer is Texas, Paris."),
]

# (gold, answer): a name's surname first, read as the name by grammars 9 to 12
NAMES = [
    ("James Madison", "Madison, James"),
    ("Marie Curie", "Curie, Marie"),
    ("John Quincy Adams", "Final answer: Adams, John Quincy"),
]


@pytest.mark.parametrize(("gold", "answer"), LIST_REORDERED)
def test_a_comma_golds_items_in_the_other_order_score_0_from_grammar_12(gold: str, answer: str) -> None:
    assert rewards(qa_env(gold, WHERE, 12), answer) == NONE
    assert rewards(qa_env(gold, WHERE, 11), answer) == ALL  # grammars 9-11 read the gold as a name
    assert rewards(qa_env(gold, WHERE, 8), answer) == NONE
    assert rewards(qa_env(gold, WHERE, 12), gold) == ALL


@pytest.mark.parametrize(("gold", "answer"), NAMES)
def test_a_surname_first_name_is_still_the_name(gold: str, answer: str) -> None:
    for grammar in (9, 11, 12):
        assert rewards(qa_env(gold, "Who signed it?", grammar), answer) == ALL, grammar


@pytest.mark.parametrize(
    ("text", "golds", "kind"),
    [
        ("Germany, Oranienburg", ["Oranienburg, Germany"], "text"),
        ("Madison, James", ["James Madison"], "text"),
        ("Answer: 35 → revised: 33", ["33"], "number"),
        ("The answer is Texas, Paris, not Dallas.", ["Paris, Texas"], "text"),
        ("Zuerst dachte ich an 35, aber es sind 33.", ["33"], "number"),
    ],
)
def test_grammar_12_reads_as_grammar_11_except_for_comma_golds(text: str, golds: list[str], kind: str) -> None:
    ours, theirs = grammar12.read_answer(text, golds, kind), grammar11.read_answer(text, golds, kind)
    assert ours.hedge == theirs.hedge
    if "," in golds[0] and "," in text:
        assert "Paris Texas" not in ours.text and "Oranienburg Germany" not in ours.text
    else:
        assert ours == theirs


# A chain of clauses that are only predicates: grammars 4 to 11 joined each link to the whole chain before it and read
# the chain again at every link (a 16,000-character answer of "(was 5) " took 11 s), grammar 12 joins a predicate
# to the clause right before it only. The rival step's other per-clause reads are linear for every grammar.
CHAINS = ["(was 5) ", "(is 5) ", "(is also 7) ", "was 5; ", "(seems 5) ", "(could be 5) ", "(or 5) ", "(some say 5) "]


@pytest.mark.parametrize("piece", CHAINS)
def test_a_chain_of_predicates_reads_in_linear_time(piece: str) -> None:
    times = []
    for size in (4_000, 16_000):
        start = time.process_time()
        reading = grammar12.read_answer(piece * (size // len(piece)), ["13"], "number", WHERE)
        times.append(time.process_time() - start)
    assert reading.hedge is not None or reading.text  # read to the end
    assert times[1] < max(8 * times[0], 0.3), (piece, times)  # four times the length: linear, not quadratic (16x)


def test_a_predicate_still_completes_the_clause_before_it() -> None:
    env = qa_env("Paris", "What is the capital of France?", 12)
    assert rewards(env, 'Paris. "Lyon!" is also possible.') == NONE
    assert rewards(env, "Paris. Lyon. is also possible.") == NONE
    assert rewards(env, "Paris (was Paris).") == ALL


HOW_MANY = "What is the smallest value of the expression?"


def _math_env(gold: str, grammar: int):
    return qa_env(gold, HOW_MANY, grammar, benchmark="Gen-Math", family="math")


@pytest.mark.parametrize(
    ("gold", "answer", "mirror", "under_v11"),
    [
        ("-41", "Not -40 but -41.", "Not -41 but -40.", NONE),
        ("-41", "Not 40 but -41", "Not -41 but 40", NONE),
        ("-283/9", "Not -1780/29 but -283/9.", "Not -283/9 but -1780/29.", NONE),
        ("-41", "Not 40 - -41.", "Not -41 - 40.", ALL),  # a spaced dash, then the sign: both grammars
    ],
)
def test_a_minus_sign_after_a_contrast_is_the_numbers_sign(
    gold: str, answer: str, mirror: str, under_v11: list[float]
) -> None:
    """Grammars 7 to 11 read the hyphen of "but -41" as a dash (grammar 7) or a gap a dropped value left (grammar 9)
    and answered 41; grammar 12 reads a hyphen before a digit as the number's sign."""
    env = _math_env(gold, 12)
    assert rewards(env, answer) == ALL
    assert rewards(env, mirror) == NONE
    assert rewards(_math_env(gold, 11), answer) == under_v11  # the -v11 ids keep their verdict
    assert rewards(env, "Not 40 -- 41") == NONE  # 41 is not -41: a dash is still a dash


def test_a_numbered_one_that_names_no_value_is_the_answer_one() -> None:
    """ "1. I verified this with the tools." answers 1 for a number task (grammars 9 to 11 took the "1." for a list
    number and read no value); an item that names a value is still that value."""
    assert rewards(_math_env("1", 12), "1. I verified this with the tools.") == ALL
    assert rewards(_math_env("1", 11), "1. I verified this with the tools.") == NONE
    assert rewards(_math_env("2", 12), "1. I verified this with the tools.") == NONE
    assert rewards(_math_env("41", 12), "1. 41") == ALL
    assert rewards(_math_env("1", 12), "1. 41") == NONE
