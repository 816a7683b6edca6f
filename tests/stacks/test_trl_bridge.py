"""TRL's real ``GRPOTrainer`` trains the tiny LM on multi-turn ``agentflow/*`` episodes through
:class:`agents.integrations.trl.AgentFlowTRL` (CPU, a few steps)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from agents.integrations.trl import AgentFlowTRL  # noqa: E402
from agents.tiny_lm import load_tiny_lm, tiny_lm_path  # noqa: E402

ENV_ID = "agentflow/Gen-GameOf24-v1"


def action_length_reward(completions, **_):
    """A shaping reward that differs between rollouts of an untrained model (whose env reward is
    almost always 0), so group advantages are nonzero and the test can see parameters move."""
    return [(len(str(c)) % 7) / 6.0 for c in completions]


def _trainer(tmp_path, bridge, steps: int):
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = load_tiny_lm(tiny_lm_path())
    config = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=256,
        max_steps=steps,
        learning_rate=5e-3,
        beta=0.0,
        temperature=1.0,
        top_k=0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        dataloader_num_workers=0,
    )
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=bridge.dataset(),
        reward_funcs=[bridge.reward_func, action_length_reward],
        rollout_func=bridge.rollout_func,
    )


def test_grpo_trainer_trains_on_multi_turn_episodes(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    bridge = AgentFlowTRL(ENV_ID, env_kwargs={"max_turns": 3}, num_tasks=16, max_new_tokens=32)
    trainer = _trainer(tmp_path, bridge, steps=2)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k].detach()) for k in before), "no parameter moved"
    logged = [h for h in trainer.state.log_history if "rewards/agentflow_env_reward/mean" in h]
    assert len(logged) == 2
    assert all(0.0 <= h["rewards/agentflow_env_reward/mean"] <= 1.0 for h in logged)
    assert all(math.isfinite(h["loss"]) for h in logged)
    # the untrained tiny LM rarely answers on turn one: episodes really run several turns
    assert max(bridge.last_turns) >= 2
    bridge.close()


def test_rollout_rows_are_token_exact_and_masked():
    """One rollout call by hand: the env's reply tokens are masked out, the model's are kept with their
    log-probs, and every row's reward is what the env said for that episode."""
    from types import SimpleNamespace

    model, tokenizer = load_tiny_lm(tiny_lm_path())
    bridge = AgentFlowTRL(ENV_ID, env_kwargs={"max_turns": 2}, num_tasks=4, max_new_tokens=16)
    data = bridge.dataset()
    trainer = SimpleNamespace(
        processing_class=tokenizer,
        model=model,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        args=SimpleNamespace(max_completion_length=80, temperature=1.0, top_p=1.0),
    )
    torch.manual_seed(1)
    out = bridge.rollout_func([data[i]["prompt"] for i in range(4)], trainer)
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"):
        assert len(out[key]) == 4
    for ids, logps, mask in zip(out["completion_ids"], out["logprobs"], out["env_mask"]):
        assert len(ids) == len(logps) == len(mask) <= 80
        assert mask[0] == 1  # the first planner turn is trained
        assert all(lp == 0.0 for lp, m in zip(logps, mask) if m == 0)
        assert all(lp <= 0.0 for lp in logps)
    two_turns = [i for i, t in enumerate(bridge.last_turns) if t == 2]
    for i in two_turns:  # a reply was inserted between the turns: masked tokens exist
        assert 0 in out["env_mask"][i]
        text = tokenizer.decode([t for t, m in zip(out["completion_ids"][i], out["env_mask"][i]) if m == 0])
        assert "Step 1 result" in text
    assert set(out["env_reward"]) <= {0.0, 1.0}
    bridge.close()


def test_tool_calling_rollouts_are_the_envs_chat_token_for_token(monkeypatch):
    """tool_calling=True: the row's tokens are the env's own chat (system, question, the model's Hermes call,
    the tool result, the answer) as the chat template renders it with the env's tools; only the model's
    tokens are trained. The model is forced to call the calculator, then to answer."""
    from types import SimpleNamespace

    import agents.integrations.trl as bridge_module
    from agents.integrations.chat import ChatCodec

    model, tokenizer = load_tiny_lm(tiny_lm_path())
    replies = iter(['<tool_call>{"name": "Calculator_Tool", "arguments": {"command": "6*4"}}</tool_call>', "24"])

    def forced(model, tokenizer, contexts, args, max_new):
        ids = tokenizer(next(replies), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        return [(list(ids), [-0.5] * len(ids)) for _ in contexts]

    monkeypatch.setattr(bridge_module, "_generate", forced)
    bridge = AgentFlowTRL(ENV_ID, env_kwargs={"max_turns": 3}, num_tasks=2, tool_calling=True)
    data = bridge.dataset()
    assert data[0]["prompt"][0]["role"] == "system" and data[0]["prompt"][1]["role"] == "user"
    trainer = SimpleNamespace(
        processing_class=tokenizer,
        model=model,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        args=SimpleNamespace(max_completion_length=400, temperature=1.0, top_p=1.0),
    )
    out = bridge.rollout_func([data[0]["prompt"]], trainer)
    assert bridge.last_turns == [2]
    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    env_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
    assert "<tool_response>" in env_text and "24" in env_text  # the calculator's result, not trained
    model_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 1], skip_special_tokens=True)
    assert "<tool_call>" in model_text and model_text.endswith("24")
    # the whole row is the env's chat rendered with its tools (Hermes fallback: the tiny template knows none)
    env = bridge._env(0).unwrapped
    codec = ChatCodec(tokenizer, tools=env.tool_schemas)
    full = tokenizer.decode(out["prompt_ids"][0] + ids)
    assert '"Calculator_Tool"' in full and full.count("<|im_start|>assistant") == 2
    assert out["prompt_ids"][0] == codec.start_messages([dict(m) for m in data[0]["prompt"]])
    assert out["env_reward"][0] in (0.0, 1.0)
    bridge.close()


def test_grpo_trainer_takes_a_step_in_the_tool_calling_format(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    bridge = AgentFlowTRL(ENV_ID, env_kwargs={"max_turns": 3}, num_tasks=8, max_new_tokens=32, tool_calling=True)
    trainer = _trainer(tmp_path, bridge, steps=1)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k].detach()) for k in before), "no parameter moved"
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert logged and all(math.isfinite(h["loss"]) for h in logged)
    bridge.close()
