"""Per-turn signals in ``info["turn_signals"]`` and the opt-in ``turn_rewards=`` penalties.

The default stays outcome-only (0 until the last step); with a spec, penalties are <= 0, capped per
episode, so no action sequence returns more than its score or less than ``score - max_total``.
"""

from __future__ import annotations

import math
import time

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env import AgentFlowEnv, Task
from agentflow_env.error import ConfigError
from agentflow_env.tools.base import BaseTool
from agentflow_env.tools.calculator.tool import CalculatorTool
from agentflow_env.turn.turn_rewards import TurnRewardSpec
from agentflow_env.types import ToolResult
from agents.policies.baselines import final_answer, tool_call


class EchoTool(BaseTool):
    name = "Echo_Tool"
    description = "Returns its input; 'boom' makes it fail."
    input_spec = "any text"
    examples = ("hello",)

    def _run(self, command, timeout):
        if "boom" in command:
            raise RuntimeError("boom")
        return ToolResult(text=command)


TASKS = [Task(id=f"t{i}", question=f"What is {i}+{i}?", answer=str(2 * i), family="math") for i in range(3)]
SPEC = {"invalid_action": -0.1, "tool_error": -0.05, "repeated_call": -0.02}


def exact_scorer(prediction, task):
    return float(prediction.strip() == str(task.answer))


def make(**kw):
    return AgentFlowEnv(TASKS, exact_scorer, [EchoTool(), CalculatorTool()], max_turns=kw.pop("max_turns", 8), **kw)


def play(env, actions):
    env.reset(options={"task_id": "t1"})
    rewards, signals = [], []
    for action in actions:
        _, r, term, trunc, info = env.step(action)
        rewards.append(r)
        signals.append(info["turn_signals"])
        if term or trunc:
            return rewards, signals, info
    raise AssertionError("the episode did not end")


EPISODE = [
    "this is not an action",  # invalid: no fields
    tool_call("No_Such_Tool", "x"),  # invalid: unknown tool
    tool_call("Echo_Tool", "boom"),  # tool error
    tool_call("Echo_Tool", "hello   world"),  # fine
    tool_call("Echo_Tool", " hello world "),  # the same call again (whitespace aside)
    final_answer("2"),
]


def test_default_is_outcome_only_and_signals_say_what_happened():
    rewards, signals, info = play(make(), EPISODE)
    assert rewards == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    flags = [(s["invalid_action"], s["tool_error"], s["repeated_call"]) for s in signals]
    assert flags == [
        (True, False, False),
        (True, False, False),
        (False, True, False),
        (False, False, False),
        (False, False, True),
        (False, False, False),
    ]
    assert [s["verifier"] for s in signals] == ["CONTINUE"] * 5 + [None]  # the rule verifier ran on tool turns
    assert info["score"] == 1.0


def test_penalties_are_added_to_the_step_reward():
    rewards, _, info = play(make(turn_rewards=SPEC), EPISODE)
    assert rewards == pytest.approx([-0.1, -0.1, -0.05, 0.0, -0.02, 1.0])
    assert sum(rewards) == pytest.approx(info["score"] - 0.27)


def test_penalties_of_an_episode_are_capped():
    env = make(turn_rewards={"invalid_action": -0.3, "max_total": 0.5}, max_turns=4)
    rewards, _, info = play(env, ["junk"] * 4)
    assert rewards == pytest.approx([-0.3, -0.2, 0.0, 0.0])
    assert info["score"] == 0.0
    # the cap is per episode: a new episode pays again
    rewards, _, _ = play(env, ["junk", final_answer("2")])
    assert rewards == pytest.approx([-0.3, 1.0])


def test_a_turn_refused_for_time_is_not_an_invalid_action():
    env = make(turn_rewards=SPEC, time_budget_s=0.01)
    env.reset(options={"task_id": "t1"})
    time.sleep(0.05)
    _, reward, _, truncated, info = env.step(tool_call("Echo_Tool", "hello"))
    assert truncated and not info["turn_signals"]["invalid_action"]
    assert reward == 0.0


ACTIONS = st.one_of(
    st.text(max_size=30),
    st.sampled_from([tool_call("Echo_Tool", "a"), tool_call("Echo_Tool", "boom"), tool_call("Nope", "a")]),
    st.sampled_from([final_answer("2"), final_answer("3"), tool_call("Calculator_Tool", "1/0")]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(ACTIONS, min_size=6, max_size=6), spec=st.sampled_from([None, SPEC, {"tool_error": -1.0}]))
def test_no_action_sequence_returns_more_than_its_score(actions, spec):
    """The class of shaping exploits: the return is in [score - max_total, score] whatever the planner does."""
    env = make(turn_rewards=spec, max_turns=6)
    rewards, _, info = play(env, actions)
    cap = TurnRewardSpec.parse(spec).max_total if spec else 0.0
    assert info["score"] - cap - 1e-9 <= sum(rewards) <= info["score"] + 1e-12
    if spec is None:
        assert all(r == 0.0 for r in rewards[:-1])


@pytest.mark.parametrize(
    "spec, words",
    [
        ({"invalid": -0.1}, "unknown key"),
        ({"tool_error": math.nan}, "finite"),
        ({"tool_error": math.inf}, "finite"),
        ({"tool_error": "-0.1"}, "finite"),
        ({"tool_error": True}, "finite"),
        ({"repeated_call": 0.1}, "penalties only"),
        ({"invalid_action": -2.0}, "[-1, 0]"),
        ({"max_total": 1.0}, "(0, 1)"),
        ({"max_total": 0.0}, "(0, 1)"),
        ([("tool_error", -0.1)], "must be a dict"),
    ],
)
def test_bad_specs_are_refused_with_a_clear_error(spec, words):
    with pytest.raises(ConfigError, match=None) as err:
        make(turn_rewards=spec)
    assert words in str(err.value)


def test_gym_make_passes_the_spec_through():
    env = gym.make("agentflow/Gen-GameOf24-v1", split="train", num_tasks=4, turn_rewards={"invalid_action": -0.25})
    env.reset(seed=0)
    _, reward, _, _, info = env.step("gibberish")
    assert info["turn_signals"]["invalid_action"] and reward == -0.25
    env.close()
    with pytest.raises(ConfigError, match="unknown key"):
        gym.make("agentflow/Gen-GameOf24-v1", split="train", num_tasks=4, turn_rewards={"bonus": 1.0})
