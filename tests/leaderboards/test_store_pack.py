"""Stored references are kept packed (tasks.jsonl.gz): every reader sees the same outcomes, the bytes are stable,
and a packed run resumes without redoing or losing an episode."""

from __future__ import annotations

from pathlib import Path

from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import PACKED_TASKS_FILE, TASKS_FILE, JsonlAppender, load_run, pack_run, read_tasks

TINY = """
name = "tiny-pack"
max_turns = 4
seeds = [0]
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
label = "G24"
category = "math"
num_tasks = 5
"""


def _run(tmp_path: Path) -> Path:
    protocol = tmp_path / "tiny-pack.toml"
    protocol.write_text(TINY)
    result = evaluate(EvalConfig(policy="scripted", protocol=str(protocol), out=tmp_path / "out", progress=False))
    assert result.path is not None
    return result.path


def test_a_packed_run_reads_the_same_and_its_bytes_are_stable(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    before = [o.to_dict() for o in load_run(run_dir).outcomes]
    packed = pack_run(run_dir)
    assert packed.name == PACKED_TASKS_FILE and not (run_dir / TASKS_FILE).exists()
    assert [o.to_dict() for o in load_run(run_dir).outcomes] == before and len(before) == 5
    first = packed.read_bytes()
    pack_run(run_dir)  # packing again (nothing new) writes the very same bytes: no time or name in the header
    assert packed.read_bytes() == first


def test_lines_appended_after_packing_are_read_and_packed_with_the_rest(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    lines = read_tasks(run_dir)
    pack_run(run_dir)
    extra = dict(lines[0], key="agentflow/Gen-GameOf24-v1#99#s0#k0", index=99)
    with JsonlAppender(run_dir / TASKS_FILE) as tasks:
        tasks.append(extra)
        tasks.append(lines[1])  # a unit re-run after a crash counts once
    assert len(read_tasks(run_dir)) == 7 and len(load_run(run_dir).outcomes) == 6
    pack_run(run_dir)
    assert len(load_run(run_dir).outcomes) == 6 and not (run_dir / TASKS_FILE).exists()


def test_a_packed_run_resumes_without_redoing_an_episode(tmp_path: Path) -> None:
    import gzip

    run_dir = _run(tmp_path)
    full = [o.to_dict() for o in load_run(run_dir).outcomes]
    pack_run(run_dir)
    packed = run_dir / PACKED_TASKS_FILE
    lines = gzip.decompress(packed.read_bytes()).decode().splitlines(keepends=True)
    packed.write_bytes(gzip.compress("".join(lines[:3]).encode()))  # as if interrupted after 3 episodes
    again = evaluate(
        EvalConfig(policy="scripted", protocol=str(tmp_path / "tiny-pack.toml"), out=tmp_path / "out", progress=False)
    )
    assert len((run_dir / TASKS_FILE).read_text().splitlines()) == 2  # only the 2 missing episodes ran
    assert sorted(o["key"] for o in full) == sorted(o.key for o in again.outcomes)
