"""The answer grammar (v3 ids): presentation stripped, the last commitment read, rivals anywhere score 0,
comparison by the gold's type, all through ``env.step`` in the three action formats; the v2 ids keep
their verdicts; the judge reads the same text; held-out answer styles stay within the issue's limits."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.scoring.grammar import read_answer
from agentflow_env.scoring.judge import JudgeScorer
from agentflow_env.scoring.qa import QAScorer
from agentflow_env.scoring.typed import same_date, same_list, same_name, same_quantity, typed_equal
from agentflow_env.scoring.versioned import GRAMMARS, GrammarScorer, several_solutions, unwrap_scorer, with_grammar
from agentflow_env.types import ListTaskSource, Task
from benchmarks.specs import make_env
from tests.answer_styles import FORMATS, HALVES, action, task_styles
from tests.helpers import RecordingJudge
from tests.reward_cases import golds_of, kind_of, spread

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


def _env(env_id: str) -> gym.Env:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make(env_id)


def _reward(env: gym.Env, index: int, answer: str, fmt: str = "text") -> float:
    env.reset(options={"index": index})
    _, reward, terminated, _, _ = env.step(action(answer, fmt))
    assert terminated
    return float(reward)


def _qa_env(answer: str, question: str = "Who?", grammar: int = 3) -> gym.Env:
    tasks = ListTaskSource([Task("t", question, [answer], family="search")])
    return make_env("Bamboogle", tasks=tasks, grammar=grammar)


def _gold_and_wrong(env: gym.Env, index: int, other_text: str) -> tuple[str, str]:
    """Task ``index``'s gold and a wrong answer of its kind (another letter, gold + 1, or ``other_text``)."""
    env.reset(options={"index": index})
    task = env.unwrapped.task
    gold = str(task.answer)
    if task.metadata.get("options"):
        return gold, next(x for x in "ABCD" if x != gold)
    return gold, str(int(gold) + 1) if gold.lstrip("-").isdigit() else other_text


# ------------------------------------------------------------------ self-corrections, every format
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "env_id", ["agentflow/Gen-HopChain-v3", "agentflow/Gen-MultiHop-v3", "agentflow/Gen-Science-v3"]
)
def test_the_last_commitment_is_read_in_every_action_format(env_id, fmt):
    env = _env(env_id)
    gold, wrong = _gold_and_wrong(env, 1, "Xylophone Quartz")
    right = [
        f"I first thought {wrong}, but after checking, it is {gold}",
        f"I first thought {wrong}, but on checking it's {gold}",  # the "it" of "it's" is not the remark's
        f"The answer is {wrong}. Wait, actually it's {gold}.",
        f"{wrong}? On second thought, {gold}.",
        f"Answer: {wrong}\nCorrection: the answer is {gold}",
    ]
    for answer in right:
        assert _reward(env, 1, answer, fmt) == 1.0, answer
    for answer in right:  # the same answers with the roles swapped commit to the wrong value
        swapped = answer.replace(gold, "\x00").replace(wrong, gold).replace("\x00", wrong)
        assert _reward(env, 1, swapped, fmt) == 0.0, swapped
    # a remark that only mentions a revision drops nothing
    assert _reward(env, 1, f"{gold}\n\nActually, I double-checked the sources.", fmt) == 1.0


# ------------------------------------------------------------------ rivals, both orders
RIVALS = [
    "{a} ({b} in some sources)",
    "{a}\n\nBut {b} is also a reasonable answer.",
    "{a}; if not, {b}",
    "<answer>{a}</answer>\n<answer>{b}</answer>",
    "{a} (second choice: {b})",
    "{a}\n{b}",
    "The answer is {a}. Wait, actually {b}, or maybe {a}.",
]


@pytest.mark.parametrize(
    "env_id", ["agentflow/Gen-HopChain-v3", "agentflow/Gen-MultiHop-v3", "agentflow/Gen-Science-v3"]
)
def test_rivals_anywhere_score_zero_in_either_order(env_id):
    env = _env(env_id)
    gold, wrong = _gold_and_wrong(env, 2, "Palgrad")
    for template in RIVALS:
        for a, b in ((gold, wrong), (wrong, gold)):
            answer = template.format(a=a, b=b)
            assert _reward(env, 2, answer) == 0.0, answer
            assert _reward(env, 2, answer, "tool_call") == 0.0, answer


def test_two_game24_expressions_are_a_hedge_and_a_check_mark_is_not():
    env = _env("agentflow/Gen-GameOf24-v3")
    for index in range(20):
        env.reset(options={"index": index})
        if env.unwrapped.task.answer not in (None, "None", ["None"]):
            break
    from tests.reward_cases import _solve

    task = env.unwrapped.task
    solution = _solve(tuple(task.metadata["numbers"]))
    assert solution is not None
    wrong = "+".join(str(n) for n in task.metadata["numbers"])
    assert _reward(env, index, f"{solution} = 24 ✓") == 1.0
    assert _reward(env, index, f"One solution is {solution}.") == 1.0
    assert _reward(env, index, f"{solution}\n{wrong} = 24") == 0.0
    assert several_solutions(f"{solution}; if not, {wrong}", task.metadata["numbers"])
    assert not several_solutions(f"{solution} = 24", task.metadata["numbers"])


# ------------------------------------------------------------------ presentation
@pytest.mark.parametrize(
    "answer",
    [
        "33\n\nConfidence: 90%",
        "33 [1]",
        "> 33",
        "**Final Answer**\n\n33",
        "**Summary**\nThe answer is 33.",
        "33 is the answer to this question.",
        "Here is the answer: 33",
        "$\\displaystyle 33$",
        "33 ✓",
        "The answer is 33【2†source】 (confidence: high)",
        "I'm 95% sure it is 33.",
    ],
)
def test_presentation_around_a_correct_answer_is_read(answer):
    env = _qa_env("33", "How many?")
    env.reset()
    assert env.step(f"Final Answer: {answer}")[1] == 1.0, answer


def test_choice_decorations_read_the_letter():
    options = ["red", "green", "blue", "black"]
    tasks = ListTaskSource([Task("c", "Which?", "C", family="science", metadata={"options": options})])
    env = make_env("GPQA", tasks=tasks, grammar=3)
    for answer in ["\\boxed{\\text{C}}", "Correct option: C", "C is correct.", "**Answer**\nC", "C, not B."]:
        env.reset()
        assert env.step(f"Final Answer: {answer}")[1] == 1.0, answer
    for answer in ["C\nB", "C (second choice: B)", "Answer: C\n\nIf not, B."]:
        env.reset()
        assert env.step(f"Final Answer: {answer}")[1] == 0.0, answer


# ------------------------------------------------------------------ comparison by type
def test_typed_comparisons():
    assert same_date("30 April 1789", "April 30, 1789") and same_date("1789-04-30", "April 30, 1789")
    assert not same_date("April 1789", "April 30, 1789") and not same_date("1789", "April 30, 1789")
    assert not same_date("04/05/1789", "April 5, 1789")  # the day and month could swap
    assert same_name("Jose Marti", "José Martí") and same_name("J. F. Kennedy", "John F. Kennedy")
    assert same_name("J.F. Kennedy", "John F. Kennedy") and not same_name("John Kennedy", "John F. Kennedy")
    assert not same_name("J. Smith", "John Kennedy") and not same_name("John K.", "John Kennedy")
    assert same_list("India and Bangladesh", "India, Bangladesh") and not same_list(
        "Bangladesh, India", "India, Bangladesh"
    )
    assert same_quantity("3.12 \\times 10^{2} m", "312 m") and same_quantity("312", "312 m")
    assert not same_quantity("312 km", "312 m")
    assert typed_equal("30 April 1789", ["April 30, 1789"]) and not typed_equal("30 April 1790", ["April 30, 1789"])


@pytest.mark.parametrize(
    ("gold", "answer", "question"),
    [
        ("April 30, 1789", "It was 30 April 1789.", "When?"),
        ("April 30, 1789", "1789-04-30", "When?"),
        ("José Martí", "Jose Marti", "Who wrote it?"),
        ("James Madison", "J. Madison", "Who was president?"),
        ("1898 and 1959", "1898, 1959", "Which years?"),
    ],
)
def test_values_the_v2_normaliser_could_not_read(gold, answer, question):
    env = _qa_env(gold, question)
    env.reset()
    assert env.step(f"Final Answer: {answer}")[1] == 1.0
    old = _qa_env(gold, question, grammar=2)
    old.reset()
    assert old.step(f"Final Answer: {answer}")[1] == 0.0  # the v2 verdict is kept


def test_a_date_hedge_is_still_a_hedge():
    env = _qa_env("April 30, 1789", "When?")
    for answer in ["30 April 1789 or 1 May 1789", "30 April 1789 (1 May 1789 in some sources)"]:
        env.reset()
        assert env.step(f"Final Answer: {answer}")[1] == 0.0


# ------------------------------------------------------------------ versions, errors, judge
def test_v2_ids_keep_the_scorer_and_bad_grammar_is_a_config_error(monkeypatch):
    old, new = _env("agentflow/Gen-Math-v2"), _env("agentflow/Gen-Math-v3")
    assert not isinstance(old.unwrapped.scorer, GrammarScorer)
    assert isinstance(new.unwrapped.scorer, GrammarScorer)
    assert type(unwrap_scorer(new.unwrapped.scorer)) is type(old.unwrapped.scorer)
    assert with_grammar(old.unwrapped.scorer, 2) is old.unwrapped.scorer
    with pytest.raises(ConfigError, match="grammar"):
        make_env("Gen-Math", grammar=max(GRAMMARS) + 1)
    import builtins

    real_import = builtins.__import__

    def no_dateutil(name, *args, **kwargs):
        if name.startswith("dateutil"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dateutil)
    with pytest.raises(DependencyNotInstalled, match="dates"):
        GrammarScorer(QAScorer())


def test_the_judge_reads_the_same_text_and_rivals_never_reach_it():
    engine = RecordingJudge()
    judge = with_grammar(JudgeScorer(engine), 3)
    task = Task("j", "Who?", ["James Madison"], family="search")
    assert judge("James Madison (John Adams in some sources)", task) == 0.0
    assert judge("James Madison; if not, John Adams", task) == 0.0
    assert engine.candidates == []  # hedges score 0 without a call
    assert judge("**Final Answer**\n\nJames Madison [1]\n\nConfidence: 90%", task) == 1.0
    assert judge("I first thought John Adams, but after checking, it is James Madison", task) == 1.0
    assert engine.candidates == ["James Madison", "James Madison"]  # the span every rule scorer reads
    assert judge.score_batch(["James Madison", "James Madison; if not, John Adams"], [task, task]) == [1.0, 0.0]
    assert judge.kind == "judge" and len(engine.candidates) == 3


def test_the_reader_is_linear_on_hostile_input():
    import time

    for text in ["if " * 20_000, "(" * 20_000 + "33", "Wait, actually " * 5_000 + "33", "**" * 10_000]:
        start = time.process_time()
        read_answer(text)
        assert time.process_time() - start < 2.0


# ------------------------------------------------------------------ held-out styles (small sample)
@pytest.mark.parametrize(
    "env_id",
    [
        "agentflow/Gen-MultiHop-v3",
        "agentflow/Gen-Math-v3",
        "agentflow/Gen-Science-v3",
        "agentflow/Gen-HopChain-v3",
        "agentflow/Gen-MultiHop-v4",
        "agentflow/Gen-Math-v4",
        "agentflow/Gen-Science-v4",
        "agentflow/Gen-GameOf24-v4",
    ],
)
def test_held_out_styles_stay_within_the_limits(env_id):
    """A small sample of ``perf/reward_quality.py``: both halves, through env.step, rotating formats; the
    sentence families (tests/answer_sentences.py) only on the -v4 ids, whose grammar reads them."""
    env = _env(env_id)
    sentences = env_id.endswith("-v4")
    base = env.unwrapped
    kind = kind_of(base.scorer)
    pool = [g for i in spread(len(base.tasks), 60) for g in golds_of(base.tasks[i])]
    for half in HALVES:
        correct = zeroed = hedges = paid = 0
        n = 0
        for index in spread(len(base.tasks), 4):
            for style in task_styles(base.tasks[index], kind, pool, half, per_kind=12, seed=7, sentences=sentences):
                reward = _reward(env, index, style.answer, FORMATS[n % 3])
                n += 1
                if style.kind == "correct":
                    correct += 1
                    zeroed += reward < 1
                else:
                    hedges += 1
                    paid += reward > 0
        assert zeroed <= math.ceil(0.04 * correct), (half, zeroed, correct)
        assert paid <= math.ceil(0.01 * hedges), (half, paid, hedges)


def test_a_product_in_another_order_is_one_value():
    from agentflow_env.scoring.math import MathScorer

    scorer = with_grammar(MathScorer(isolation="thread", warm=False), 3)
    task = Task("m", "Simplify.", "4\\sqrt{5}", family="math")
    assert scorer("\\sqrt{5} \\cdot 4", task) == 1.0 and scorer("\\boxed{\\sqrt{5} \\times 4}", task) == 1.0
    assert scorer("\\boxed{\\sqrt{5} \\cdot 4} or \\boxed{5}", task) == 0.0
    assert scorer("2 \\cdot 4\\sqrt{5}", task) == 0.0
