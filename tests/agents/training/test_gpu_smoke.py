"""experiments/gpu_smoke.py's CPU mode: the GPU smoke run's code path (model build, Flow-GRPO steps with the
verl-compatible settings on a multi-turn family, the JSON report) on a tiny model, in CI."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[3]


def _smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "experiments" / "gpu_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_tiny_mode_reports_every_figure(tmp_path, capsys):
    smoke = _smoke()
    out = tmp_path / "smoke.json"
    argv = ["--device", "cpu", "--tiny", "--steps", "1", "--work", str(tmp_path / "w"), "--out", str(out)]
    assert smoke.main(argv) == 0
    result = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == result
    assert result["steps"] == 1 and result["backend"] == "hf" and result["turns_per_episode"] >= 1
    for key in ("generation_tokens_per_s", "train_tokens_per_s", "mfu", "peak_memory_bytes", "env_share_of_wall"):
        assert result[key] > 0, key
    assert 0 < result["env_share_of_wall"] + result["policy_share_of_wall"] + result["update_share_of_wall"] <= 1.05
    assert result["settings"]["loss_aggregation"] == "trajectory" and result["settings"]["eps_high"] == 0.3


def test_cuda_mode_says_when_there_is_no_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the full smoke run is `python experiments/gpu_smoke.py`")
    with pytest.raises(SystemExit, match="--device cpu --tiny"):
        _smoke().main(["--work", str(tmp_path)])
