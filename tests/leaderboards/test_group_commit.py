"""Group commit of the result files: offsets exact, fewer fsyncs than lines, and a crash loses nothing acknowledged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaderboards.group_commit import GroupCommit
from leaderboards.store import read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def test_offsets_point_at_their_lines_and_fsyncs_are_grouped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    (tmp_path / "t.jsonl").write_text('{"old": 1}\n{"torn": ', encoding="utf-8")  # a torn tail is cut on open
    with GroupCommit(interval_s=30.0, max_records=1000) as group:
        traj, tasks = group.appender(tmp_path / "t.jsonl"), group.appender(tmp_path / "o.jsonl")
        calls.clear()  # (cutting the torn tail fsynced)
        spots = []
        for i in range(50):
            spots.append(traj.append({"i": i, "text": "é" * i}))
            tasks.append({"i": i, "at": spots[-1][0]})
        assert calls == []  # nothing committed yet: well under max_records and interval_s
    assert len(calls) == 2  # one fsync per file for the whole batch
    data = (tmp_path / "t.jsonl").read_bytes()
    for i, (offset, length) in enumerate(spots):
        assert json.loads(data[offset : offset + length]) == {"i": i, "text": "é" * i}
    assert [r["i"] for r in read_jsonl(tmp_path / "o.jsonl")] == list(range(50))
    assert read_jsonl(tmp_path / "t.jsonl")[0] == {"old": 1}


def test_a_full_batch_commits_without_waiting_for_the_interval(tmp_path: Path) -> None:
    with GroupCommit(interval_s=60.0, max_records=4) as group:
        app = group.appender(tmp_path / "a.jsonl")
        for i in range(4):
            app.append({"i": i})
        for _ in range(1000):  # the committer thread takes the full batch at once (bounded wait, not timed)
            if group.commits:
                break
            time.sleep(0.01)
        assert group.commits == 1
        assert len(read_jsonl(tmp_path / "a.jsonl")) == 4


CHILD = """
import json, sys, time
from pathlib import Path
from leaderboards.group_commit import GroupCommit
out = Path(sys.argv[1])
group = GroupCommit(interval_s=3600.0, max_records=10_000)  # commits only when asked
traj, tasks = group.appender(out / "trajectories.jsonl"), group.appender(out / "tasks.jsonl")
for i in range(40):
    offset, length = traj.append({"key": i, "steps": ["x" * (i % 7)]})
    tasks.append({"key": i, "trajectory": {"offset": offset, "length": length}})
    if i % 10 == 9 and i < 30:  # 30..39 stay buffered, never acknowledged
        group.commit()
        print(f"ACK {i}", flush=True)
print("WAITING", flush=True)
time.sleep(60)
"""


def test_sigkill_between_batches_loses_nothing_acknowledged_and_resumes_exactly_once(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True)
    acked = -1
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ACK"):
            acked = int(line.split()[1])
        if line.startswith("WAITING"):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert acked == 29
    tasks = read_jsonl(tmp_path / "tasks.jsonl")
    assert [t["key"] for t in tasks] == list(range(acked + 1))
    data = (tmp_path / "trajectories.jsonl").read_bytes()
    for t in tasks:
        spot = t["trajectory"]
        assert json.loads(data[spot["offset"] : spot["offset"] + spot["length"]])["key"] == t["key"]

    # a resumed writer appends the rest once: nothing twice, nothing missing, offsets still exact
    done = {t["key"] for t in tasks}
    with GroupCommit() as group:
        traj, more = group.appender(tmp_path / "trajectories.jsonl"), group.appender(tmp_path / "tasks.jsonl")
        for key in range(50):
            if key not in done:
                offset, length = traj.append({"key": key, "steps": []})
                more.append({"key": key, "trajectory": {"offset": offset, "length": length}})
    tasks = read_jsonl(tmp_path / "tasks.jsonl")
    assert sorted(t["key"] for t in tasks) == list(range(50)) and len(tasks) == 50
    data = (tmp_path / "trajectories.jsonl").read_bytes()
    for t in tasks:
        spot = t["trajectory"]
        assert json.loads(data[spot["offset"] : spot["offset"] + spot["length"]])["key"] == t["key"]
