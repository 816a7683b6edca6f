"""Tests of ``LLMPlanner``: chat input from ``obs["prompt"]``, one batched engine call per act, sampling
settings that really reach the engine (and change HF generation), and the tiny LM playing Gen-GameOf24."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.engines import SamplingParams, ScriptedEngine, make_engine
from agents.policies.llm_planner import LLMPlanner
from agents.policies.policy import Policy

OBS = [{"question": f"q{i}", "memory": "", "tools": "", "prompt": f"PROMPT {i}"} for i in range(3)]


def test_one_batched_call_with_chat_messages_and_exact_sampling() -> None:
    batches: list[int] = []

    class Counting(ScriptedEngine):
        def generate(self, prompts, sampling=None):
            batches.append(len(prompts))
            return super().generate(prompts, sampling)

    engine = Counting(lambda text: "Final Answer: " + text[-1])
    sampling = SamplingParams(temperature=0.9, top_p=0.8, max_tokens=77, stop=["\n\n"])
    planner = LLMPlanner(engine, sampling, system_prompt="Plan well.")
    assert isinstance(planner, Policy)
    assert planner.act(OBS) == ["Final Answer: 0", "Final Answer: 1", "Final Answer: 2"]
    assert batches == [3]
    for i, call in enumerate(engine.calls):
        assert call.prompt == [{"role": "system", "content": "Plan well."}, {"role": "user", "content": f"PROMPT {i}"}]
        assert call.sampling is sampling
    assert planner.act([]) == [] and batches == [3]


def test_vector_observations_and_seed_per_call() -> None:
    engine = ScriptedEngine(lambda text: "x")
    planner = LLMPlanner(engine, SamplingParams(temperature=1.0, seed=10))
    vector_obs = {k: np.array([o[k] for o in OBS], dtype=object) for k in OBS[0]}
    assert planner.act(vector_obs) == ["x", "x", "x"]
    planner.act(OBS[:1])
    assert [c.sampling.seed for c in engine.calls] == [10, 10, 10, 11]
    assert engine.calls[0].prompt == [{"role": "user", "content": "PROMPT 0"}]  # no system prompt by default
    assert planner.sampling.seed == 10


def test_engine_spec_string_and_long_prompts() -> None:
    planner = LLMPlanner("scripted:echo", SamplingParams(), max_prompt_chars=300)
    [reply] = planner.act([{"prompt": "A" * 1000 + "END"}])
    assert len(reply) <= 300 and reply.endswith("END") and "chars cut" in reply


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agents.tiny_lm import tiny_lm_path

    path = tiny_lm_path(tmp_path_factory.getbasetemp().parent / "agentflow-cache")
    return make_engine(f"hf:{path}?device=cpu&threads=1")


def test_sampling_settings_change_hf_generation(tiny_engine) -> None:
    env = gym.make("agentflow/Gen-GameOf24-v1")
    obs, _ = env.reset(seed=0)
    batch = [obs, obs, obs]

    def act(**kw) -> list[str]:
        return LLMPlanner(tiny_engine, SamplingParams(**kw)).act(batch)

    greedy = act(temperature=0.0, max_tokens=16)
    assert len(set(greedy)) == 1  # the same prompt three times: greedy gives one answer
    hot = act(temperature=1.5, max_tokens=16, seed=0)
    assert hot != greedy and len(set(hot)) > 1  # temperature reaches the model: rows differ
    assert act(temperature=1.5, top_p=1e-9, max_tokens=16, seed=0) == greedy  # top_p reaches it too
    tok = tiny_engine.tokenizer
    short = act(temperature=1.5, max_tokens=2, seed=0)
    assert all(len(s) < len(h) for s, h in zip(short, hot, strict=True))
    assert all(len(tok(s, add_special_tokens=False)["input_ids"]) <= 4 for s in short)
    env.close()


def test_tiny_lm_planner_plays_a_whole_episode(tiny_engine) -> None:
    env = gym.make("agentflow/Gen-GameOf24-v1", max_turns=3)
    planner = LLMPlanner(tiny_engine, SamplingParams(temperature=1.0, max_tokens=24, seed=0))
    obs, _ = env.reset(seed=1)
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(planner.act([obs])[0])
        if terminated or truncated:
            break
    assert terminated or truncated
    assert 0.0 <= reward <= 1.0 and "score" in info
    assert len(info["trajectory"]) == planner.calls
    assert all(isinstance(t["action"], str) for t in info["trajectory"])
    env.close()


def test_tiny_lm_behind_an_openai_compatible_server(tiny_engine) -> None:
    from agentflow_env.engines import EngineServer

    env = gym.make("agentflow/Gen-GameOf24-v1", max_turns=2)
    obs, _ = env.reset(seed=2)
    sampling = SamplingParams(temperature=0.0, max_tokens=8)
    with EngineServer(tiny_engine, model_name="tiny") as server:
        remote = LLMPlanner(f"openai:tiny@{server.url}?timeout=30", sampling)
        # the server applies the same chat template: greedy replies match the in-process engine's
        assert remote.act([obs, obs]) == LLMPlanner(tiny_engine, sampling).act([obs, obs])
        _, reward, terminated, truncated, info = env.step(remote.act([obs])[0])
        assert 0.0 <= reward <= 1.0
    env.close()


def _all_env_ids() -> list[str]:
    from agentflow_env.registration import registered_ids

    return registered_ids()


@pytest.fixture(scope="module")
def tiny_server(tiny_engine):
    from agentflow_env.engines import EngineServer

    with EngineServer(tiny_engine, model_name="tiny") as server:
        yield server.url


@pytest.mark.parametrize("env_id", _all_env_ids())
def test_tiny_lm_over_http_plays_every_env_id(env_id: str, tiny_server: str, request: pytest.FixtureRequest) -> None:
    kwargs = {} if "/Gen-" in env_id else {"data_dir": str(request.getfixturevalue("testsets_dir"))}
    env = gym.make(env_id, max_turns=2, **kwargs)
    planner = LLMPlanner(
        f"openai:tiny@{tiny_server}?timeout=60", SamplingParams(temperature=1.0, max_tokens=12, seed=0)
    )
    obs, _ = env.reset(seed=0, options={"index": 0})  # the first task is the cheapest to generate
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(planner.act([obs])[0])
        done = terminated or truncated
    assert 0.0 <= reward <= 1.0 and "score" in info and 1 <= len(info["trajectory"]) <= 2
    env.close()
