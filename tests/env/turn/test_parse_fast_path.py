"""The parser's fast path for canonical actions gives exactly what the tolerant parser gives, and so does the env."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.tools.base import BaseTool
from agentflow_env.turn import parsing
from agentflow_env.turn.parsing import parse_action, parse_tolerant
from agentflow_env.types import ToolResult

CANONICAL = "Justification: j\nContext: c\nSub-Goal: s\nTool Name: Echo_Tool\nCommand: {command}"
CORPUS = [
    CANONICAL.format(command="ping"),
    CANONICAL.format(command="ping") + "\n",
    CANONICAL.format(command="ping") + "\n\n",
    CANONICAL.format(command="2 + 3 * (4 - 1)"),
    CANONICAL.format(command="x < 3"),
    CANONICAL.format(command="see <answer>7</answer>"),
    CANONICAL.format(command="<ANSWER>7</answer> tail"),
    CANONICAL.format(command='{"tool_name": "Other"}'),
    CANONICAL.format(command="ping "),
    CANONICAL.format(command=" ping"),
    CANONICAL.format(command="_ping"),
    CANONICAL.format(command="`ping`"),
    CANONICAL.format(command="**ping**"),
    CANONICAL.format(command="ping*"),
    CANONICAL.format(command="ping_"),
    CANONICAL.format(command="a\rb"),
    CANONICAL.format(command="a\u2028b"),
    CANONICAL.format(command="ping\u00a0"),
    CANONICAL.format(command="pi\x00ng"),
    CANONICAL.format(command="Tool Name: Other"),
    CANONICAL.format(command="ping\nQuery: other"),
    CANONICAL.format(command="ping\nmore lines"),
    CANONICAL.format(command=""),
    CANONICAL.format(command="ping").replace("Context: c", "Context: "),
    CANONICAL.format(command="ping").replace("Context: c", "Context:c"),
    CANONICAL.format(command="ping").replace("Tool Name: Echo_Tool", "Tool Name: Unknown"),
    CANONICAL.format(command="ping").replace("Sub-Goal", "sub-goal"),
    CANONICAL.format(command="ping").replace("Sub-Goal: s", "Sub-Goal: Final Answer: 3"),
    "Final Answer: 42",
    "Final Answer: 42\n",
    "Final Answer:  42",
    "Final Answer: **42**",
    "Final Answer: {42}",
    "Final Answer: 42\nCommand: x",
    "Justification: j\nFinal Answer: 42",
    "Tool Name: Echo_Tool\nCommand: ping",
    "",
    "junk",
]

_piece = st.sampled_from([*"ab ;:_*`{}<>/\\\t\r\n\x00\u00a0\u2028", "answer", "Command:", "<answer>", "</answer>"])
_line = st.lists(_piece, max_size=8).map("".join)


def _fields(parsed: parsing.ParsedAction) -> dict:
    return parsed.to_dict()


@pytest.mark.parametrize("action", CORPUS)
def test_fast_path_equals_tolerant_parser(action):
    assert _fields(parse_action(action)) == _fields(parse_tolerant(action))


def test_fast_path_is_taken_for_the_canonical_action():
    assert parsing._parse_canonical(CANONICAL.format(command="ping")) is not None
    assert parsing._parse_canonical("Final Answer: 42") is not None
    assert parsing._parse_canonical(CANONICAL.format(command="ping ")) is None  # not clean: the tolerant path


@settings(max_examples=300, deadline=None)
@given(st.tuples(_line, _line, _line, _line, _line), st.booleans())
def test_fast_path_equals_tolerant_parser_fuzzed(values, final):
    if final:
        action = f"Final Answer: {values[0]}{values[1]}"
    else:
        j, c, s, t, m = values
        action = f"Justification: {j}\nContext: {c}\nSub-Goal: {s}\nTool Name: {t}\nCommand: {m}"
    assert _fields(parse_action(action)) == _fields(parse_tolerant(action))


class EchoTool(BaseTool):
    name = "Echo_Tool"
    description = "Echoes its input."
    input_spec = "text"
    examples = ("ping",)

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text=f"echo: {command}")


def _episode(actions: list[str]) -> list:
    env = AgentFlowEnv(
        [Task(id="q", question="What is 6 * 7?", answer="42")],
        lambda prediction, task: float(prediction == task.answer),
        [EchoTool()],
        max_turns=len(actions) + 1,
    )
    out = [env.reset(seed=3)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        info = dict(info)
        info.pop("trajectory", None)  # its "seconds" are timings; compared below without them
        out.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    trajectory = [{k: v for k, v in turn.items() if k != "seconds"} for turn in env._trajectory]
    out.append(json.dumps(trajectory, sort_keys=True))
    return out


def test_env_observations_and_infos_are_the_same_on_both_paths(monkeypatch):
    actions = [a for a in CORPUS if not a.startswith("Final")] + ["Final Answer: 42"]
    fast = _episode(actions)
    monkeypatch.setattr("agentflow_env.core.parse_action", parse_tolerant)
    assert _episode(actions) == fast
