"""Tests of the SFT warm-start: demonstrations, response-only loss, a few steps learn, and the ``sft`` command.

All on the tiny offline LM with tiny budgets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentflow_env.error import ConfigError  # noqa: E402
from agents.policies.hf_policy import format_prompt  # noqa: E402
from agents.training.sft import (  # noqa: E402
    Demonstration,
    SFTConfig,
    make_demonstrations,
    sft_loss,
    tokenize_demonstrations,
    train_sft,
)

ENV_ID = "agentflow/Gen-GameOf24-v0"


@pytest.fixture(scope="module")
def lm_path():
    from agents.tiny_lm import tiny_lm_path

    torch.set_num_threads(1)
    return tiny_lm_path()


@pytest.fixture(scope="module")
def demos():
    return make_demonstrations(ENV_ID, 4, seed=0, num_envs=2)


def test_demonstrations_are_scripted_turns(demos):
    assert len(demos) == 8  # the scripted planner checks with the calculator, then answers
    assert all(isinstance(d, Demonstration) and "Question:" in d.prompt for d in demos)
    assert sum(d.action.startswith("Final Answer:") for d in demos) == 4
    assert any("Tool Name: Calculator_Tool" in d.action for d in demos)


def test_tokenized_like_the_planner_acts(lm_path, demos):
    from agents.tiny_lm import load_tiny_lm

    _, tokenizer = load_tiny_lm(lm_path)
    (prompt_ids, response_ids), *_ = tokenize_demonstrations(tokenizer, demos)
    assert prompt_ids == tokenizer(format_prompt(tokenizer, demos[0].prompt), add_special_tokens=False)["input_ids"]
    assert response_ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(response_ids, skip_special_tokens=True) == demos[0].action


def test_loss_counts_response_tokens_only(lm_path):
    from agents.tiny_lm import load_tiny_lm

    model, tokenizer = load_tiny_lm(lm_path)
    pad = tokenizer.pad_token_id
    a = sft_loss(model, [[5, 6, 7]], [[8, 9]], pad)
    # a longer row in the batch, and different prompt tokens, leave the short row's terms unchanged
    b = sft_loss(model, [[5, 6, 7], list(range(20, 60))], [[8, 9], [8, 9]], pad)
    c = sft_loss(model, [list(range(20, 60))], [[8, 9]], pad)
    assert torch.allclose(b, (a + c) / 2, atol=1e-5)


def test_a_few_steps_reduce_the_loss(lm_path, demos, tmp_path):
    losses = []
    config = SFTConfig(
        out=str(tmp_path / "sft"), base=str(lm_path), epochs=6, batch_size=8, lr=5e-3, warmup_steps=1, seed=0
    )
    result = train_sft(config, demos=demos, on_step=lambda step, loss: losses.append(loss))
    assert result.steps == 6 and losses == result.losses
    assert sum(losses[-2:]) / 2 < losses[0] - 0.3
    assert (tmp_path / "sft" / "config.json").is_file() and (tmp_path / "sft" / "sft_metrics.json").is_file()
    assert (tmp_path / "sft" / "demonstrations.jsonl").read_text().count("\n") == len(demos)


def test_bad_config_says_what_to_change():
    with pytest.raises(ConfigError, match="lr"):
        SFTConfig(lr=0)
    with pytest.raises(ConfigError, match="max_minutes"):
        SFTConfig(max_minutes=-1)


def test_sft_command_runs(lm_path, tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "agentflow_env.cli",
        "sft",
        "--env-id",
        ENV_ID,
        "--env-kwargs",
        '{"max_turns": 1}',
        "--output-dir",
        str(out),
        "--base",
        str(lm_path),
        "--episodes",
        "2",
        "--epochs",
        "1",
        "--max-steps",
        "2",
        "--batch-size",
        "1",
        "--threads",
        "1",
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["steps"] == 2 and summary["examples"] == 2 and summary["final_loss"] > 0  # 2 one-turn episodes
    assert (out / "model.safetensors").is_file()
    recorded = json.loads((out / "sft_metrics.json").read_text())["config"]
    assert recorded["env_kwargs"] == {"max_turns": 1} and recorded["torch_threads"] == 1


def test_demonstrations_follow_the_env_kwargs():
    one_turn = make_demonstrations(ENV_ID, 3, seed=0, num_envs=1, env_kwargs={"max_turns": 1})
    assert len(one_turn) == 3  # one turn per episode: the scripted planner must answer at once
    assert all(d.turn == 1 and d.action.startswith("Final Answer:") for d in one_turn)
    assert "last turn" in one_turn[0].prompt


def test_sft_command_rejects_a_bad_env_kwargs_value(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "agentflow_env.cli", "sft", "--env-kwargs", "[1, 2]", "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "JSON object" in proc.stderr


def test_one_model_learns_from_several_envs(lm_path, tmp_path):
    """Repeated --env-id mixes every env's demonstrations into one run, and evaluation covers each env."""
    out = tmp_path / "mixed"
    envs = ["agentflow/Gen-GameOf24-v1", "agentflow/Gen-Science-v1"]
    cmd = [sys.executable, "-m", "agentflow_env.cli", "sft", "--env-id", envs[0], "--env-id", envs[1]]
    cmd += [
        "--output-dir",
        str(out),
        "--base",
        str(lm_path),
        "--episodes",
        "2",
        "--max-steps",
        "1",
        "--batch-size",
        "2",
    ]
    cmd += ["--eval-episodes", "1", "--eval-max-tokens", "4", "--threads", "1", "--no-progress", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["steps"] == 1 and set(summary["eval_per_env"]) == set(envs)
    assert summary["eval_before"]["episodes"] == 2  # pooled: one test task of each env
    demos = [json.loads(line) for line in (out / "demonstrations.jsonl").read_text().splitlines()]
    assert summary["examples"] == len(demos) and len(demos) >= 8  # 2 check-then-answer episodes from each env
    assert {d["task_id"].split("-")[0] for d in demos} == {"gen24", "gensci"}  # both families' tasks
    assert json.loads((out / "sft_metrics.json").read_text())["config"]["env_id"] == envs


def test_several_envs_must_differ():
    assert SFTConfig(env_id=["agentflow/Gen-Math-v1"]).env_ids == ["agentflow/Gen-Math-v1"]
    with pytest.raises(ConfigError, match="more than once"):
        SFTConfig(env_id=["agentflow/Gen-Math-v1", "agentflow/Gen-Math-v1"])
    with pytest.raises(ConfigError, match="no env"):
        SFTConfig(env_id=[])


def test_sft_demo_policy_plays_the_demonstrations(lm_path, tmp_path):
    """--demo-policy SPEC: the retry planner's demonstrations hold a refuted check followed by another check."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "agentflow_env.cli", "sft", "--env-id", "agentflow/Gen-GameOf24-v1"]
    cmd += ["--env-kwargs", '{"max_turns": 3, "max_number": 20}', "--output-dir", str(out), "--base", str(lm_path)]
    cmd += ["--episodes", "12", "--max-steps", "1", "--batch-size", "2", "--threads", "1", "--json"]
    cmd += ["--demo-policy", "agents.policies.baselines:ScriptedGameOf24RetryPlanner"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    demos = [json.loads(line) for line in (out / "demonstrations.jsonl").read_text().splitlines()]
    third_turns = [d for d in demos if d["turn"] == 3]
    assert third_turns and all(d["action"].startswith("Final Answer:") for d in third_turns)
    assert all("Step 2: Calculator_Tool" in d["prompt"] for d in third_turns)  # two checks, then the answer
    metrics = json.loads((out / "sft_metrics.json").read_text())
    assert metrics["config"]["demo_policy"] == "agents.policies.baselines:ScriptedGameOf24RetryPlanner"
    # the learning proof samples 48 new tokens: every demonstrated action (and its EOS) must fit
    assert 20 < metrics["max_response_tokens"] <= 48
    bad = subprocess.run(
        [*cmd[:-1], "no_such_module:Planner", "--output-dir", str(tmp_path / "bad")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "no_such_module" in bad.stderr and "Traceback" not in bad.stderr


def test_a_killed_run_leaves_a_partial_model_and_resumes_to_the_same_weights(lm_path, demos, tmp_path):
    """Stopped after step 5 (a crash), the folder holds step 4's checkpoint and a partial model marked
    incomplete; the same config then resumes at step 4 and ends where an uninterrupted run ends."""

    def config(out):
        return SFTConfig(
            out=str(out), base=str(lm_path), epochs=4, batch_size=4, lr=5e-3, warmup_steps=1, checkpoint_every=2
        )

    whole = train_sft(config(tmp_path / "whole"), demos=demos)
    assert whole.steps == 8

    def crash(step, loss):
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_sft(config(tmp_path / "killed"), demos=demos, on_step=crash)
    partial = json.loads((tmp_path / "killed" / "sft_metrics.json").read_text())
    assert partial["complete"] is False and partial["steps"] == 4
    assert (tmp_path / "killed" / "model.safetensors").is_file()
    resumed = train_sft(config(tmp_path / "killed"), demos=demos)
    assert resumed.steps == 8 and resumed.losses == pytest.approx(whole.losses, abs=1e-6)
    assert json.loads((tmp_path / "killed" / "sft_metrics.json").read_text())["complete"] is True
    from safetensors.torch import load_file

    a, b = (load_file(tmp_path / name / "model.safetensors") for name in ("whole", "killed"))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_checkpoint_of_other_settings_is_not_resumed(lm_path, demos, tmp_path):
    base = SFTConfig(out=str(tmp_path / "run"), base=str(lm_path), epochs=1, batch_size=4, checkpoint_every=1)
    train_sft(base, demos=demos)
    with pytest.raises(ConfigError, match=r"lr differ.*--no-resume"):
        train_sft(SFTConfig(**{**base.__dict__, "lr": 1e-4}), demos=demos)
    fresh = train_sft(SFTConfig(**{**base.__dict__, "lr": 1e-4, "resume": False}), demos=demos)
    assert fresh.steps == 2


def test_training_defaults_name_a_current_id():
    """SFT and Flow-GRPO default to an env id the default eval protocol (offline-v2) runs."""
    from agents.training.config import FlowGRPOConfig
    from leaderboards.protocol import load_protocol

    current = {entry.env_id for entry in load_protocol("offline-v2").benchmarks}
    assert SFTConfig().env_id in current and FlowGRPOConfig().env_id in current
