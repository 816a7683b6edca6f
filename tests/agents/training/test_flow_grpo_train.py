"""Flow-GRPO end to end on the tiny LM: a short run learns (finite loss, moved weights, logged reward),
a killed run resumes exactly, and ``agentflow-env train --config`` works as a subprocess.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agents.training.config import FlowGRPOConfig  # noqa: E402
from agents.training.flow_grpo import FlowGRPOLearner, train  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _config(tmp_path: Path, **changes) -> FlowGRPOConfig:
    base = dict(
        output_dir=str(tmp_path / "run"),
        steps=2,
        questions_per_step=2,
        group_size=3,
        max_new_tokens=6,
        env_kwargs={"max_turns": 2},
        eval_every=2,
        eval_tasks=2,
        checkpoint_every=1,
        progress=False,
        threads=1,
        minibatch_size=4,
        grad_accum_steps=2,
        learning_rate=1e-3,
        beta=0.05,
        reward_fn="tests.helpers:length_reward",
        tensorboard=False,
    )
    base.update(changes)
    return FlowGRPOConfig(**base)


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_short_run_learns_and_logs(tmp_path):
    cfg = _config(tmp_path, tensorboard=True)
    start = FlowGRPOLearner(cfg)
    before = {k: v.clone() for k, v in start.model.state_dict().items()}
    start.close()
    learner = train(cfg)
    after = learner.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "no parameter moved"
    records = _records(Path(cfg.output_dir))
    assert [r["step"] for r in records] == [1, 2]
    for r in records:
        assert math.isfinite(r["losses/loss"]) and math.isfinite(r["losses/kl"])
        assert 0.0 <= r["rollout/reward"] <= 1.0 and r["rollout/turns"] >= 1
        for key in (
            "rollout/success_rate",
            "rollout/tool_error_rate",
            "losses/clip_fraction",
            "losses/entropy",
            "perf/tokens_per_s",
        ):
            assert key in r
    assert "eval/Gen-GameOf24-v2/success" in records[-1]
    assert records[-1]["losses/kl"] > 0  # the policy moved away from its frozen reference
    run = Path(cfg.output_dir)
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert (run / "final" / "config.json").is_file()
    assert (run / "checkpoints" / "step-000002" / "state.pt").is_file()


def test_killed_run_resumes_exactly(tmp_path):
    straight = _config(tmp_path / "a", steps=4, eval_every=0, checkpoint_every=2, ppo_epochs=2)
    train(straight)
    split = _config(tmp_path / "b", steps=4, eval_every=0, checkpoint_every=2, ppo_epochs=2)
    train(split, stop_after=3)  # "killed" after step 3: step 3 is logged but only step 2 was saved
    assert [r["step"] for r in _records(Path(split.output_dir))] == [1, 2, 3]
    resumed = train(split)
    a = torch.load(Path(straight.output_dir) / "checkpoints" / "step-000004" / "state.pt", weights_only=False)
    b = torch.load(Path(split.output_dir) / "checkpoints" / "step-000004" / "state.pt", weights_only=False)
    assert resumed.step == 4
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k

    def strip(rows):
        return [{k: v for k, v in r.items() if not k.startswith(("perf/", "time/"))} for r in rows]

    assert strip(_records(Path(straight.output_dir))) == strip(_records(Path(split.output_dir)))


def test_cli_train_subprocess(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(
        f'output_dir = "{(tmp_path / "cli").as_posix()}"\nsteps = 1\nthreads = 1\nprogress = false\n'
        "eval_every = 0\ntensorboard = false\n[rollout]\nquestions_per_step = 2\ngroup_size = 2\n"
        "max_new_tokens = 4\n[env_kwargs]\nmax_turns = 1\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentflow_env.cli",
            "train",
            "--config",
            str(config),
            "--minibatch-size",
            "4",
            "--reward-fn",
            "tests.helpers:length_reward",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["step"] == 1
    assert "rollout/reward" in _records(tmp_path / "cli")[0]


def test_cli_rejects_bad_settings_with_a_clear_message(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "agentflow_env.cli", "train", "--scale-rewards", "group", "--eps-low", "1.5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "eps_low" in proc.stderr


def test_lora_with_disabled_adapter_reference(tmp_path):
    pytest.importorskip("peft")
    cfg = _config(
        tmp_path,
        steps=1,
        eval_every=0,
        lora=True,
        lora_r=4,
        reference="lora_disabled",
        lora_target_modules=["q_proj", "v_proj"],
    )
    learner = train(cfg)
    names = [n for n, p in learner.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    record = _records(Path(cfg.output_dir))[0]
    assert math.isfinite(record["losses/loss"])
    assert (Path(cfg.output_dir) / "final" / "config.json").is_file()  # merged into a plain model


def _tiny():
    from agents.tiny_lm import load_tiny_lm, tiny_lm_path

    return load_tiny_lm(tiny_lm_path())


def test_shared_prompt_forward_equals_one_row_per_sample():
    from agents.training.packing import TurnSample, _pack, _pack_shared, token_logprobs

    model, tok = _tiny()
    g = torch.Generator().manual_seed(0)

    def ids(n):
        return torch.randint(5, len(tok) - 1, (n,), generator=g).tolist()

    pa, pb = ids(30), ids(21)
    samples = [
        TurnSample(pa, ids(5), 0.0),
        TurnSample(pa, ids(9), 0.0),
        TurnSample(pb, ids(3), 0.0),
        TurnSample(pa, ids(1), 0.0),
        TurnSample(pb, ids(7), 0.0),
    ]
    results = []
    for pack in (_pack, _pack_shared):
        model.zero_grad()
        batch = pack(samples, tok.pad_token_id, "cpu")
        logp, entropy = token_logprobs(model, batch, 1.0, with_entropy=True)
        (logp * batch["mask"]).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        results.append((logp * batch["mask"], entropy * batch["mask"], grads))
    (la, ea, ga), (lb, eb, gb) = results
    assert torch.allclose(la, lb, atol=1e-5) and torch.allclose(ea, eb, atol=1e-4)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(ga, gb))


def test_sampler_backend_matches_transformers_generate_greedy():
    import gymnasium as gym

    import agentflow_env  # noqa: F401
    from agentflow_env.engines.base import SamplingParams
    from agents.training.backends import HFGenerateBackend, HFSamplerBackend

    model, tok = _tiny()
    env = gym.make("agentflow/Gen-GameOf24-v1", split="train", max_turns=1)
    obs = [env.reset(seed=i)[0] for i in range(3)]
    obs = [o for o in obs for _ in range(2)]
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    ours = HFSamplerBackend(model, tok, greedy).act_with_samples(obs)
    ref = HFGenerateBackend(model, tok, sampling=greedy).act_with_samples(obs)
    for a, b in zip(ours, ref):
        assert a.response_ids == b.response_ids and a.prompt_ids == b.prompt_ids and a.text == b.text
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    sampler = HFSamplerBackend(model, tok, SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12))
    torch.manual_seed(3)
    first = [s.response_ids for s in sampler.act_with_samples(obs)]
    torch.manual_seed(3)
    assert first == [s.response_ids for s in sampler.act_with_samples(obs)]  # seeded sampling repeats


def test_rft_trains_only_on_the_turns_of_successful_rollouts(tmp_path):
    cfg = _config(tmp_path, algorithm="rft", rft_threshold=0.75, steps=1, eval_every=0, minibatch_size=64)
    learner = FlowGRPOLearner(cfg)
    assert learner.reference is None  # no KL term, no reference copy
    seen = []
    collect = learner.collect

    def recording_collect(*args, **kwargs):
        seen.append(collect(*args, **kwargs))
        return seen[-1]

    learner.collect = recording_collect
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    metrics = learner.train_step()
    learner.close()
    ro = seen[0]
    kept = sum(len([t for t in turns if t.response_ids]) for r, turns in zip(ro.rewards, ro.turns) if r >= 0.75)
    assert metrics["rollout/trained_turns"] == kept
    moved = any(not torch.equal(before[k], v) for k, v in learner.model.state_dict().items())
    assert moved == (kept > 0)
    if kept:
        assert math.isfinite(metrics["losses/loss"]) and metrics["losses/loss"] > 0 and metrics["losses/kl"] == 0.0


def test_time_budget_stops_after_a_step_then_resumes(tmp_path):
    cfg = _config(tmp_path, steps=3, max_minutes=1e-6, eval_every=0, eval_on_start=True, checkpoint_every=0)
    learner = train(cfg)
    assert learner.step == 1  # the first step crosses the budget; the run stops after it
    run = Path(cfg.output_dir)
    records = _records(run)
    assert [r["step"] for r in records] == [0, 1]
    assert "eval/Gen-GameOf24-v2/success" in records[0] and records[1]["time/elapsed_s"] > 0
    assert (run / "final" / "config.json").is_file() and (run / "checkpoints" / "step-000001").is_dir()
    resumed = train(cfg.replace(max_minutes=0.0))
    assert resumed.step == 3
    assert [r["step"] for r in _records(run)] == [0, 1, 2, 3]


def test_sampled_evaluation_is_paired_and_leaves_training_random_numbers(tmp_path):
    """``eval_samples`` rollouts per task at ``eval_temperature``: every evaluation draws the same random numbers
    (two evaluations of one policy agree), the training's torch stream is untouched, and the Wilson interval
    brackets the rate."""
    from agentflow_env.error import ConfigError
    from leaderboards.stats import wilson_interval

    cfg = _config(tmp_path, eval_tasks=3, eval_samples=4, eval_temperature=1.0, reward_fn="")
    learner = FlowGRPOLearner(cfg)
    try:
        torch.manual_seed(123)
        state = torch.get_rng_state()
        first = learner.evaluate()
        assert torch.equal(torch.get_rng_state(), state)
        second = learner.evaluate()
        assert first == second
        assert first["eval/Gen-GameOf24-v2/episodes"] == 12.0
        rate = first["eval/Gen-GameOf24-v2/success"]
        low, high = first["eval/Gen-GameOf24-v2/success_ci95_low"], first["eval/Gen-GameOf24-v2/success_ci95_high"]
        assert (low, high) == pytest.approx(wilson_interval(round(rate * 12), 12))
        assert learner.evaluate(num_tasks=2)["eval/Gen-GameOf24-v2/episodes"] == 8.0
    finally:
        learner.close()
    with pytest.raises(ConfigError, match="eval_temperature"):
        cfg.replace(eval_temperature=0.0)  # 4 greedy rollouts of a task would all be the same


def test_a_fresh_run_keeps_the_old_log_aside(tmp_path, monkeypatch):
    import agents.training.flow_grpo as fg

    real = fg.time.strftime  # the time module is shared (logging formats with it): fake only the learner's call

    def same_second(fmt: str, *when: object) -> str:
        return real(fmt, *when) if when else "20260101-000000"  # as if all started in one second

    monkeypatch.setattr(fg.time, "strftime", same_second)
    cfg = _config(tmp_path, steps=1, eval_every=0, resume=False)
    for _ in range(3):  # the second and third runs each set the previous log aside, overwriting none
        train(cfg)
    run = Path(cfg.output_dir)
    assert [r["step"] for r in _records(run)] == [1]
    old = list(run.glob("metrics-before-*.jsonl"))
    assert len(old) == 2 and all(json.loads(f.read_text().splitlines()[0])["step"] == 1 for f in old)


def test_sigkilled_cli_run_resumes_to_the_same_weights(tmp_path):
    """A real ``kill -9`` in the middle of ``agentflow-env train``: rerunning the command resumes from the
    last checkpoint and ends bit-identical to an uninterrupted run (weights and logged metrics)."""
    import signal
    import time

    def command(out: Path) -> list[str]:
        config = tmp_path / f"{out.name}.toml"
        config.write_text(
            f'output_dir = "{out.as_posix()}"\nsteps = 40\nthreads = 1\nprogress = false\neval_every = 0\n'
            "tensorboard = false\ncheckpoint_every = 2\nkeep_checkpoints = 1\nminibatch_size = 4\n"
            'reward_fn = "tests.helpers:length_reward"\n[rollout]\nquestions_per_step = 2\n'
            "group_size = 2\nmax_new_tokens = 4\n[env_kwargs]\nmax_turns = 1\n",
            encoding="utf-8",
        )
        return [sys.executable, "-m", "agentflow_env.cli", "train", "--config", str(config)]

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = subprocess.run(command(straight), capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    proc = subprocess.Popen(command(killed), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not list((killed / "checkpoints").glob("step-*/state.pt")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # at its first checkpoint (step 2 of 40: a busy CI box still has slack)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (killed / "final").exists()

    again = subprocess.run(command(killed), capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    a = torch.load(straight / "checkpoints" / "step-000040" / "state.pt", weights_only=False)
    b = torch.load(killed / "checkpoints" / "step-000040" / "state.pt", weights_only=False)
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k

    def strip(rows):
        return [{k: v for k, v in r.items() if not k.startswith(("perf/", "time/"))} for r in rows]

    assert strip(_records(killed)) == strip(_records(straight))
    assert [r["step"] for r in _records(killed)] == list(range(1, 41))


def test_a_torn_last_log_line_is_dropped_on_resume(tmp_path):
    cfg = _config(tmp_path, steps=2, eval_every=0, checkpoint_every=1)
    train(cfg, stop_after=1)
    log = Path(cfg.output_dir) / "metrics.jsonl"
    with log.open("a", encoding="utf-8") as fh:
        fh.write('{"step": 2, "rollout/rew')  # the process died mid-write
    resumed = train(cfg)
    assert resumed.step == 2
    assert [r["step"] for r in _records(Path(cfg.output_dir))] == [1, 2]


def test_several_minibatches_and_epochs_exercise_the_ratio_and_clipping(tmp_path):
    # Off-policy parts for real: 2 PPO epochs over 3 minibatches per step with a large learning rate,
    # so later minibatches see a policy that has already moved: ratio != 1 and some tokens clipped.
    cfg = _config(
        tmp_path,
        steps=2,
        questions_per_step=2,
        group_size=4,
        ppo_epochs=2,
        minibatch_size=3,
        grad_accum_steps=1,
        learning_rate=5e-2,
        eps_low=0.05,
        eps_high=0.05,
        eval_every=0,
        checkpoint_every=0,
    )
    train(cfg)
    records = _records(Path(cfg.output_dir))
    assert any(r["losses/clip_fraction"] > 0 for r in records), records
    assert any(abs(r["losses/ratio"] - 1.0) > 1e-4 for r in records), records
