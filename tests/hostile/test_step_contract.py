"""``env.step`` never raises, whatever the action object or the tool transport does, and every text the env
keeps per turn is within the per-turn text budget (``max_action_chars``), with a marker saying what was cut.

Actions: nested 2,000 deep, huge, of odd types, objects whose ``__str__``/``__repr__`` raise, ``str``
subclasses whose methods raise. Tools: one that answers 20 MB, and a streamable-HTTP MCP server that exits
in the middle of a call (it raised ``CancelledError`` out of ``step``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from agentflow_env.core import AgentFlowEnv
from agentflow_env.engines import ScriptedEngine
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import Task, ToolResult
from tests.helpers import WIKI_PLAN, echo_paper_env, free_port, hang_guard, wait_for_port

TASK = Task(id="t", question="What is 2+2?", answer="4")
BUDGET = 100_000  # max_action_chars' default: the per-turn text budget


class Hostile:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    __repr__ = __str__
    __format__ = None  # type: ignore[assignment]


class BadStr(str):
    def __len__(self) -> int:
        raise RuntimeError("no len")

    def __contains__(self, item: object) -> bool:
        raise RuntimeError("no contains")

    def strip(self, *args: Any) -> str:
        raise RuntimeError("no strip")


class BadDict(dict):
    def items(self):  # type: ignore[override]
        raise RuntimeError("no items")

    def get(self, *args: Any) -> Any:
        raise RuntimeError("no get")


def nested(depth: int, leaf: Any, kind: str = "dict") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


ACTIONS = {
    "dict_2000_deep": nested(2000, "x"),
    "list_2000_deep": nested(2000, "x", "list"),
    "message_content_deep": {"role": "assistant", "content": nested(2000, "x")},
    "tool_calls_deep": {"role": "assistant", "tool_calls": [{"id": "1", "function": nested(2000, "x")}]},
    "arguments_deep": {
        "role": "assistant",
        "tool_calls": [{"id": "1", "type": "function", "function": {"name": "calc", "arguments": nested(2000, 1)}}],
    },
    "huge_dict": {"role": "assistant", "content": "x" * 10_000_000},
    "huge_str": "Tool Name: calc\nCommand: " + "1+" * 5_000_000 + "1",
    "hostile_object": Hostile(),
    "hostile_in_dict": {"role": "assistant", "content": Hostile()},
    "hostile_tool_calls": {"role": "assistant", "tool_calls": Hostile()},
    "bad_str": BadStr("Final Answer: 4"),
    "bad_dict": BadDict(role="assistant", content="hi"),
    "bytes": b"Final Answer: 4",
    "none": None,
    "int": 10**100,
    "float_nan": float("nan"),
    "set": {1, 2, 3},
    "tuple": ("Tool Name: calc", "Command: 1"),
    "generator": (i for i in range(3)),
    "non_str_keys": {("a",): 1, 2: Hostile()},
    "type": str,
    "content_parts_odd": {"role": "assistant", "content": [{"type": "text", "text": None}, 5]},
}


class EchoCalc(BaseTool):
    name = "calc"

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text=f"echo {command[:100]}")


class HugeTool(BaseTool):
    name = "huge"

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text="r" * 20_000_000)


def core_env(tools: Any = None, **kwargs: Any) -> AgentFlowEnv:
    return AgentFlowEnv(
        [TASK], lambda answer, task: float(answer == task.answer), tools or [EchoCalc()], max_turns=5, **kwargs
    )


def _text_sizes(value: Any) -> int:
    """The longest string anywhere in ``value``."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((_text_sizes(v) for v in value.values()), default=0)
    if isinstance(value, (list, tuple)):
        return max((_text_sizes(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize("tool_calling", [False, True])
@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_core_step_never_raises_on_any_action(name: str, tool_calling: bool) -> None:
    env = core_env()
    env.reset(seed=0, options={"tool_calling": tool_calling})
    with hang_guard(60):
        obs, reward, terminated, truncated, info = env.step(ACTIONS[name])
    assert isinstance(obs["prompt"], str) and 0.0 <= reward <= 1.0
    assert _text_sizes(info["messages"]) <= BUDGET and _text_sizes(info["memory_steps"]) <= BUDGET
    if name.startswith(("hostile", "huge", "content_parts", "dict_", "list_", "message_", "tool_calls", "args")):
        assert not (terminated or truncated), "an unreadable action must not end the episode"
    if not (terminated or truncated):  # the episode goes on
        _, _, _, _, info = env.step("Tool Name: calc\nSub-Goal: add\nCommand: 2+2")
        assert info["memory_steps"][-1]["result"] == "echo 2+2"


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_paper_step_never_raises_on_any_action(name: str) -> None:
    def reply(prompt: str) -> str:
        if "Generated Command" in prompt:
            return 'Generated Command:\n```python\nexecution = tool.execute(query="q")\n```'
        return "Conclusion: CONTINUE" if "STOP" in prompt and "CONTINUE" in prompt else "Answer: 1871"

    env = echo_paper_env(ScriptedEngine(reply), max_turns=3)
    env.reset(seed=0)
    with hang_guard(60):
        obs, reward, terminated, truncated, info = env.step(ACTIONS[name])
    assert isinstance(obs["prompt"], str) and 0.0 <= reward <= 1.0
    assert _text_sizes(info["module_calls"]) <= BUDGET
    if not (terminated or truncated):
        env.step(WIKI_PLAN)


def test_a_rejected_10mb_action_is_kept_within_the_budget_with_a_marker() -> None:
    env = core_env()
    env.reset(seed=0)
    action = "Tool Name: calc\nCommand: " + "x" * 10_000_000
    _, _, _, _, info = env.step(action)
    assert "action_rejected" in info
    kept = [m["content"] for m in info["messages"] if m["role"] == "assistant"]
    assert len(kept) == 1 and len(kept[0]) <= BUDGET and "chars cut" in kept[0]
    _, _, _, _, info = env.step("Final Answer: 4")
    assert _text_sizes(info["trajectory"]) <= BUDGET and _text_sizes(info["messages"]) <= BUDGET


def test_a_20mb_tool_reply_is_kept_within_the_budget_with_a_marker() -> None:
    env = core_env([HugeTool()])
    env.reset(seed=0)
    for _ in range(2):  # the fast path (canonical action) and the general one
        _, _, _, _, info = env.step("Justification: a\nContext: b\nSub-Goal: c\nTool Name: huge\nCommand: go")
    _, _, _, _, info = env.step({"role": "assistant", "content": "Tool Name: huge\nCommand: go"})
    for step in info["memory_steps"]:
        assert len(step["result"]) <= BUDGET and "chars cut" in step["result"]
    assert _text_sizes(info["messages"]) <= BUDGET and "chars cut" in info["messages"][-1]["content"]
    _, _, _, _, info = env.step("Final Answer: 4")
    assert all(len(t["result"]) <= BUDGET for t in info["trajectory"] if t["result"])


# ---------------------------------------------------------------------------- a transport that dies
_DYING_SERVER = textwrap.dedent(
    """
    import os, sys
    from mcp.server.mcpserver import MCPServer
    server = MCPServer("dying")
    def echo(command: str) -> str:
        return "echo " + command
    def die(command: str) -> str:
        os._exit(3)
    server.add_tool(echo, name="echo", description="echo", structured_output=False)
    server.add_tool(die, name="die", description="exit mid-call", structured_output=False)
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    """
)


def test_an_mcp_server_exiting_mid_call_is_that_turns_tool_error() -> None:
    pytest.importorskip("mcp")
    from agentflow_env.tools.mcp_tools import load_mcp_tools

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", _DYING_SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port)
        tools = load_mcp_tools([{"url": f"http://127.0.0.1:{port}/mcp"}])
        env = core_env(tools, tool_timeout_s=20.0)
        try:
            env.reset(seed=0)
            _, _, _, _, info = env.step("Tool Name: echo\nSub-Goal: a\nCommand: hi")
            assert info["memory_steps"][-1]["result"] == "echo hi"
            with hang_guard(60):
                _, _, terminated, truncated, info = env.step("Tool Name: die\nSub-Goal: a\nCommand: now")
            step = info["memory_steps"][-1]
            assert not step["ok"] and step["error"] and info["turn_signals"]["tool_error"]
            with hang_guard(60):  # the session is gone: later calls are tool errors too, at once
                _, _, _, _, info = env.step("Tool Name: echo\nSub-Goal: a\nCommand: again")
            assert not info["memory_steps"][-1]["ok"]
        finally:
            env.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)
