"""Native tool calling: every offline family played through OpenAI tool calls and Hermes blocks scores exactly
as the text format, and the env's ``info`` carries the tool schemas and the episode as an OpenAI chat."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.turn.tool_calls import FINAL_ANSWER, hermes_tool_calls, read_tool_action, schemas_from_cards
from agents.policies.baselines import RandomPlanner
from agents.policies.scripted import scripted_planner_for
from agents.policies.tool_calling import ToolCalling

OFFLINE = ["Gen-GameOf24", "Gen-MultiHop", "Gen-Math", "Gen-Science", "Gen-Agentic"]
N = 8


def _episodes(env, policy, n: int, **options) -> list[tuple[float, list]]:
    out = []
    for i in range(n):
        obs, info = env.reset(options={"index": i, **options})
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy.act([obs])[0])
            done = terminated or truncated
        memory = [(s["tool"], s["command"], s["result"], s["ok"]) for s in info["memory_steps"]]
        out.append((float(reward), memory, info))
    return out


@pytest.mark.parametrize("name", OFFLINE)
def test_every_offline_family_scores_the_same_through_tool_calls(name):
    env = gym.make(f"agentflow/{name}-v1", split="test").unwrapped
    try:
        for make in (lambda: scripted_planner_for(f"agentflow/{name}-v1"), lambda: RandomPlanner(seed=3)):
            text = _episodes(env, make(), N)
            assert any(memory for _, memory, _ in text), "the episodes must run tools"
            for fmt, final in (
                ("openai", "call"),
                ("openai-json", "content"),
                ("hermes", "call"),
                ("hermes", "content"),
            ):
                # plain content is the final answer from the first turn in a tool-calling episode
                calls = _episodes(env, ToolCalling(make(), fmt, final), N, tool_calling=final == "content")
                assert [r for r, _, _ in calls] == [r for r, _, _ in text], (name, fmt, final)
                assert [m for _, m, _ in calls] == [m for _, m, _ in text], (name, fmt, final)
                for _, _, info in calls:  # the chat pairs every tool call with a tool reply
                    _check_chat(info["messages"])
    finally:
        env.close()


def _check_chat(messages: list[dict]) -> None:
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    pending: list[str] = []
    for m in messages[2:]:
        if m["role"] == "assistant":
            assert not pending, "every tool call is answered before the next assistant turn"
            pending = [c["id"] for c in m.get("tool_calls") or []]
        elif m["role"] == "tool":
            assert m["tool_call_id"] == pending.pop(0)
    assert not pending
    json.dumps(messages)  # plain JSON, ready for a chat template


def test_info_carries_shared_tool_schemas_and_the_chat():
    env = gym.make("agentflow/Gen-Math-v1", split="test").unwrapped
    try:
        obs, info = env.reset(options={"index": 0})
        tools = info["tools"]
        names = [t["function"]["name"] for t in tools]
        assert names == [*env.tool_names, FINAL_ANSWER]
        for t in tools:
            params = t["function"]["parameters"]
            assert t["type"] == "function" and params["type"] == "object" and params["required"]
        # the planner side can rebuild them from the observation's tool cards
        assert schemas_from_cards(obs["tools"]) == tools
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "Calculator_Tool", "arguments": '{"command": "6*7"}'},
        }
        obs, _, _, _, info2 = env.step(
            {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "c2"}]}
        )
        assert info2["tools"] is tools  # one object per env
        assert info2["memory_steps"][-1]["command"] == "6*7" and "42" in info2["memory_steps"][-1]["result"]
        assert [m["role"] for m in info2["messages"]] == ["system", "user", "assistant", "tool", "tool"]
        assert "42" in info2["messages"][3]["content"] and "Not run" in info2["messages"][4]["content"]
        assert len(info["messages"]) == 2  # earlier infos are not mutated
        _, reward, terminated, _, info3 = env.step(
            '<tool_call>{"name": "final_answer", "arguments": {"answer": "x"}}</tool_call>'
        )
        assert terminated and info3["answer"] == "x"
    finally:
        env.close()


def test_the_issue_examples_are_valid_actions():
    env = gym.make("agentflow/Gen-Math-v1", split="test").unwrapped
    try:
        env.reset(options={"index": 0})
        action = (  # verbatim from the issue
            '{"tool_calls":[{"type":"function","function":{"name":"Calculator_Tool",'
            '"arguments":"{\\"command\\": \\"6*7\\"}"}}]}'
        )
        _, _, _, _, info = env.step(action)
        assert info["turn_signals"]["invalid_action"] is False and "42" in info["memory_steps"][-1]["result"]
        _, _, _, _, info = env.step(
            'I will compute.\n<tool_call>\n{"name": "Calculator_Tool", "arguments": {"command": "2+3"}}\n</tool_call>'
        )
        assert "5" in info["memory_steps"][-1]["result"]
        # plain content in a tool-calling episode is the final answer
        _, _, terminated, _, info = env.step("42")
        assert terminated and info["answer"] == "42"
    finally:
        env.close()


@pytest.mark.parametrize(
    "action, problem",
    [
        ({"role": "assistant", "tool_calls": "nope"}, "must be a list"),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "Calculator_Tool", "arguments": "{oops"}}]},
            "not a JSON object",
        ),
        ("<tool_call>not json</tool_call>", "not JSON"),
        ('<tool_call>{"name": "final_answer", "arguments": {}}</tool_call>', "without an 'answer'"),
        ({"role": "assistant", "content": None}, "neither tool calls nor content"),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "No_Such_Tool", "arguments": "{}"}}]},
            "unknown tool",
        ),
    ],
)
def test_malformed_tool_calls_cost_the_turn_and_say_why(action, problem):
    env = gym.make("agentflow/Gen-Math-v1", split="test").unwrapped
    try:
        env.reset(options={"index": 0})
        _, reward, terminated, _, info = env.step(action)
        assert not terminated and reward == 0.0
        assert info["turn_signals"]["invalid_action"] is True
        assert problem in info["memory_steps"][-1]["error"]
        assert info["messages"][-1]["role"] in ("tool", "user")  # the chat says why
    finally:
        env.close()


def test_an_overlong_tool_call_is_rejected_by_the_action_limit():
    env = gym.make("agentflow/Gen-Math-v1", split="test", max_action_chars=1000).unwrapped
    try:
        env.reset(options={"index": 0})
        big = {
            "role": "assistant",
            "tool_calls": [
                {"function": {"name": "Calculator_Tool", "arguments": json.dumps({"command": "1+" * 600 + "1"})}}
            ],
        }
        _, _, _, _, info = env.step(big)
        assert "max_action_chars" in info["action_rejected"]
    finally:
        env.close()


def test_hermes_reader_is_linear_and_tolerates_an_unclosed_block():
    calls, content, problems = hermes_tool_calls('x <tool_call>{"name": "a", "arguments": {"command": "1"}}')
    assert calls == [("a", {"command": "1"})] and content == "x" and not problems
    text = "<tool_call>" * 20000
    calls, _, problems = hermes_tool_calls(text)
    assert not calls and problems
    assert read_tool_action("Tool Name: Calculator_Tool\nCommand: 1+1", 1, False, lambda _: None) is None
