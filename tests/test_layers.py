"""The layer rule, read from every import statement (module-level and inside functions) of every .py file.

``agentflow_env`` imports none of ``agents``, ``benchmarks``, ``leaderboards``; ``agents`` and ``benchmarks``
import no ``leaderboards``. String entry points (``"benchmarks.specs:make_env"``) are how a lower layer names
a higher one without importing it. No module is an alias that only rebinds ``sys.modules``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> the packages it must never import
FORBIDDEN = {
    "agentflow_env": ("agents", "benchmarks", "leaderboards"),
    "agents": ("leaderboards",),
    "benchmarks": ("leaderboards",),
}

# the flat modules of agents/ that were once aliases of their moved homes
OLD_ALIASES = (
    "baselines",
    "data_parallel",
    "flow_grpo",
    "flow_grpo_backends",
    "flow_grpo_config",
    "hf_policy",
    "llm_planner",
    "policy",
    "registry",
    "rollout",
    "rollout_correction",
    "scripted",
    "sft",
    "train_cli",
)


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in ``path``, wherever it sits."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def violations(package: str, root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path, root):
            if module.split(".")[0] in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_a_layer_above_it(package: str) -> None:
    assert violations(package) == []


def test_the_reader_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    probe = tmp_path / "agentflow_env" / "tools" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "def f():\n    from benchmarks.specs import make_env\n    import leaderboards.cli\nfrom ..core import X\n",
        encoding="utf-8",
    )
    found = sorted(m for _, m in imported_modules(probe, tmp_path))
    assert found == ["agentflow_env.core", "benchmarks.specs", "leaderboards.cli"]
    assert len(violations("agentflow_env", tmp_path)) == 2


def _is_alias(path: Path) -> bool:
    """A module whose only job is ``sys.modules[__name__] = other``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and ast.unparse(target).startswith("sys.modules["):
                    return True
    return False


def test_no_alias_modules_remain() -> None:
    assert [name for name in OLD_ALIASES if (ROOT / "agents" / f"{name}.py").exists()] == []
    files = [p for pkg in (*FORBIDDEN, "leaderboards") for p in (ROOT / pkg).rglob("*.py")]
    assert [str(p.relative_to(ROOT)) for p in files if _is_alias(p)] == []


def test_test_files_never_import_each_other() -> None:
    """Shared test code lives in tests/helpers.py (or a conftest); a test module is never imported."""
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line, module in imported_modules(path)
        if module.startswith("tests.")
        and module.rsplit(".", 1)[-1].startswith("test_")
        and module != ".".join(path.relative_to(ROOT).with_suffix("").parts)  # itself, for an entry-point spec
    ]
    assert not bad, "\n".join(bad)
