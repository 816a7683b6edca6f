"""The AgentFlow checkout is read once per process: parsed files and prompt sources are shared until a file changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentflow_env.paper_flow.checkout_cache import cached_build, checkout_stamp, parse_cached

SRC = Path(os.environ.get("AGENTFLOW_SRC") or Path(__file__).resolve().parents[4] / "shared" / "data" / "agentflow-src")


def test_a_file_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("X = 1\n", encoding="utf-8")
    first = parse_cached(path)
    assert parse_cached(path) is first
    path.write_text("X = 22\n", encoding="utf-8")  # another size (and mtime): parsed afresh
    second = parse_cached(path)
    assert second is not first and second.body[0].value.value == 22  # type: ignore[attr-defined]


def test_a_build_is_kept_per_checkout_stamp(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n", encoding="utf-8")
    builds: list[int] = []

    def build() -> int:
        builds.append(1)
        return len(builds)

    key = ("test", str(tmp_path), checkout_stamp(tmp_path))
    assert cached_build(key, build) == 1 and cached_build(key, build) == 1
    (tmp_path / "b.py").write_text("B = 2\n", encoding="utf-8")
    assert cached_build(("test", str(tmp_path), checkout_stamp(tmp_path)), build) == 2


@pytest.mark.skipif(not (SRC / "agentflow").is_dir(), reason="AgentFlow sources not present")
def test_every_env_shares_the_checkouts_prompts() -> None:
    from agentflow_env.paper_flow.env import resolve_prompts

    one, two = resolve_prompts(f"agentflow:{SRC}"), resolve_prompts(f"agentflow:{SRC}")
    assert one is two
    assert one.tool_metadata() == two.tool_metadata() and one.tool_metadata() is not two.tool_metadata()
