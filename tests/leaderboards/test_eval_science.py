"""The ledger, the policy-only control and the dry-run estimate, end to end against one loopback OpenAI-compatible
server that scripts the planner's and the modules' replies and reports token usage in proportion to the text.

Checked: every run.json has a ledger whose calls and tokens by role are exactly what the server saw and
reported; `leaderboard show --ledger` prints it; `--control-engine SPEC` sends every module call to the fixed
engine and none to the protocol's (the planner untouched), `--control-engine offline` sends none at all, both
recorded; `compare` of a run and its control names the control; `eval --dry-run --sample-episodes` estimates
calls and tokens by role within 25% of the measured run.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LoopbackServer, Response, json_response

PROTOCOL = """
name = "science-test"
mode = "offline"
max_turns = 4
seeds = [0]
fast_tasks = 2

[env]
executor = "llm"
verifier = "llm"
generator = "llm"
engine = "openai:qwen@URL"

[sampling]
temperature = 0.0
max_tokens = 64

[[benchmarks]]
env_id = "agentflow/Gen-Math-v2"
category = "math"
num_tasks = 6
options = { seed = 0 }

[[benchmarks]]
env_id = "agentflow/Gen-MultiHop-v2"
category = "math"
num_tasks = 6
options = { seed = 0 }
"""


def _kind(body: dict[str, Any]) -> str:
    if body["model"] == "planner":
        return "planner"
    user = body["messages"][-1]["content"]
    for opening, kind in (
        ("The team's planner has picked a tool", "executor"),
        ("You review the team's progress", "verifier"),
        ("Write the final answer", "generator"),
    ):
        if user.lstrip().startswith(opening):
            return kind
    return "other"


def _reply(body: dict[str, Any]) -> str:
    kind = _kind(body)
    user = body["messages"][-1]["content"]
    if kind == "planner":
        if "(no steps yet)" in user:  # one step with the first tool the prompt offers, then the answer
            tool = re.search(r"Tool Name: <one of: (\w+)", user)
            return (
                f"Justification: look.\nContext: none\nSub-Goal: Find it.\nTool Name: {tool.group(1) if tool else '?'}"
            )
        return "Final Answer: 42"
    return {"executor": "Command: 1+1", "verifier": "Conclusion: CONTINUE", "generator": "Final Answer: 42"}.get(
        kind, "?"
    )


def _usage(body: dict[str, Any], reply: str) -> dict[str, int]:
    chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
    return {"prompt_tokens": chars // 4, "completion_tokens": len(reply) // 4 + 1}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    def handle(request: dict[str, Any]) -> Response:
        body = request["json"]
        reply = _reply(body)
        usage = _usage(body, reply)
        return json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
                "usage": {**usage, "total_tokens": sum(usage.values())},
            }
        )

    srv = LoopbackServer(handle)
    srv.url += "/v1"
    with srv:
        yield srv


def _protocol(tmp_path: Path, server: LoopbackServer) -> Path:
    path = tmp_path / "science-test.toml"
    path.write_text(PROTOCOL.replace("URL", server.url))
    return path


def _eval(tmp_path: Path, server: LoopbackServer, name: str, *extra: str) -> int:
    from agentflow_env.cli import main

    args = ["eval", "--protocol", str(_protocol(tmp_path, server)), "--policy", f"openai:planner@{server.url}"]
    args += ["--output-dir", str(tmp_path / "runs"), "--no-progress", "--name", name, "--concurrency", "2", *extra]
    return main(args)


def _run_json(tmp_path: Path, name: str) -> dict[str, Any]:
    return json.loads((tmp_path / "runs" / "science-test" / name / "run.json").read_text())


def _seen(server: LoopbackServer) -> dict[str, dict[str, int]]:
    """Per request kind: calls and the tokens the server reported."""
    out: dict[str, dict[str, int]] = {}
    for body in server.bodies:
        usage = _usage(body, _reply(body))
        row = out.setdefault(_kind(body), Counter())
        row["calls"] += 1
        row["prompt_tokens"] += usage["prompt_tokens"]
        row["completion_tokens"] += usage["completion_tokens"]
    return out


def _ledger_rows(ledger: dict[str, Any]) -> dict[str, dict[str, int]]:
    from leaderboards.ledger import role_totals

    return {
        row: {"calls": t.calls, "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens}
        for row, t in role_totals(ledger).items()
    }


def test_ledger_holds_every_call_by_role_and_the_board_shows_it(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentflow_env.cli import main

    assert _eval(tmp_path, server, "full") == 0, capsys.readouterr().err
    record = _run_json(tmp_path, "full")
    ledger = record["ledger"]
    assert set(ledger) == {"agentflow/Gen-Math-v2", "agentflow/Gen-MultiHop-v2"}
    seen = _seen(server)
    rows = _ledger_rows(ledger)
    assert rows == {
        "planner": seen["planner"],
        "modules:executor": seen["executor"],
        "modules:verifier": seen["verifier"],
        "modules:generator": seen["generator"],
    }
    assert all(t.get("estimated_calls", 0) == 0 for roles in ledger.values() for t in [roles["planner"]])
    capsys.readouterr()
    assert main(["leaderboard", "show", "--results", str(tmp_path / "runs"), "--ledger"]) == 0
    out = capsys.readouterr().out
    assert "full: LLM calls by role" in out
    assert f"| all | modules:executor | {seen['executor']['calls']} | {seen['executor']['prompt_tokens']} |" in out


def test_control_engine_replaces_every_non_planner_llm(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentflow_env.cli import main

    assert _eval(tmp_path, server, "normal", "--fast") == 0, capsys.readouterr().err
    normal_models = Counter(b["model"] for b in server.bodies)
    server.log.clear()
    assert _eval(tmp_path, server, "control", "--fast", "--control-engine", f"openai:control@{server.url}") == 0
    models = Counter(b["model"] for b in server.bodies)
    assert "qwen" not in models and models["control"] == normal_models["qwen"] and models["planner"] > 0
    record = _run_json(tmp_path, "control")
    assert record["control"]["engine"] == f"openai:control@{server.url}"
    assert record["control"]["replaces"] == ["executor", "verifier", "generator"]
    assert record["env"]["engine"] == f"openai:control@{server.url}"
    assert set(_ledger_rows(record["ledger"])) == {
        "planner",
        "modules:executor",
        "modules:verifier",
        "modules:generator",
    }

    server.log.clear()
    assert _eval(tmp_path, server, "offline", "--fast", "--control-engine", "offline") == 0
    assert {b["model"] for b in server.bodies} == {"planner"}  # the offline modules call nothing
    record = _run_json(tmp_path, "offline")
    assert record["control"]["engine"] == "offline" and record["env"]["executor"] == "direct"

    capsys.readouterr()
    runs = tmp_path / "runs" / "science-test"
    assert main(["leaderboard", "compare", str(runs / "normal"), str(runs / "control")]) == 0
    assert "warning: B is a policy-only control" in capsys.readouterr().out
    # --engine and --control-engine together: refused before anything runs
    assert _eval(tmp_path, server, "both", "--control-engine", "offline", "--engine", "scripted:echo") == 2
    assert "leave --engine out" in capsys.readouterr().err


def test_dry_run_estimate_is_within_a_quarter_of_the_measured_run(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(tmp_path, server, "estimate", "--dry-run", "--sample-episodes", "2", "--json") == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["episodes"] == {"agentflow/Gen-Math-v2": 6, "agentflow/Gen-MultiHop-v2": 6}
    assert estimate["sample_episodes"] == {"agentflow/Gen-Math-v2": 2, "agentflow/Gen-MultiHop-v2": 2}
    assert not (tmp_path / "runs" / "science-test" / "estimate").exists()  # the sample ran elsewhere
    server.log.clear()
    assert _eval(tmp_path, server, "measured") == 0
    measured = _ledger_rows(_run_json(tmp_path, "measured")["ledger"])
    assert set(estimate["total"]) == set(measured)
    for row, m in measured.items():
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            guess = estimate["total"][row][key]
            assert abs(guess - m[key]) <= 0.25 * m[key], (row, key, guess, m[key])


_PAPER_OPENINGS = {
    "Job: study the query": ("query_analysis", "The query needs one fact."),
    "Job: write the exact command": (
        "executor",
        'Generated Command:\n```python\nexecution = tool.execute(query="Answer it.")\n```',
    ),
    "Job: decide whether": ("verifier", "Conclusion: STOP"),
    "Job: write a concise final answer": ("final_output", "Answer: 42"),
}


def _paper_call(body: dict[str, Any]) -> tuple[str, str]:
    """(kind, reply) of one request of the paper flow: one generalist step, then the final output and the judge."""
    if body["model"] == "planner":
        return "planner", "Justification: ask.\nContext: none\nSub-Goal: Answer it.\nTool Name: " + (
            "Generalist_Solution_Generator_Tool"
        )
    if body["model"] == "judge":
        return "judge", "VERDICT: CORRECT"
    user = body["messages"][-1]["content"].lstrip()
    for opening, found in _PAPER_OPENINGS.items():
        if user.startswith(opening):
            return found
    return "tool", "The generalist says 42."


def test_paper_flow_control_and_ledger(tmp_path: Path, testsets_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """paper-v1 (one task per benchmark, one trial) with --control-engine: query analysis, executor, verifier,
    final output and the generalist tool all call the control engine; the ledger counts each as the server saw."""
    from agentflow_env.cli import main
    from leaderboards.protocol import PROTOCOL_DIR
    from tests.helpers import chat_server

    text = (PROTOCOL_DIR / "paper-v1.toml").read_text(encoding="utf-8")
    small = tmp_path / "paper-v1.toml"
    small.write_text(text.replace("seeds = [0, 1, 2]", "seeds = [0]").replace("fast_tasks = 5", "fast_tasks = 1"))
    with chat_server(lambda body: _paper_call(body)[1]) as srv:
        args = ["eval", "--protocol", str(small), "--fast", "--policy", f"openai:planner@{srv.url}"]
        args += ["--control-engine", f"openai:control@{srv.url}", "--judge-engine", f"openai:judge@{srv.url}"]
        args += ["--data-dir", str(testsets_dir), "--output-dir", str(tmp_path / "runs"), "--no-progress"]
        assert main([*args, "--name", "ctl", "--concurrency", "2"]) == 0, capsys.readouterr().err
        kinds = Counter(_paper_call(b)[0] for b in srv.bodies)
        models = {_paper_call(b)[0]: b["model"] for b in srv.bodies}
    assert {k: m for k, m in models.items() if k not in ("planner", "judge")} == {
        k: "control" for k in ("query_analysis", "executor", "tool", "verifier", "final_output")
    }
    record = json.loads((tmp_path / "runs" / "paper-v1" / "ctl" / "run.json").read_text())
    assert record["control"]["replaces"][:4] == ["query_analysis", "executor", "verifier", "final_output"]
    rows = {row: t["calls"] for row, t in _ledger_rows(record["ledger"]).items()}
    assert rows == {
        "planner": kinds["planner"],
        "modules:executor": kinds["executor"],
        "modules:final_output": kinds["final_output"],
        "modules:query_analysis": kinds["query_analysis"],
        "modules:verifier": kinds["verifier"],
        "tools:Generalist_Solution_Generator_Tool": kinds["tool"],
        "judge": kinds["judge"],
    }


def test_a_resumed_run_adds_to_its_stored_ledger(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(tmp_path, server, "resumed", "--fast") == 0, capsys.readouterr().err
    first = _ledger_rows(_run_json(tmp_path, "resumed")["ledger"])
    tasks = tmp_path / "runs" / "science-test" / "resumed" / "tasks.jsonl"
    lines = tasks.read_text().splitlines(keepends=True)
    tasks.write_text("".join(lines[:-1]))  # as if the run had stopped before its last episode was stored
    server.log.clear()
    assert _eval(tmp_path, server, "resumed", "--fast") == 0, capsys.readouterr().err
    again = _seen(server)
    after = _ledger_rows(_run_json(tmp_path, "resumed")["ledger"])
    assert again["planner"]["calls"] >= 1
    for row, seen_row in (("planner", again["planner"]), ("modules:executor", again["executor"])):
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            assert after[row][key] == first[row][key] + seen_row[key], (row, key)
