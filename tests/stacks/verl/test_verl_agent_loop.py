"""The verl agent loop, run by verl 0.9's own ``AgentLoopBase`` machinery against a stand-in async
server that answers from the tiny LM. Its samples must equal the same episodes run through
``collect_group_rollouts`` (token ids, masks, rewards, one sample per planner turn).

verl pins transformers < 5.11, so this runs in its own environment: ``tox -e verl`` (CI's verl stage).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from agentflow_env.engines.base import SamplingParams  # noqa: E402
from agents.integrations.verl_agent_loop import AGENT_NAME, AgentFlowAgentLoop  # noqa: E402
from agents.integrations.verl_data import verl_rows  # noqa: E402
from agents.policies.hf_policy import HFPlanner, _Encoded  # noqa: E402
from agents.tiny_lm import load_tiny_lm, tiny_lm_path  # noqa: E402
from agents.training.rollout import collect_group_rollouts  # noqa: E402

ENV_ID = "agentflow/Gen-GameOf24-v1"
MAX_TOKENS = 48


class TinyLMServer:
    """Stand-in for verl's async LLM server: token ids in, greedy token ids and log-probs out."""

    def __init__(self, planner: HFPlanner):
        self.planner = planner
        self.requests: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.requests.append({"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params)})
        sample = self.planner._generate([_Encoded(list(prompt_ids), False)], with_logprobs=True)[0]
        return TokenOutput(token_ids=sample.response_ids, log_probs=sample.logprobs, stop_reason="completed")


def _config():
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": MAX_TOKENS,
                    "multi_turn": {"max_assistant_turns": None},
                    "agent": {},
                }
            },
            "data": {"apply_chat_template_kwargs": {}, "mm_processor_kwargs": {}},
        }
    )


def _loop(server, tokenizer):
    config = _config()
    return AgentFlowAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )


@pytest.fixture(scope="module")
def planner():
    model, tokenizer = load_tiny_lm(tiny_lm_path())
    return HFPlanner(model, tokenizer, sampling=SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS))


def test_registered_under_its_name():
    assert _agent_loop_registry[AGENT_NAME]["_target_"].endswith("verl_agent_loop.AgentFlowAgentLoop")


def test_one_sample_per_planner_turn_equals_collect_group_rollouts(planner):
    rows = verl_rows(ENV_ID, split="test", num_tasks=4, env_kwargs={"max_turns": 3})
    server = TinyLMServer(planner)
    loop = _loop(server, planner.tokenizer)

    async def play_all():
        return [await loop.run({"temperature": 0.0, "top_p": 1.0}, **row) for row in rows]

    outputs = asyncio.run(play_all())

    import gymnasium as gym

    task_ids = [row["extra_info"]["task_id"] for row in rows]
    groups = collect_group_rollouts(
        [lambda: gym.make(ENV_ID, split="test", max_turns=3)], planner, task_ids, group_size=1, env_id=ENV_ID
    )
    for per_turn, (trajectory,) in zip(outputs, groups):
        assert isinstance(per_turn, list) and len(per_turn) == len(trajectory.turns) >= 1
        for sample, turn in zip(per_turn, trajectory.turns):
            assert sample.prompt_ids == turn.prompt_ids
            assert sample.response_ids == turn.response_ids
            assert sample.response_mask == [1] * len(turn.response_ids)
            assert sample.response_logprobs == pytest.approx(turn.logprobs, abs=1e-5)
            assert sample.reward_score == trajectory.reward  # the outcome, on every turn
    assert any(len(p) > 1 for p in outputs), "the untrained tiny LM should need several turns somewhere"
    # every request carried verl's sampling params and a token budget
    assert all(r["sampling_params"]["max_tokens"] == MAX_TOKENS for r in server.requests)


def test_trajectory_mode_is_one_masked_sequence(planner):
    (row,) = verl_rows(ENV_ID, split="test", num_tasks=1, env_kwargs={"max_turns": 2}, emit="trajectory")
    server = TinyLMServer(planner)
    loop = _loop(server, planner.tokenizer)
    out = asyncio.run(loop.run({"temperature": 0.0}, **row))
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs) <= MAX_TOKENS
    turns = out.extra_fields["planner_turns"]
    assert 1 <= turns <= 2 and out.reward_score in (0.0, 1.0)
    # the model's tokens are exactly what the server returned, env replies are masked between them
    first = server.requests[0]["prompt_ids"]
    assert first == out.prompt_ids
    if turns == 2:
        assert 0 in out.response_mask
        reply = planner.tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 0])
        assert "Step 1 result" in reply
        # the second request's context is the prompt plus everything so far, token for token
        second = server.requests[1]["prompt_ids"]
        k = out.response_mask.index(0)
        masked_end = k + out.response_mask[k:].index(1) if 1 in out.response_mask[k:] else len(out.response_mask)
        assert second == out.prompt_ids + out.response_ids[:masked_end]


def test_rows_carry_no_gold_answer():
    rows = verl_rows(ENV_ID, split="test", num_tasks=3)
    for row in rows:
        assert row["reward_model"]["ground_truth"] == ""
        assert row["agent_name"] == AGENT_NAME and row["extra_info"]["env_id"] == ENV_ID


def test_shipped_config_composes_with_the_paper_hyperparameters_and_reads_our_parquet(tmp_path):
    """The shipped Hydra config extends verl's own ppo_trainer config, and verl's RLHFDataset reads
    the parquet written by verl_data with the fields the agent loop needs."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import agents.integrations as integrations
    from agents.integrations.verl_data import write_parquet

    path = write_parquet(verl_rows(ENV_ID, "train", 3), tmp_path / "train.parquet")
    config_dir = Path(integrations.__file__).parent / "verl_configs"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name="flow_grpo", overrides=[f"data.train_files={path}", f"data.val_files={path}"])
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    # the paper's 1/T_i per trajectory: our flow_grpo estimator (agents.integrations.verl_flow_grpo), registered in
    # verl's workers by the config's setup hook
    assert cfg.algorithm.adv_estimator == "flow_grpo" and cfg.trainer.use_v1
    assert (actor.optim.lr, actor.clip_ratio_low, actor.clip_ratio_high, actor.kl_loss_coef) == (1e-6, 0.2, 0.3, 0.001)
    assert (cfg.data.train_batch_size, rollout.n, rollout.temperature, rollout.val_kwargs.temperature) == (
        32,
        8,
        0.7,
        0,
    )
    assert rollout.multi_turn.max_assistant_turns == 3 and rollout.agent.default_agent_loop == AGENT_NAME
    loops = OmegaConf.load(config_dir / "agent_loops.yaml")
    assert loops[0].name == AGENT_NAME and loops[0]._target_.endswith("AgentFlowAgentLoop")

    _, tokenizer = load_tiny_lm(tiny_lm_path())
    item = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=cfg.data)[0]
    assert item["agent_name"] == AGENT_NAME
    assert item["extra_info"]["env_id"] == ENV_ID and item["raw_prompt"][0]["role"] == "user"


class ForcedServer:
    """Stand-in server that answers with fixed texts: a Hermes calculator call, then the answer."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies, self.requests = tokenizer, list(replies), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.requests.append(list(prompt_ids))
        ids = self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def test_tool_calling_trajectory_is_the_envs_chat(planner):
    """extra_info tool_calling: the env's own chat rendered with its tool schemas, as verl's ToolAgentLoop does;
    the model's Hermes call is trained, the tool result masked, and the next request continues token for token."""
    (row,) = verl_rows(
        ENV_ID, split="test", num_tasks=1, env_kwargs={"max_turns": 3}, emit="trajectory", tool_calling=True
    )
    call = '<tool_call>{"name": "Calculator_Tool", "arguments": {"command": "6*4"}}</tool_call>'
    server = ForcedServer(planner.tokenizer, [call, "24"])
    loop = _loop(server, planner.tokenizer)
    loop.response_length = 400
    out = asyncio.run(loop.run({"temperature": 0.0}, **row))
    assert out.extra_fields["planner_turns"] == 2
    reply = planner.tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 0])
    assert "<tool_response>" in reply and "24" in reply
    assert '"Calculator_Tool"' in planner.tokenizer.decode(out.prompt_ids)  # the tools are in the prompt
    k = out.response_mask.index(0)
    end = k + out.response_mask[k:].index(1)
    assert server.requests[1] == out.prompt_ids + out.response_ids[:end]
