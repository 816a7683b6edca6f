"""cgroup v2 limits per worker, where a delegated cgroup is writable: ``memory.max``, ``cpu.max``, ``pids.max``.

Host side. A zygote gets a folder ``agentflow-<pid>-<n>`` under the delegated cgroup (``AGENTFLOW_CGROUP``, else
the root of the cgroup v2 mount when it is writable), and each worker a child ``w<id>`` in it with the limits;
the worker's supervisor and kernel (found by their pid namespace) move in right after the fork, so everything a
cell starts is counted there, also between calls. The kernel then enforces the caps exactly (no polling): past
``memory.max`` it kills a process of the worker, which the tool reports as the memory limit (``memory.events``).

Where no such cgroup exists (cgroup v1, no memory/cpu/pids controller, not writable), :func:`open_cgroups`
returns ``None`` and the supervisor's polled cap is all there is; ``SandboxInfo.resource_control`` says which.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import shutil
import time
from pathlib import Path

__all__ = ["CGROUP_ENV", "WorkerCgroups", "open_cgroups"]

logger = logging.getLogger(__name__)

CGROUP_ENV = "AGENTFLOW_CGROUP"
CONTROLLERS = ("memory", "cpu", "pids")
MEMORY_SLACK_BYTES = 64 * 2**20  # the idle supervisor and kernel (their copied pages) on top of memory_mb
CPU_MAX = "100000 100000"  # one CPU at most, per worker
_COUNTER = itertools.count()


def _cgroup2_root() -> Path | None:
    try:
        with open("/proc/self/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    return Path(parts[1])
    except OSError:
        return None
    return None


def _enable(folder: Path) -> None:
    """Hand the controllers down to ``folder``'s children (a no-op where they are on already)."""
    path = folder / "cgroup.subtree_control"
    current = set(path.read_text().split()) if path.exists() else set()  # a cgroup always has it; a stand-in not
    missing = [c for c in CONTROLLERS if c not in current]
    if missing:
        path.write_text(" ".join(f"+{c}" for c in missing))


def open_cgroups() -> WorkerCgroups | None:
    """A fresh folder for one zygote's workers under a writable delegated cgroup v2, or ``None`` (polled caps)."""
    chosen = os.environ.get(CGROUP_ENV, "").strip()
    base = Path(chosen) if chosen else _cgroup2_root()
    if base is None:
        return None
    try:
        available = set((base / "cgroup.controllers").read_text().split())
        if not set(CONTROLLERS) <= available or not os.access(base / "cgroup.subtree_control", os.W_OK):
            if chosen:
                logger.warning(
                    "%s=%s: needs the %s controllers and write access; the polled memory cap is used instead",
                    CGROUP_ENV,
                    chosen,
                    "/".join(CONTROLLERS),
                )
            return None
        _enable(base)
        folder = base / f"agentflow-{os.getpid()}-{next(_COUNTER)}"
        folder.mkdir()
        try:
            _enable(folder)
        except OSError:
            folder.rmdir()
            raise
    except OSError as exc:
        logger.debug("no cgroup v2 limits (%s): the polled memory cap is used", exc)
        return None
    return WorkerCgroups(folder)


def _namespace_members(ns_inode: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == ns_inode:
                    found.append(int(entry))
            except OSError:
                continue
    return found


class WorkerCgroups:
    """The cgroups of one zygote's workers."""

    def __init__(self, folder: Path):
        self.folder = folder

    def add(self, wid: int, ns_inode: int, memory_bytes: int, nproc: int) -> bool:
        """Make ``w<wid>`` with its limits and move the worker's processes in; False when that failed."""
        path = self.folder / f"w{wid}"
        try:
            path.mkdir(exist_ok=True)
            (path / "memory.max").write_text(str(int(memory_bytes) + MEMORY_SLACK_BYTES))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
            (path / "pids.max").write_text(str(int(nproc) + 4))  # the supervisor, the kernel and their helpers
            (path / "cpu.max").write_text(CPU_MAX)
            members = _namespace_members(ns_inode) if ns_inode else []
            if not members:
                raise OSError(f"no processes found in the worker's pid namespace {ns_inode}")
            for pid in members:
                (path / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            logger.warning("the cgroup limits of a Python worker could not be set (%s); the polled cap holds", exc)
            self.remove(wid)
            return False
        return True

    def oom_kills(self, wid: int) -> int:
        """How many processes of worker ``wid`` the kernel killed at ``memory.max``."""
        try:
            for line in (self.folder / f"w{wid}" / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self, wid: int) -> None:
        path = self.folder / f"w{wid}"
        for _ in range(50):  # a killed worker's processes leave the cgroup a moment after their death
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno == errno.ENOTEMPTY:  # not a cgroup (a test's stand-in folder): plain files
                    shutil.rmtree(path, ignore_errors=True)
                    return
                time.sleep(0.01)  # EBUSY: its processes are still leaving

    def close(self) -> None:
        for child in list(self.folder.glob("w*")):
            self.remove(int(child.name[1:]) if child.name[1:].isdigit() else -1)
        try:
            self.folder.rmdir()
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)
