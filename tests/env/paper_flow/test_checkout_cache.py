"""The AgentFlow checkout is read once per process: parsed files and prompt sources are shared until a file changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentflow_env.paper_flow.checkout_cache import cached_build, parse_cached

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")


def test_a_file_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("X = 1\n", encoding="utf-8")
    first = parse_cached(path)
    assert parse_cached(path) is first
    path.write_text("X = 22\n", encoding="utf-8")  # another size (and mtime): parsed afresh
    second = parse_cached(path)
    assert second is not first and second.body[0].value.value == 22  # type: ignore[attr-defined]


def test_a_build_is_kept_while_the_files_it_parsed_and_its_folders_are_unchanged(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("B = 2\n", encoding="utf-8")
    builds: list[int] = []

    def build() -> int:
        builds.append(1)
        tree = parse_cached(tmp_path / "a.py")
        return len(builds) * 100 + tree.body[0].value.value  # type: ignore[attr-defined]

    key = ("test", str(tmp_path))
    assert cached_build(key, build, [tmp_path]) == 101 and cached_build(key, build, [tmp_path]) == 101
    (tmp_path / "a.py").write_text("A = 42\n", encoding="utf-8")  # a file it parsed changed: built again
    assert cached_build(key, build, [tmp_path]) == 242
    (tmp_path / "b.py").write_text("B = 3\n", encoding="utf-8")  # a file it did not parse: kept
    assert cached_build(key, build, [tmp_path]) == 242
    os.utime(tmp_path, ns=(1, 1))  # the folder changed (a file added or removed): built again
    assert cached_build(key, build, [tmp_path]) == 342


@pytest.mark.skipif(not (SRC / "agentflow").is_dir(), reason="AgentFlow sources not present")
def test_every_env_shares_the_checkouts_prompts() -> None:
    from agentflow_env.paper_flow.env import resolve_prompts

    one, two = resolve_prompts(f"agentflow:{SRC}"), resolve_prompts(f"agentflow:{SRC}")
    assert one is two
    assert one.tool_metadata() == two.tool_metadata() and one.tool_metadata() is not two.tool_metadata()
    from agentflow_env.paper_flow.agentflow_judge import AgentFlowScoring

    assert AgentFlowScoring.cached(SRC) is AgentFlowScoring.cached(SRC)
