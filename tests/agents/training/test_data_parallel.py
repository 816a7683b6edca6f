"""Data-parallel Flow-GRPO on 2 CPU processes (gloo) under torchrun.

- One step on the same fixed rollouts: the all-reduced gradient of 2 ranks equals the single-process
  gradient (trajectory aggregation, unequal rollout lengths, an uneven split of questions), while
  normalising each rank's loss by its own turns (the usual mistake) would not.
- ``agentflow-env train`` under torchrun, killed with SIGKILL after its first checkpoint, resumes to
  the same weights and log as an uninterrupted 2-process run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if not torch.distributed.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

from agents.training.config import FlowGRPOConfig  # noqa: E402
from agents.training.data_parallel import (  # noqa: E402
    DataParallel,
    even_bounds,
    minibatch_count,
)
from agents.training.flow_grpo import FlowGRPOLearner  # noqa: E402
from tests.dp_worker import one_step, split_by_question  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
for _name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(_name, None)


def torchrun() -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "2"]


def test_shards_cover_every_item_once_and_minibatches_agree():
    for count in range(0, 9):
        for world in (1, 2, 3):
            bounds = [DataParallel(world_size=world, rank=r).shard(count) for r in range(world)]
            assert [i for a, b in bounds for i in range(a, b)] == list(range(count))
            assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1
    assert even_bounds(5, 3) == [(0, 2), (2, 4), (4, 5)]
    assert minibatch_count(n_global=10, n_most=6, size=4) == 3
    assert minibatch_count(n_global=2, n_most=1, size=1) == 1  # never a minibatch empty on every rank


def _config(tmp_path: Path, **changes) -> FlowGRPOConfig:
    base = dict(
        output_dir=str(tmp_path / "run"),
        steps=1,
        questions_per_step=3,  # 2 questions on rank 0, 1 on rank 1
        group_size=3,
        max_new_tokens=5,
        env_kwargs={"max_turns": 3, "num_tasks": 4},
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        threads=1,
        minibatch_size=64,  # one minibatch: the step is one gradient
        grad_accum_steps=2,
        max_grad_norm=0.0,  # compare raw gradients
        learning_rate=1e-3,
        beta=0.05,
        loss_aggregation="trajectory",
        tensorboard=False,
    )
    base.update(changes)
    return FlowGRPOConfig(**base)


def _bank(cfg: FlowGRPOConfig) -> list:
    """Real tiny-LM rollouts of every train question, then cut to unequal lengths (1, 2 or 3 turns)."""
    learner = FlowGRPOLearner(cfg.replace(reward_fn="tests.helpers:length_reward"))
    n = len(learner.tasks(cfg.train_split))
    rollouts = learner.collect(cfg.train_split, list(range(n)), cfg.group_size, seed=7)
    learner.close()
    for i, turns in enumerate(rollouts.turns):
        keep = 1 + i % 3
        del turns[keep:]
        del rollouts.turn_rewards[i][keep:]
    rollouts.num_turns = sum(len(t) for t in rollouts.turns)
    assert len(set(rollouts.rewards)) > 1, "the rewards must differ for the gradient to be nonzero"
    return split_by_question(rollouts, cfg.group_size)


def test_two_ranks_give_the_single_process_gradient(tmp_path):
    cfg = _config(tmp_path)
    bank = _bank(cfg)
    single = one_step(cfg, bank)

    (tmp_path / "config.json").write_text(json.dumps(cfg.replace(output_dir=str(tmp_path / "dp")).to_dict()))
    torch.save(bank, tmp_path / "bank.pt")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(
        [
            *torchrun(),
            str(ROOT / "tests" / "dp_worker.py"),
            str(tmp_path / "config.json"),
            str(tmp_path / "bank.pt"),
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]

    names = sorted(single["grads"])
    assert names and names == sorted(ranks[0]["grads"]) == sorted(ranks[1]["grads"])
    flat = torch.cat([single["grads"][n].flatten() for n in names])
    assert flat.abs().max() > 0
    for r in ranks:
        dp_flat = torch.cat([r["grads"][n].flatten() for n in names])
        assert torch.allclose(dp_flat, flat, rtol=1e-4, atol=1e-7), (dp_flat - flat).abs().max()
    for n in names:  # the ranks took the same optimizer step
        assert torch.equal(ranks[0]["params"][n], ranks[1]["params"][n]), n

    # what each rank normalising by its own turns would give (mean of the per-rank means) is far off:
    # the question split is uneven (rank 0 holds 6 rollouts, rank 1 holds 3), so the test can tell
    per_rank_weight = [6.0, 3.0]  # trajectory aggregation: every rollout weighs 1 in total
    naive = (
        sum(
            torch.cat([r["local_grads"].get(n, torch.zeros_like(single["grads"][n])).flatten() for n in names])
            * 9.0
            / w
            for r, w in zip(ranks, per_rank_weight)
        )
        / 2
    )
    assert (naive - flat).abs().max() > 100 * (
        torch.cat([ranks[0]["grads"][n].flatten() for n in names]) - flat
    ).abs().max()
    assert ranks[0]["metrics"]["rollout/trained_turns"] == single["metrics"]["rollout/trained_turns"]
    assert ranks[0]["metrics"]["rollout/reward"] == pytest.approx(single["metrics"]["rollout/reward"])
    assert ranks[0]["metrics"]["losses/loss"] == pytest.approx(single["metrics"]["losses/loss"], rel=1e-4, abs=1e-6)


def _train_command(tmp_path: Path, out: Path) -> list[str]:
    config = tmp_path / f"{out.name}.toml"
    config.write_text(
        f'output_dir = "{out.as_posix()}"\nsteps = 10\nthreads = 1\nprogress = false\neval_every = 5\neval_tasks = 3\n'
        "tensorboard = false\ncheckpoint_every = 2\nkeep_checkpoints = 1\nminibatch_size = 3\n"
        'reward_fn = "tests.helpers:length_reward"\n[rollout]\nquestions_per_step = 2\n'
        "group_size = 2\nmax_new_tokens = 4\n[env_kwargs]\nmax_turns = 1\n",
        encoding="utf-8",
    )
    return [*torchrun(), "-m", "agentflow_env.cli", "train", "--config", str(config)]


def _records(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if not k.startswith(("perf/", "time/"))} for r in rows]


def test_sigkilled_torchrun_resumes_to_the_same_weights(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = subprocess.run(
        _train_command(tmp_path, straight), capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["step"] for r in _records(straight)] == list(range(1, 11))
    assert "eval/Gen-GameOf24-v2/success" in _records(straight)[4]

    proc = subprocess.Popen(
        _train_command(tmp_path, killed),
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the launcher and both ranks die together
    )
    deadline = time.monotonic() + 600
    while not list((killed / "checkpoints").glob("step-*/state.pt")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (killed / "final").exists(), "the run finished before it could be killed"

    again = subprocess.run(
        _train_command(tmp_path, killed), capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=600
    )
    assert again.returncode == 0, again.stderr[-3000:]
    a = torch.load(straight / "checkpoints" / "step-000010" / "state.pt", weights_only=False)
    b = torch.load(killed / "checkpoints" / "step-000010" / "state.pt", weights_only=False)
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert _records(killed) == _records(straight)
    assert (killed / "final" / "config.json").is_file()


def test_accelerate_launch_runs_two_ranks(tmp_path):
    pytest.importorskip("accelerate")
    out = tmp_path / "acc"
    cmd = _train_command(tmp_path, out)
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",  # accelerate's torchrun path; on a CPU-only machine the ranks use gloo
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(_free_port()),
        *cmd[cmd.index("agentflow_env.cli") - 1 :],  # -m agentflow_env.cli train --config ...
        "--steps",
        "2",
        "--eval-every",
        "2",
        "--json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summaries = [line for line in done.stdout.splitlines() if line.startswith('{"step"')]
    assert len(summaries) == 1 and json.loads(summaries[0])["step"] == 2  # rank 0 reports, once
    records = _records(out)
    assert [r["step"] for r in records] == [1, 2]
    assert records[0]["rollout/trained_turns"] == 4  # 2 questions x 2 rollouts x 1 turn, over both ranks
    assert "eval/Gen-GameOf24-v2/success" in records[-1]
    assert (out / "final" / "config.json").is_file()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
