"""What the turn's fast parts must keep: ``step``'s fast reader reads as ``_read`` does, and an episode plays
byte for byte the same with it and without it, whatever the action's format; memory rendered step by step equals a
fresh rendering."""

from __future__ import annotations

import json
import random

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.tools.base import BaseTool
from agentflow_env.turn.memory import Memory
from agentflow_env.types import MemoryStep, ToolResult


class Echo(BaseTool):
    name = "Echo_Tool"
    description = "Echoes its input."
    input_spec = "text"
    examples = ("hi",)

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text=command * 3)


def test_memory_rendered_step_by_step_equals_a_fresh_rendering():
    rng = random.Random(0)
    for budget in (300, 2000, 8000):
        grown = Memory()
        for turn in range(1, 40):
            step = MemoryStep(turn=turn, tool="T", sub_goal="s", command="c", result="r" * rng.randint(0, 400))
            grown.add(step)
            text = grown.render(budget)
            assert text == Memory(grown.steps).render(budget)
            assert len(text) <= budget or turn == 1


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, (list, tuple)):
        return [_untimed(v) for v in value]
    return value


def _episode(env: AgentFlowEnv, actions: list[str]) -> list:
    out = [json.dumps(env.reset(seed=3), sort_keys=True, default=str)]
    for action in actions:
        obs, reward, term, trunc, info = env.step(action)
        out.append(json.dumps(_untimed([obs, reward, term, trunc, info]), sort_keys=True, default=str))
        if term or trunc:
            break
    return out


def test_trajectory_is_built_once_and_matches_the_turns():
    env = AgentFlowEnv([Task(id="q", question="Q?", answer="x")], lambda p, t: float(p == t.answer), [Echo()])
    env.reset(seed=0)
    env.step("Tool Name: Echo_Tool\nCommand: a")
    env.step("Tool Name: echo tool\nCommand: b")  # a loose spelling still finds the tool
    env.step("Tool Name: Nope\nCommand: c")
    first = list(env._trajectory)
    assert [t["tool"] for t in first] == ["Echo_Tool", "Echo_Tool", None]
    assert first[1]["parsed"]["command"] == "b" and first[2]["error"].startswith("unknown tool")
    assert env._trajectory[0] is first[0]  # built once
    *_, info = env.step("Final Answer: x")
    assert info["score"] == 1.0 and [t["turn"] for t in info["trajectory"]] == [1, 2, 3, 4]
    assert info["trajectory"][:3] == first


def test_two_envs_play_identical_episodes_and_infos_do_not_share_mutable_state():
    actions = ["Tool Name: Echo_Tool\nCommand: a", "junk", "Tool Name: Echo_Tool\nCommand:  a ", "Final Answer: x"]
    make = lambda: AgentFlowEnv(  # noqa: E731
        [Task(id="q", question="Q?", answer="x")], lambda p, t: float(p == t.answer), [Echo()], max_turns=5
    )
    a, b = make(), make()
    assert _episode(a, actions) == _episode(b, actions)
    a.reset(seed=0)
    *_, info1 = a.step(actions[0])
    *_, info2 = a.step(actions[2])
    assert info2["turn_signals"]["repeated_call"] and not info1["turn_signals"]["repeated_call"]
    assert len(info1["memory_steps"]) == 1 and len(info2["memory_steps"]) == 2
    info1["tool_names"].append("x")
    assert a._info()["tool_names"] == ["Echo_Tool"]


class Flaky(BaseTool):
    """Fails on "boom" (an exception) and reports an error on "err"."""

    name = "Flaky_Tool"
    description = "Sometimes fails."
    input_spec = "text"
    examples = ("ok",)

    def _run(self, command: str, timeout: float) -> ToolResult:
        if command == "boom":
            raise RuntimeError("boom")
        if command == "err":
            return ToolResult(text="Error: no", ok=False, error="no")
        return ToolResult(text=f"ran {command} " * 20)


class Odd(BaseTool):
    """Returns no result on "none" (``BaseTool.run`` then fails, outside ``_run``'s guard)."""

    name = "Odd_Tool"
    description = "Returns odd things."
    input_spec = "text"
    examples = ("ok",)

    def _run(self, command: str, timeout: float) -> ToolResult:
        return None if command == "none" else ToolResult(text=command)  # type: ignore[return-value]


class OwnRun(Echo):
    """A tool with its own ``run``: both paths must call it, not ``_run``."""

    name = "Own_Tool"

    def run(self, command: str, timeout: float = 30.0) -> ToolResult:
        return ToolResult(text=f"own {command}", seconds=0.0)


def _canonical(tool: str, command: str, sub_goal: str = "Do it.") -> str:
    return f"Justification: Why not.\nContext: none\nSub-Goal: {sub_goal}\nTool Name: {tool}\nCommand: {command}"


FAST_PATH_ACTIONS = [
    _canonical("Echo_Tool", "a"),
    _canonical("Echo_Tool", "a"),  # a repeated call
    _canonical("echo tool", "b") + "\n",  # a loose tool name, a trailing newline
    _canonical("Flaky_Tool", "boom"),
    _canonical("Flaky_Tool", "err"),
    _canonical("Odd_Tool", "none"),
    _canonical("Own_Tool", "g"),
    _canonical("Nope_Tool", "c"),  # an unknown tool: the general path
    _canonical("Echo_Tool", "<b>"),  # "<": the general path
    _canonical("Echo_Tool", "d", sub_goal="x" * 700),
    "Tool Name: Echo_Tool\nCommand: e",  # not canonical: the general path
    "junk",
    _canonical("Echo_Tool", "f" * 300),
    "Final Answer: x",
]


def test_the_fast_reader_reads_as_the_tolerant_reader():
    """Every action ``step`` reads the fast way gives ``_read``'s very reading; a canonical action that holds a
    "{", "<" or NUL (which JSON, a tool-call block, an answer tag or the NUL filter may claim) is not read fast."""
    from agentflow_env.turn.parsing import _CANONICAL_PLAIN_RE, _CANONICAL_RE

    env = AgentFlowEnv([Task(id="q", question="Q?", answer="x")], lambda p, t: 0.0, [Echo()], max_action_chars=1000)
    env.reset(seed=0)
    canonical = [a for a in [*FAST_PATH_ACTIONS, *READER_ACTIONS] if isinstance(a, str) and _CANONICAL_RE.fullmatch(a)]
    fast = [a for a in canonical if _CANONICAL_PLAIN_RE.fullmatch(a)]
    assert len(fast) >= 8 and len(canonical) - len(fast) == 4
    assert all(any(c in a for c in "{<\x00") for a in canonical if a not in fast)
    for action in fast:
        kept, call, parsed, rejected = env._read(action)
        if len(action) > env.max_action_chars:
            assert rejected and kept != action  # step's length check sends it to _read
            continue
        assert (kept, call, rejected) == (action, None, None)
        groups = _CANONICAL_RE.fullmatch(action).groups()  # type: ignore[union-attr]
        assert (parsed.justification, parsed.context, parsed.sub_goal, parsed.tool_name, parsed.command) == groups
        assert (parsed.final_answer, parsed.format, parsed.problems) == (None, "text", [])


READER_ACTIONS = [
    _canonical("Echo_Tool", "x" * 1100),  # over max_action_chars=1000: rejected by both
    _canonical("Echo_Tool", '{"a": 1}'),  # "{": a JSON object may win
    _canonical("Echo_Tool", "a\x00b"),
    _canonical("Echo_Tool", "<answer>7</answer>"),  # an answer tag in a tool action is a final answer
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Echo_Tool", "arguments": '{"command": "a"}'}}
        ],
    },
    '<tool_call>{"name": "Echo_Tool", "arguments": {"command": "h"}}</tool_call>',
    _canonical("Echo_Tool", "after a native call"),  # in tool mode: the tolerant reader
]


def test_the_canonical_tool_turn_plays_as_the_general_path():
    """With the fast reader and without it, any mix of action formats plays byte for byte the same episode."""
    for kwargs in (
        {},
        {"memory_budget": 400},
        {"max_turns": 3},
        {"turn_rewards": {"repeated_call": -0.1, "tool_error": -0.05}},
        {"render_mode": "ansi"},
        {"max_action_chars": 1000},
    ):
        runs = []
        for fast in (True, False):
            env = AgentFlowEnv(
                [Task(id=f"q{i}", question=f"Q{i}?", answer="x") for i in range(5)],
                lambda p, t: float(p == t.answer),
                [Echo(), Flaky(), Odd(), OwnRun()],
                **{"max_turns": 22, **kwargs},
            )
            env._fast_reads = fast
            out = []
            for seed in range(4):
                actions = [*FAST_PATH_ACTIONS[:-1], *READER_ACTIONS]
                random.Random(seed).shuffle(actions)
                out.append(json.dumps(env.reset(seed=seed), default=str))  # key order counts too
                for action in [*actions, FAST_PATH_ACTIONS[-1]]:
                    step = env.step(action)
                    out.append(json.dumps(_untimed(list(step)), default=str))
                    if step[2] or step[3]:
                        break
                out.append(json.dumps(_untimed(env._trajectory)))
                out.append(json.dumps(_untimed([env.render(), env.memory.to_list()])))
            runs.append(out)
        assert runs[0] == runs[1]
    assert env._fast_reads is False  # the second run really read everything the tolerant way
