"""Tool calling as a first-class setting: ``agentflow-env eval --tool-calling`` (scripted and the tiny LM) and a
``train`` config with ``tool_calling = true`` run end to end, and the tools reach the model through its own chat
template (``tools=``) or, for a template without a tools section, the Hermes fallback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentflow_env.cli import main
from tests.agents.integrations.chat_families import FAMILIES, build_tokenizer, make_env

PROTOCOL = """name = "tools-tiny"
description = "two Game of 24 tasks"
mode = "offline"
max_turns = 2
seeds = [0]
samples_per_task = 1
fast_tasks = 2
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[sampling]
temperature = 0.0
max_tokens = 12
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v2"
label = "Gen-GameOf24"
category = "math"
split = "test"
num_tasks = 2
scorer = "default"
options = { seed = 0 }
"""


def test_eval_help_shows_the_option(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "--tool-calling" in capsys.readouterr().out


def _eval(tmp_path: Path, capsys, *flags: str) -> dict:
    protocol = tmp_path / "tools-tiny.toml"
    protocol.write_text(PROTOCOL, encoding="utf-8")
    argv = ["eval", "--protocol", str(protocol), "--output-dir", str(tmp_path / "out"), "--no-progress", "--json"]
    assert main([*argv, *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_eval_tool_calling_scripted_scores_as_the_text_format(tmp_path, capsys):
    text = _eval(tmp_path, capsys, "--policy", "scripted")
    tools = _eval(tmp_path, capsys, "--policy", "scripted", "--tool-calling")
    assert tools["run"].endswith("scripted-tools") and not text["run"].endswith("-tools")
    assert tools["overall"] == text["overall"] == 1.0
    episodes = Path(tools["run"]) / "trajectories.jsonl"
    actions = [t["action"] for line in episodes.read_text().splitlines() for t in json.loads(line)["trajectory"]]
    assert actions and any("<tool_call>" in a for a in actions)


def test_eval_tool_calling_runs_the_tiny_lm(tmp_path, capsys):
    pytest.importorskip("torch")
    summary = _eval(tmp_path, capsys, "--policy", "hf:tiny", "--tool-calling")
    assert summary["run"].endswith("-tools") and 0.0 <= summary["overall"] <= 1.0


def test_the_planners_prompt_renders_the_tools_with_the_models_own_template():
    pytest.importorskip("transformers")
    from agents.policies.hf_policy import HFPlanner

    env = make_env()
    obs, _ = env.reset(options={"index": 0})
    env.close()
    native = HFPlanner(SimpleNamespace(), build_tokenizer(FAMILIES["chatml-hermes"]), tool_calling=True)
    text = native.tokenizer.decode(native.encode_prompt(obs)[0])
    assert "# Tools" in text and '"name": "Calculator_Tool"' in text and text.endswith("<|im_start|>assistant\n")
    assert obs["question"] in text and "Tool Name:" not in text  # the tool-calling chat, not the text format
    fallback = HFPlanner(SimpleNamespace(), build_tokenizer(FAMILIES["tiny-lm"]), tool_calling=True)
    text = fallback.tokenizer.decode(fallback.encode_prompt(obs)[0])
    assert "# Tools" not in text and "<tools>" in text and '"name": "Calculator_Tool"' in text


def test_a_train_config_with_tool_calling_runs_on_the_tiny_lm(tmp_path):
    torch = pytest.importorskip("torch")
    from agents.training.config import load_config
    from agents.training.flow_grpo import FlowGRPOLearner, train

    path = tmp_path / "tools.toml"
    path.write_text(
        f'output_dir = "{(tmp_path / "run").as_posix()}"\nsteps = 2\nthreads = 1\nprogress = false\n'
        "eval_every = 0\ntensorboard = false\ncheckpoint_every = 0\nlearning_rate = 1e-3\nminibatch_size = 4\n"
        'env_id = "agentflow/Gen-GameOf24-v2"\ntool_calling = true\nreward_fn = "tests.helpers:length_reward"\n'
        "[rollout]\nquestions_per_step = 2\ngroup_size = 2\nmax_new_tokens = 8\n[env_kwargs]\nmax_turns = 2\n",
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.tool_calling
    start = FlowGRPOLearner(config)
    assert start.backend._encoder.tool_calling
    rollouts = start.collect("train", [0], group_size=1, seed=0)
    prompt = start.tokenizer.decode(rollouts.turns[0][0].prompt_ids)
    assert "<tools>" in prompt and '"name": "final_answer"' in prompt  # the tool-calling chat, tools rendered
    before = {k: v.clone() for k, v in start.model.state_dict().items()}
    start.close()
    learner = train(config)
    assert any(not torch.equal(before[k], v) for k, v in learner.model.state_dict().items())
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and all(math.isfinite(r["losses/loss"]) for r in records)


def test_sft_with_tool_calling_trains_hermes_calls_after_the_tool_calling_prompt(tmp_path):
    pytest.importorskip("torch")
    from agents.training.sft import SFTConfig, train_sft
    from agents.training.sft_tools import tokenize_tool_demonstrations

    config = SFTConfig(
        env_id="agentflow/Gen-GameOf24-v2",
        env_kwargs={"max_turns": 3},
        out=str(tmp_path / "sft"),
        episodes=4,
        epochs=1,
        batch_size=2,
        max_steps=2,
        eval_episodes=2,
        eval_max_tokens=8,
        eval_num_envs=2,
        tool_calling=True,
        torch_threads=1,
        checkpoint_every=0,
    )
    result = train_sft(config)
    demos = [json.loads(line) for line in (tmp_path / "sft" / "demonstrations.jsonl").read_text().splitlines()]
    assert any("<tool_call>" in d["action"] for d in demos) and all(d["observation"] for d in demos)
    assert result.steps == 2 and result.eval_after is not None and 0 <= result.eval_after["well_formed_rate"] <= 1
    from agents.tiny_lm import load_tiny_lm

    _, tokenizer = load_tiny_lm(tmp_path / "sft")
    demo = SimpleNamespace(observation=demos[0]["observation"], action=demos[0]["action"])
    ((prompt_ids, response_ids),) = tokenize_tool_demonstrations(tokenizer, [demo])
    assert "<tools>" in tokenizer.decode(prompt_ids) and tokenizer.decode(prompt_ids).endswith(
        "<|im_start|>assistant\n"
    )
    assert tokenizer.decode(response_ids) == demos[0]["action"] + "<|im_end|>"
