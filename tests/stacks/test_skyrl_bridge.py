"""Every ``agentflow/*`` id as a SkyRL-gym env, driven through SkyRL-gym's own API (make/init/step)."""

from __future__ import annotations

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")

import gymnasium as gym  # noqa: E402

from agentflow_env.registration import registered_ids  # noqa: E402
from agents.integrations.skyrl import build_skyrl_dataset, register_skyrl_envs  # noqa: E402
from agents.policies.scripted import scripted_planner_for  # noqa: E402

GENERATED = [i for i in registered_ids() if "/Gen-" in i]


def test_every_id_is_registered_in_skyrl_gym():
    ids = register_skyrl_envs()
    assert set(registered_ids()) <= set(skyrl_gym.envs.registration.registry)
    assert register_skyrl_envs() == ids  # idempotent


@pytest.mark.parametrize("env_id", GENERATED)
def test_scripted_episodes_through_skyrl_equal_the_gym_env(env_id):
    register_skyrl_envs([env_id])
    rows = build_skyrl_dataset(env_id, split="test", num_tasks=3)
    planner = scripted_planner_for(env_id)
    local = gym.make(env_id, split="test")
    for row in rows:
        env = skyrl_gym.make(env_id, env_config={}, extras={"task_id": row["task_id"], "split": "test"})
        messages, meta = env.init(row["prompt"])
        assert messages == row["prompt"] and meta["task_id"] == row["task_id"]
        obs, _ = local.reset(options={"task_id": row["task_id"]})
        assert obs["prompt"] == messages[0]["content"]
        done, rewards = False, []
        while not done:
            action = planner.act([obs])[0]
            out = env.step(action)
            obs, reward, terminated, truncated, _ = local.step(action)
            done = terminated or truncated
            assert out["done"] == done and out["reward"] == reward
            rewards.append(out["reward"])
            if not done:  # the next user message carries the newest memory step
                assert len(out["observations"]) == 1 and out["observations"][0]["role"] == "user"
                assert "Step " in out["observations"][0]["content"]
        assert rewards[-1] == 1.0 and all(r == 0.0 for r in rewards[:-1])
        assert env.get_metrics()["score"] == 1.0
        env.close()
    local.close()


def test_a_multi_turn_limit_from_env_config_ends_the_episode():
    env_id = "agentflow/Gen-GameOf24-v1"
    register_skyrl_envs([env_id])
    env = skyrl_gym.make(env_id, env_config={"max_turns": 2}, extras={"index": 0, "split": "test"})
    env.init()
    first = env.step("Tool Name: Calculator_Tool\nCommand: 1 + 1")
    assert not first["done"] and "Result" in first["observations"][0]["content"]
    second = env.step("Tool Name: Calculator_Tool\nCommand: 2 + 2")
    assert second["done"] and second["reward"] == 0.0 and second["metadata"]["truncated"]
    env.close()


@pytest.mark.parametrize("env_id", ["agentflow/Gen-GameOf24-v1", "agentflow/Gen-MultiHop-v1"])
def test_tool_calling_episodes_through_skyrl_score_as_the_text_format(env_id):
    from agents.policies.tool_calling import as_tool_call

    register_skyrl_envs([env_id])
    rows = build_skyrl_dataset(env_id, split="test", num_tasks=3, tool_calling=True)
    planner = scripted_planner_for(env_id)
    local = gym.make(env_id, split="test")
    for row in rows:
        env = skyrl_gym.make(
            env_id, env_config={"tool_calling": True}, extras={"task_id": row["task_id"], "split": "test"}
        )
        messages, meta = env.init(row["prompt"])
        assert messages == row["prompt"] and messages[0]["role"] == "system" and "<tools>" in messages[0]["content"]
        assert [t["function"]["name"] for t in meta["tools"]][-1] == "final_answer"
        obs, _ = local.reset(options={"task_id": row["task_id"]})
        done = False
        while not done:
            action = planner.act([obs])[0]
            out = env.step(as_tool_call(action, "hermes", final="content"))
            obs, reward, terminated, truncated, _ = local.step(action)
            done = terminated or truncated
            assert out["done"] == done and out["reward"] == reward
            if not done:  # the tool's result, Hermes style
                assert len(out["observations"]) == 1 and out["observations"][0]["role"] == "user"
                assert out["observations"][0]["content"].startswith("<tool_response>")
        assert out["reward"] == 1.0
        env.close()
    local.close()
