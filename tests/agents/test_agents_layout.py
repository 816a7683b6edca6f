"""The rooms of ``agents/``: the learner's modules import no circle, and the entry points resolve."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    # flow_grpo imports make_backend; the token maths both need (key/value cache, teacher forcing) lives in agents.lm
    backends = _imported_modules(ROOT / "agents" / "training" / "backends.py")
    assert not {m for m in backends if m.startswith("agents.training.flow_grpo")}
    assert "agents.lm" in backends
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
