"""The rooms of ``agents/``: the old flat module paths still work, and the learner's modules import no circle."""

from __future__ import annotations

import ast
import importlib
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# old flat path -> where the module lives now
MOVED = {
    "agents.policy": "agents.policies.policy",
    "agents.baselines": "agents.policies.baselines",
    "agents.scripted": "agents.policies.scripted",
    "agents.llm_planner": "agents.policies.llm_planner",
    "agents.hf_policy": "agents.policies.hf_policy",
    "agents.registry": "agents.policies.registry",
    "agents.flow_grpo": "agents.training.flow_grpo",
    "agents.flow_grpo_config": "agents.training.config",
    "agents.flow_grpo_backends": "agents.training.backends",
    "agents.rollout": "agents.training.rollout",
    "agents.rollout_correction": "agents.training.rollout_correction",
    "agents.data_parallel": "agents.training.data_parallel",
    "agents.sft": "agents.training.sft",
    "agents.train_cli": "agents.training.train_cli",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module_itself(old):
    # the same module object: private names, monkeypatching and isinstance all behave as before the move
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_from_imports_through_an_old_path():
    from agents.flow_grpo import FlowGRPOLearner, _step_seed
    from agents.flow_grpo_config import FlowGRPOConfig
    from agents.registry import tiny_model_path
    from agents.training.config import FlowGRPOConfig as Moved
    from agents.training.flow_grpo import FlowGRPOLearner as MovedLearner

    assert FlowGRPOConfig is Moved and FlowGRPOLearner is MovedLearner
    assert callable(_step_seed) and callable(tiny_model_path)


def test_an_object_pickled_under_an_old_path_loads():
    from agents.training.config import FlowGRPOConfig

    config = FlowGRPOConfig(steps=3)
    # protocol 0 names classes as text lines, so the module path can be swapped for the old one
    old_pickle = pickle.dumps(config, protocol=0).replace(b"agents.training.config", b"agents.flow_grpo_config")
    assert b"agents.flow_grpo_config" in old_pickle
    assert pickle.loads(old_pickle) == config


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_the_backends_never_import_the_learner():
    # flow_grpo imports make_backend; the key/value cache helpers both need live in kv_cache
    backends = _imported_modules(ROOT / "agents" / "training" / "backends.py")
    assert not {m for m in backends if m.startswith(("agents.training.flow_grpo", "agents.flow_grpo"))}
    assert "agents.training.kv_cache" in backends
    code = "import sys, agents.training.backends; assert 'agents.training.flow_grpo' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_entry_points_name_importable_functions():
    from agentflow_env.cli import COMMANDS

    for target, _help in COMMANDS.values():
        if target.startswith("agents."):
            module, _, attr = target.partition(":")
            assert callable(getattr(importlib.import_module(module), attr)), target


def test_the_tiny_model_entry_point_loads():
    from importlib.metadata import entry_points

    (tiny,) = [ep for ep in entry_points(group="agentflow_env.models") if ep.name == "tiny"]
    assert callable(tiny.load())
