"""What the hostile sandbox suites share: the isolation modes, starting a tool in one, and the checks that a
worker is gone. The fixtures ``mode``, ``tool`` and ``other`` are in ``conftest.py``."""

from __future__ import annotations

import atexit
import os
import shutil
import time
from pathlib import Path

import pytest

from agentflow_env.error import ToolError
from agentflow_env.tools.python.sandbox import zygote as zyg
from agentflow_env.tools.python.tool import PythonCoderTool

REPO = Path(__file__).resolve().parent.parent.parent
REQUIRE = os.environ.get("AGENTFLOW_REQUIRE_BWRAP") == "1"
HIDDEN = "default-no-bwrap"
# the tool on a training node that forbids namespaces: each call goes to ``agentflow-env sandbox-server``
# (started once in this process, on loopback, isolating with bubblewrap or namespaces)
REMOTE = "remote"
MODES = ("bwrap", "namespaces", HIDDEN, REMOTE)
_SERVER: list = []
# the default mode's tools get a preload of their own, so they never share a zygote that another test module's
# default tool started with bubblewrap visible ("json" is preloaded anyway: nothing else changes)
HIDDEN_PRELOAD = ("json",)


def sandbox_server():
    """The sandbox server the remote mode's tools call (one per test process; skips where none can isolate)."""
    if not _SERVER:
        from agentflow_env.remote.sandbox_server import SandboxServer

        try:
            server = SandboxServer(port=0, concurrency=2, idle_timeout_s=60).start()
        except ToolError as exc:
            if REQUIRE:
                raise
            pytest.skip(f"no sandbox can start here, so no sandbox server: {exc}")
        atexit.register(server.close)
        _SERVER.append(server)
    return _SERVER[0]


def _start(mode: str, **kwargs) -> PythonCoderTool:
    if mode == "bwrap" and shutil.which("bwrap") is None and not REQUIRE:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    if mode == REMOTE:
        tool = PythonCoderTool(sandbox=f"remote:{sandbox_server().url}", max_output_chars=2000, tmp_mb=8, **kwargs)
    elif mode == HIDDEN:
        tool = PythonCoderTool(max_output_chars=2000, tmp_mb=8, preload=HIDDEN_PRELOAD, **kwargs)
    else:
        tool = PythonCoderTool(sandbox=mode, max_output_chars=2000, tmp_mb=8, **kwargs)
    try:
        tool.warm_up()
    except ToolError as exc:
        tool.close()
        if REQUIRE and (mode == "bwrap" or os.geteuid() == 0):
            raise
        pytest.skip(f"the {mode} sandbox cannot start here: {exc}")
    return tool


def _ok(tool: PythonCoderTool) -> None:
    r = tool.run("6 * 7", 5)
    assert r.ok and r.text == "42", r.text


def _fails(tool: PythonCoderTool, code: str) -> str:
    r = tool.run(code, 5)
    assert not r.ok, f"hostile code succeeded: {code!r} -> {r.text}"
    return r.text


def _assert_gone(tool: PythonCoderTool | None, ns_inode: int, uid: int | None, within_s: float = 0.0) -> None:
    """Nothing is left of a killed worker: no process in its pid namespace, none with its private uid
    (``within_s``: polled that long, for a kill done in the background)."""
    deadline = time.monotonic() + within_s
    while True:
        members = _pid_namespace_members(ns_inode)
        left = [] if uid is None else [p for p, (u, st) in zyg._proc_uids().items() if u == uid and st != "Z"]
        if (not members and not left) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if tool is not None and members:  # a freed namespace's inode number is soon reused, e.g. by a fresh worker
        state = tool._state
        with state.lock:
            fresh = {w.ns for w in [*state.idle, state.spare] if w is not None}
        if ns_inode in fresh:
            members = []
    assert members == [], f"{len(members)} processes left in the worker's pid namespace"
    if uid is not None:
        assert left == [], left


def _pid_namespace_members(ns_inode: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == ns_inode:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _host_stats(ns_inode: int) -> list[tuple[str, float, int]]:
    """(state letter, CPU seconds, RSS bytes) of every process in a worker's pid namespace, read by the host."""
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    rows = []
    for pid in sorted(_pid_namespace_members(ns_inode)):
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        rows.append((fields[0].decode(), (int(fields[11]) + int(fields[12])) / tick, int(fields[21]) * page))
    return rows
