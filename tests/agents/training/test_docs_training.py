"""The documented CPU training commands (docs/training.md), run the way a new user runs them: from a folder
outside the clone, with the shipped config named by its short name. Budgets are cut to a few steps; the commands
are read from the page, so the docs cannot drift from what works."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[3]
# appended to each documented command: the same code path on a budget of seconds
SMALL = {
    "sft": [
        "--episodes", "4", "--epochs", "1", "--batch-size", "2", "--max-steps", "2", "--checkpoint-every", "1",
        "--no-progress",
    ],
    "train": [
        "--steps", "1", "--questions-per-step", "1", "--group-size", "2", "--max-new-tokens", "8",
        "--eval-every", "0", "--eval-on-start", "false", "--minibatch-size", "2", "--progress", "false",
    ],
}  # fmt: skip


def documented_commands() -> list[list[str]]:
    """The ``agentflow-env`` lines of the first code block under "## On a CPU, from any folder" of the training page."""
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    section = text.split("## On a CPU, from any folder", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("agentflow-env")]


def _cli() -> list[str]:
    script = shutil.which("agentflow-env")
    return [script] if script else [sys.executable, "-m", "agentflow_env.cli"]


def test_the_page_names_the_shipped_config_and_both_steps():
    commands = documented_commands()
    assert [c[1] for c in commands] == ["train", "sft", "train"]
    assert all("--config" not in c or c[c.index("--config") + 1] == "tiny-cpu-game24" for c in commands)


def test_documented_cpu_commands_run_from_outside_the_clone(tmp_path):
    work = tmp_path / "scratch"  # not inside the clone: configs must come from the package
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    outputs = []
    for command in documented_commands():
        argv = _cli() + command[1:] + SMALL.get(command[1], []) * ("--list-configs" not in command)
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{shlex.join(command)}\n{proc.stderr[-3000:]}"
        outputs.append(proc.stdout)
    assert "tiny-cpu-game24" in outputs[0]
    sft = json.loads((work / "runs" / "sft-tiny" / "sft_metrics.json").read_text())
    assert sft["complete"] is True and sft["steps"] == 2 and sft["config"]["env_kwargs"]["min_solutions"] == 20
    records = [json.loads(line) for line in (work / "runs" / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1] and (work / "runs" / "grpo" / "final" / "config.json").is_file()
    started_from = json.loads((work / "runs" / "grpo" / "config.json").read_text())["init_from"]
    assert started_from == "runs/sft-tiny"


def test_a_missing_config_says_where_the_shipped_ones_are(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        _cli() + ["train", "--config", "no-such-config"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "shipped configs (in" in proc.stderr and "tiny-cpu-game24" in proc.stderr and "--list-configs" in proc.stderr


def _run_documented_training(work: Path, hash_seed: str) -> None:
    """The documented sft and train lines on a budget of a few steps, from an empty folder ``work``."""
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "PYTHONHASHSEED": hash_seed}
    for command in documented_commands():
        if "--list-configs" in command:
            continue
        argv = _cli() + command[1:] + SMALL[command[1]]
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{shlex.join(command)}\n{proc.stderr[-3000:]}"


def _fingerprint(work: Path) -> tuple[dict[str, str], list[dict]]:
    """Every model and checkpoint file's sha256 (SFT, its checkpoint, train's checkpoints, the final model: weights,
    optimizer and random states) and the logged metrics without timings."""
    files = [p for p in sorted((work / "runs").rglob("*")) if p.suffix in (".safetensors", ".pt")]
    hashes = {str(p.relative_to(work / "runs")): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    records = [json.loads(line) for line in (work / "runs" / "grpo" / "metrics.jsonl").read_text().splitlines()]
    timeless = [{k: v for k, v in r.items() if not k.startswith(("perf/", "time/"))} for r in records]
    return hashes, timeless


def test_the_documented_training_lines_repeat_bit_for_bit(tmp_path):
    """The reproducibility statement (docs/reproducibility.md): the same commands, seed, threads and machine give
    the same bits: model files (SFT, checkpoints, final) and metrics, from two separate processes each with its own
    hash seed."""
    _run_documented_training(tmp_path / "a", "1")
    _run_documented_training(tmp_path / "b", "2")
    hashes_a, metrics_a = _fingerprint(tmp_path / "a")
    hashes_b, metrics_b = _fingerprint(tmp_path / "b")
    assert "sft-tiny/model.safetensors" in hashes_a and "grpo/final/model.safetensors" in hashes_a
    assert any(name.startswith("grpo/checkpoints/") for name in hashes_a) and "sft-tiny/checkpoint/state.pt" in hashes_a
    assert hashes_a == hashes_b
    assert metrics_a == metrics_b and "losses/loss" in metrics_a[0]
