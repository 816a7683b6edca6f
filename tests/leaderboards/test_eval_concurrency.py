"""Scores do not depend on concurrency: each episode's time budget counts only its own work.

The env's LLM executor and verifier sit behind a loopback server that answers after a fixed latency
(``perf/eval_throughput.py``'s), set per task: for a quarter of the tasks the executor takes 6 s, past the 3 s
budget, so the budget ends them in step 1 before the tool runs; the others' calls take 0.1 s and they end at the
verifier's STOP after step 2. Every budget check is seconds away from flipping, room for a busy machine with
64 requests in flight. So turns, answers and scores are fixed by the replies alone, as long as an episode's
clock does not count the time it waits behind others (the old lock-step runner gave an episode of a batch of
64 the time of every other episode's steps). Checked at concurrency 1 (the first tasks), 16 and 64.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from leaderboards.runner import EvalConfig, evaluate
from perf.eval_throughput import LatencyServer

BUDGET, SLOW, FAST = 3.0, 6.0, 0.1  # seconds
TASKS = 64
FIRST = 4  # tasks run at concurrency 1 too (the protocol's fast_tasks)

PROTOCOL = """
name = "concurrency-test"
mode = "offline"
max_turns = 6
seeds = [0]
fast_tasks = {first}

[env]
executor = "llm"
verifier = "llm"
generator = "llm"
engine = "openai:modules@{url}"
time_budget_s = {budget}

[[benchmarks]]
env_id = "agentflow/Gen-Math-v1"
category = "math"
num_tasks = {tasks}
options = {{ seed = 0 }}
"""


def _slow(body: dict[str, Any]) -> bool:
    """A quarter of the tasks, by their question."""
    user = str(body["messages"][-1]["content"])
    found = re.search(r"The question the team is working on:\n(.*?)\n\n", user, re.DOTALL)
    assert found, user
    return int(hashlib.sha256(found.group(1).encode()).hexdigest()[:4], 16) % 4 == 0


def _latency(kind: str, body: dict[str, Any]) -> float:
    if kind == "llm_executor":
        return SLOW if _slow(body) else FAST
    return 0.0 if kind == "llm_generator" else FAST  # the final answer is written after the clock stops


def _reply(kind: str, body: dict[str, Any]) -> str | None:
    user = str(body["messages"][-1]["content"])
    if kind == "llm_verifier":
        return "Conclusion: STOP" if "Step 2:" in user else "Conclusion: CONTINUE"  # the verdict is the last line
    if kind == "llm_generator":  # the answer says which steps ran their tool, so a budget change shows
        # memory reaches the module fenced as data, each line quoted ("│ Step 1: ...")
        steps = re.findall(r"^(?:│ )?(Step \d+: .*)$", user, re.MULTILINE)
        return "Final Answer: " + ";".join(line.strip() for line in steps)
    return None


class _Planner:
    """Always the first tool with a sub-goal; never answers (the budget or the verifier ends the episode)."""

    concurrent_act = True

    def act(self, observations: list[dict[str, str]]) -> list[str]:
        out = []
        for obs in observations:
            tools = re.findall(r"^- ([A-Za-z0-9_]+):", obs["tools"], re.MULTILINE)
            out.append(f"Tool Name: {tools[0]}\nSub-Goal: Work out the next number.")
        return out


def _run(tmp_path: Path, protocol: Path, concurrency: int, fast: bool) -> dict[str, tuple[Any, ...]]:
    result = evaluate(
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
    return {o.key: (o.score, o.turns, o.answer, o.truncated) for o in result.outcomes}


def test_scores_turns_and_answers_are_the_same_at_concurrency_1_16_and_64(tmp_path: Path) -> None:
    with LatencyServer(FAST, latency_for=_latency, reply_for=_reply) as server:
        protocol = tmp_path / "concurrency-test.toml"
        text = PROTOCOL.format(url=server.url, budget=BUDGET, tasks=TASKS, first=FIRST)
        protocol.write_text(text, encoding="utf-8")
        at_64 = _run(tmp_path, protocol, 64, fast=False)
        peak = server.counters()["peak_in_flight"]
        at_16 = _run(tmp_path, protocol, 16, fast=False)
        at_1 = _run(tmp_path, protocol, 1, fast=True)
    assert len(at_64) == TASKS and len(at_1) == FIRST
    assert peak > 16, f"only {peak} requests were in flight at once at concurrency 64"
    assert at_16 == at_64
    assert at_1 == {k: at_64[k] for k in at_1}
    endings = {v[1:] for v in at_64.values()}
    assert endings == {
        (1, "Step 1: no tool (failed)", True),  # the budget ran out during the slow executor call
        (2, "Step 1: Calculator_Tool;Step 2: Calculator_Tool", False),  # the verifier's STOP
    }, endings
