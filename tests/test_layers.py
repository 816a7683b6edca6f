"""The layer rule, read from every import statement (module-level and inside functions) of every .py file.

``agentflow_env`` imports none of ``agents``, ``benchmarks``, ``leaderboards``; ``agents`` and ``benchmarks``
import no ``leaderboards``. String entry points (``"benchmarks.specs:make_env"``) are how a lower layer names
a higher one without importing it. No module is an alias that only rebinds ``sys.modules``.

Inside ``agentflow_env`` the rooms are layers too (:data:`INNER_LAYERS`, lowest first); a module imports only
its own layer and those below:

0. ``error``, ``types``, ``clock``, ``spaces``, ``config``, ``remote/connection.py``: the vocabulary, imported by
   all (the keep-alive HTTP connection sits here, as both clients use it: ``RemoteEnv`` and the Python tool's
   remote sandbox);
1. ``engines/``: LLM backends and the OpenAI wire format (``engines/hermes.py`` reads ``<tool_call>`` blocks
   for the wire and for the turn's tool-call reader);
2. ``scoring/``: scorers (the judge calls an engine; AgentFlow's own judge is named by a string entry point);
3. ``tools/``: the tools (the calculator evaluates with ``scoring/arith.py``);
4. ``turn/``: the turn machinery (parsing, tool calls, memory, prompts, modes, turn rewards);
5. ``base``, ``core``, ``registration`` and the package itself: the Gymnasium surface, ``AgentFlowEnv``;
6. ``paper_flow/``: AgentFlow's own solver, a flow on ``base``;
7. ``vector/``, ``remote/``, ``wrappers/``: what runs, serves or wraps envs;
8. ``terminal/``, ``cli``: the commands.

No circles: the import graph of the four packages (every import that runs: module-level and inside functions,
``if TYPE_CHECKING:`` blocks too, relative ones resolved) has no strongly connected component of more than one
module.
"""

from __future__ import annotations

import ast
import sys
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


def imported_names(path: Path, root: Path = ROOT) -> list[tuple[int, list[str]]]:
    """(line, names) of every import statement in ``path``, wherever it sits (``if TYPE_CHECKING:`` too):
    ``import a.b`` gives ``a.b``, ``from a import b, c`` gives ``a``, ``a.b``, ``a.c`` (``b`` may be a module
    or a name in ``a``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, [alias.name]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, [module, *(f"{module}.{alias.name}".lstrip(".") for alias in node.names)]))
    return found


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in ``path``, wherever it sits."""
    return [(line, names[0]) for line, names in imported_names(path, root)]


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


# ---------------------------------------------------------------------------------------------- inner layers
# agentflow_env's rooms, lowest first (module paths under agentflow_env; the longest prefix decides; "" is the
# package's own __init__). See the module docstring for what each layer is.
INNER_LAYERS: tuple[tuple[str, ...], ...] = (
    ("error", "types", "clock", "spaces", "config", "remote.connection"),
    ("engines",),
    ("scoring",),
    ("tools",),
    ("turn",),
    ("base", "core", "registration", ""),
    ("paper_flow",),
    ("vector", "remote", "wrappers"),
    ("terminal", "cli"),
)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(packages: tuple[str, ...], root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ``modules`` that ``name`` (a module, or a name in one) is: the longest such prefix."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(names: list[str], modules: dict[str, Path]) -> set[str]:
    """The modules an import statement's ``names`` load: each imported name's module (``from a import b``: ``a.b``
    when that is a module, else ``a``)."""
    return {t for t in (_resolve(n, modules) for n in (names[1:] or names)) if t is not None}


def inner_layer(module: str) -> int:
    """The layer (an index of :data:`INNER_LAYERS`) of an ``agentflow_env`` module."""
    inner = module.split(".", 1)[1] if "." in module else ""
    best, best_len = None, -1
    for i, prefixes in enumerate(INNER_LAYERS):
        for prefix in prefixes:
            if (inner == prefix or inner.startswith(f"{prefix}.") or prefix == "") and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if best is None or (best_len == 0 and inner):
        raise AssertionError(f"{module} is in no layer of INNER_LAYERS: add its room there")
    return best


def upward_imports(root: Path = ROOT) -> list[str]:
    """``path:line imports module (layer a -> b)`` for every import of a higher layer inside agentflow_env."""
    modules = package_modules(("agentflow_env",), root)
    bad = []
    for module, path in modules.items():
        mine = inner_layer(module)
        for line, names in imported_names(path, root):
            for target in _targets(names, modules):
                if inner_layer(target) > mine:
                    bad.append(
                        f"{path.relative_to(root)}:{line} imports {target} (layer {mine} -> {inner_layer(target)})"
                    )
    return sorted(bad)


def import_graph(packages: tuple[str, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports."""
    modules = package_modules(packages, root)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = {t for _, names in imported_names(path, root) for t in _targets(names, modules)} - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def test_no_room_of_agentflow_env_imports_a_layer_above_it() -> None:
    bad = upward_imports()
    assert not bad, "\n".join(bad)


def test_no_import_circles() -> None:
    found = circles(import_graph(("agentflow_env", "agents", "benchmarks", "leaderboards")))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_layer_and_circle_readers_catch_what_they_must(tmp_path: Path) -> None:
    pkg = tmp_path / "agentflow_env"
    for name, text in {
        "__init__.py": "",
        "error.py": "",
        "tools/__init__.py": "",
        "tools/a.py": "def f():\n    from agentflow_env.turn import b\n",  # upward, inside a function
        "turn/__init__.py": "",
        "turn/b.py": "from ..tools import a\nif TYPE_CHECKING:\n    from agentflow_env import core\n",
        "core.py": "from agentflow_env.turn.b import x\nfrom agentflow_env import error\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text, encoding="utf-8")
    assert upward_imports(tmp_path) == [
        "agentflow_env/tools/a.py:2 imports agentflow_env.turn.b (layer 3 -> 4)",
        "agentflow_env/turn/b.py:3 imports agentflow_env.core (layer 4 -> 5)",
    ]
    graph = import_graph(("agentflow_env",), tmp_path)
    assert graph["agentflow_env.core"] == {"agentflow_env.turn.b", "agentflow_env.error"}
    assert circles(graph) == [["agentflow_env.core", "agentflow_env.tools.a", "agentflow_env.turn.b"]]
    assert circles({"x": {"y"}, "y": set()}) == []
    assert inner_layer("agentflow_env.remote.connection") == 0 and inner_layer("agentflow_env.remote.server") == 7
