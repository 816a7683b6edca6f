"""A protocol's budget clock: on the token clock a binding budget gives the same turns, answers and scores at
concurrency 1 and 64, however long the calls take; the wall clock's results say how many episodes it cut; the
board marks such rows and rows counted on another clock; the default clock leaves protocol hashes as they were.

The paper flow runs on ``agentflow/Gen-Math-v3`` with its modules behind a loopback server
(``perf/eval_throughput.py``'s) that answers every call after a random 100-300 ms at
concurrency 64 and 0-10 ms at concurrency 1 (usage: 100 prompt and 20
completion tokens a call) and whose verifier never stops: only the budget or the step limit ends an episode. The
planner pads its reply by a per-task amount, so the budget cuts episodes after different numbers of steps.
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path
from typing import Any

import pytest

from agentflow_env.error import ConfigError
from leaderboards.protocol import PROTOCOL_DIR, load_protocol
from leaderboards.render import _marks, _protocol_summary, board_rows
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import EvalResult, RunRecord, TaskOutcome
from perf.eval_throughput import PAPER_PLAN, LatencyServer

_STEP = re.compile(r"'Action Step \d+'")  # a step's key in the memory dict of the final-output prompt
TASKS, FIRST = 64, 8  # tasks at concurrency 64; the first FIRST also at concurrency 1

PROTOCOL = """
name = "{name}"
mode = "offline"
max_turns = 5
seeds = [0]
fast_tasks = {first}

[env]
flow = "paper"
engine = "openai:modules@{url}"
time_budget_s = {budget}
{clock}

[[benchmarks]]
env_id = "agentflow/Gen-Math-v3"
category = "math"
num_tasks = {tasks}
options = {{ seed = 0 }}
"""

TOKEN_CLOCK = """budget_clock = "tokens"

[env.clock_rates]
call_s = 0.5
prompt_s_per_1k = 0.5
completion_s_per_1k = 4.0
tool_call_s = 1.0
"""


class _Planner:
    """The generalist tool every step, the reply padded by 0, 1, 2 or 3 thousand characters per task."""

    concurrent_act = True

    def act(self, observations: list[dict[str, str]]) -> list[str]:
        out = []
        for obs in observations:
            pad = int(hashlib.sha256(obs["question"].encode()).hexdigest()[:4], 16) % 4
            out.append(f"Justification: {'x' * 1000 * pad}\n{PAPER_PLAN}")
        return out


def _reply(kind: str, body: dict[str, Any]) -> str | None:
    user = str(body["messages"][-1]["content"])
    if kind == "verifier":
        return "More is needed.\nConclusion: CONTINUE"  # never STOP: the budget or the step limit ends a run
    if kind == "final_output":  # the answer says how many steps ran, so a budget change shows
        return f"Answer: {len(_STEP.findall(user))}"
    return None


def _protocol(folder: Path, url: str, budget: float, clock: str, tasks: int = TASKS) -> Path:
    path = folder / f"budget-{clock}.toml"
    text = PROTOCOL.format(
        name=f"budget-{clock}", first=FIRST, url=url, budget=budget, tasks=tasks,
        clock=TOKEN_CLOCK if clock == "tokens" else 'budget_clock = "wall"',
    )  # fmt: skip
    path.write_text(text, encoding="utf-8")
    return path


def _run(tmp_path: Path, protocol: Path, concurrency: int, fast: bool) -> EvalResult:
    return evaluate(
        EvalConfig(
            policy="test:planner",
            protocol=str(protocol),
            out=tmp_path / f"c{concurrency}",
            fast=fast,
            progress=False,
            concurrency=concurrency,
            policy_factory=lambda env_id: _Planner(),
        )
    )


def _episodes(result: EvalResult) -> dict[str, tuple[Any, ...]]:
    return {o.key: (o.score, o.turns, o.answer, o.truncated, o.budget_cut) for o in result.outcomes}


def test_a_binding_token_budget_gives_the_same_turns_and_scores_at_concurrency_1_and_64(tmp_path: Path) -> None:
    rng, spread = random.Random(0), [0.1, 0.2]  # each call waits lo + a random part of spread seconds

    def latency(kind: str, body: dict[str, Any]) -> float:
        return spread[0] + rng.random() * spread[1]

    with LatencyServer(0.0, steps=99, latency_for=latency, reply_for=_reply) as server:
        protocol = _protocol(tmp_path, server.url, 12.0, "tokens")
        at_64 = _run(tmp_path, protocol, 64, fast=False)
        peak = server.counters()["peak_in_flight"]
        spread[:] = [0.0, 0.01]  # alone, every call is ten times quicker: no matter on the token clock
        at_1 = _run(tmp_path, protocol, 1, fast=True)
    many, one = _episodes(at_64), _episodes(at_1)
    assert len(many) == TASKS and len(one) == FIRST
    assert one == {k: many[k] for k in one}
    # calls shared the server and the client's CPU (more at once on an idle machine; 12 at a load of 20 on 2 cores)
    assert peak >= 8, f"only {peak} requests were in flight at once at concurrency 64"
    cut = [v for v in many.values() if v[4]]
    assert cut and len({v[1] for v in cut}) > 1, "the budget must cut episodes, after different numbers of steps"
    # (turns, steps that ran their modules): a step that starts past the budget runs none
    assert all(v[3] for v in cut) and len({v[1:3] for v in many.values()}) >= 3
    record = at_64.record
    assert record.clock is not None and record.clock["clock"] == "tokens" and record.clock["rates"]["call_s"] == 0.5
    assert record.budget_cut == {"agentflow/Gen-Math-v3": len(cut)} and at_64.summary()["budget_cut"] == len(cut)


def test_the_wall_clock_records_how_many_episodes_its_budget_cut(tmp_path: Path) -> None:
    with LatencyServer(0.01, steps=99, reply_for=_reply) as server:  # a call takes longer than the whole budget
        result = _run(tmp_path, _protocol(tmp_path, server.url, 0.001, "wall", tasks=6), 6, fast=False)
    assert result.record.clock == {"clock": "wall", "time_budget_s": 0.001}
    assert result.record.budget_cut == {"agentflow/Gen-Math-v3": 6} and result.summary()["budget_cut"] == 6
    assert all(o.budget_cut and o.turns == 1 for o in result.outcomes)
    (row,) = board_rows([result]).rows
    assert ("budget cut 6", "the wall-clock time budget of 0.001 s cut 6 of 6 episodes") in _marks(row)


def _result(name: str, clock: str | None, cut: int) -> EvalResult:
    record = RunRecord(name=name, protocol="budget-mix", protocol_hash="h", policy=name)
    record.benchmarks = {"e": {"label": "E", "category": "math"}}
    record.clock = {"clock": clock, "time_budget_s": 10.0} if clock else None
    outcomes = [
        TaskOutcome(f"e#{i}", "e", i, 0, 0, str(i), 1.0, "", "", 1, False, True, 0.1, budget_cut=i < cut)
        for i in range(4)
    ]
    return EvalResult(record=record, outcomes=outcomes)


def test_the_board_marks_rows_of_another_clock_and_rows_whose_budget_cut_episodes() -> None:
    board = board_rows([_result("a", "tokens", 0), _result("b", "tokens", 2), _result("c", None, 0)])
    marks = {r.name: [short for short, _ in _marks(r)] for r in board.rows}
    assert marks == {"a": [], "b": ["budget cut 2"], "c": ["wall clock, not comparable"]}


def test_the_default_clock_leaves_protocol_hashes_as_they_were(tmp_path: Path) -> None:
    text = (PROTOCOL_DIR / "paper-v2.toml").read_text(encoding="utf-8")
    stated = tmp_path / "paper-v2.toml"
    stated.write_text(text.replace("\n[env]\n", '\n[env]\nbudget_clock = "wall"\n'), encoding="utf-8")
    tokens = tmp_path / "paper-v2-tokens.toml"
    tokens.write_text(text.replace("\n[env]\n", '\n[env]\nbudget_clock = "tokens"\n'), encoding="utf-8")
    shipped = load_protocol("paper-v2")
    assert shipped.clock == "wall" and load_protocol(stated).hash == shipped.hash
    assert load_protocol(tokens).clock == "tokens" and load_protocol(tokens).hash != shipped.hash
    assert "time budget on the tokens clock" in _protocol_summary(load_protocol(tokens))
    assert "clock" not in _protocol_summary(shipped)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ('budget_clock = "cpu"', "budget_clock='cpu'"),
        ('budget_clock = "wall"\nclock_rates = { call_s = 1.0 }', 'budget_clock = "tokens" only'),
        ('budget_clock = "tokens"\nclock_rates = { per_call = 1.0 }', "no field per_call"),
    ],
)
def test_a_bad_budget_clock_in_a_protocol_is_a_clear_error(tmp_path: Path, env: str, problem: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        PROTOCOL.format(name="bad", first=1, url="http://x", budget=1, tasks=1, clock=env), encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=problem):
        load_protocol(path)
