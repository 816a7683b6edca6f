"""Host side of the Python sandbox: picks the isolation, starts the shared per-process zygote, hands out workers.

Isolation, best first: ``bwrap`` (bubblewrap), ``namespaces`` (the same view built by ``rootfs.py`` with the
kernel's namespaces directly, when bubblewrap is missing). ``auto`` takes the first that works and refuses to run
code when none does; ``none`` runs code without isolation and is for trusted code only. ``AGENTFLOW_SANDBOX``
sets the mode for tools built with ``sandbox="auto"``.

One zygote per (sandbox mode, preload) per process, started lazily and shared by every tool in the process;
it is shut down when the last tool using it closes, at interpreter exit, or replaced when it dies.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.error import ToolError
from agentflow_env.tools.python.sandbox import view, wire
from agentflow_env.tools.python.sandbox import zygote as _z
from agentflow_env.tools.python.sandbox.cgroups import WorkerCgroups, open_cgroups

__all__ = [
    "SandboxInfo",
    "SandboxLimits",
    "SandboxUnavailable",
    "Worker",
    "WorkerLost",
    "ZygoteProcess",
    "acquire_zygote",
    "release_zygote",
    "resolve_mode",
    "shutdown_all",
]

logger = logging.getLogger(__name__)

ZYGOTE_SCRIPT = str(Path(_z.__file__).resolve())
ROOTFS_SCRIPT = str(Path(_z.__file__).resolve().parent / "rootfs.py")
SANDBOX_MODES = ("auto", "bwrap", "namespaces", "none")
SANDBOX_ENV = "AGENTFLOW_SANDBOX"
REMOTE_PREFIX = "remote:"  # sandbox="remote:URL": a sandbox service runs the code (tools/python/remote.py)
HANDSHAKE_TIMEOUT_S = 120.0
CONTROL_TIMEOUT_S = 30.0
ZYGOTE_TMP_BYTES = 1 << 20  # the zygote's own /tmp; each worker mounts its own, sized by SandboxLimits.tmp_mb
UID_SLOTS = 512  # workers per zygote
UID_GROUPS = 4  # live zygotes per process that get private uids
_BWRAP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_CHOWN", "CAP_SETPCAP")
_SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}
HOW_TO_ISOLATE = (
    "install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap), or let unprivileged users create "
    "user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu also "
    "kernel.apparmor_restrict_unprivileged_userns=0). To run trusted code without isolation, pass "
    f"sandbox='none' or set {SANDBOX_ENV}=none"
)


@dataclass(frozen=True)
class SandboxLimits:
    """Per-worker resource limits (the wall timeout is per call and enforced by the host)."""

    memory_mb: int = 1024
    nproc: int = 8
    fsize_mb: int = 64
    nofile: int = 64
    tmp_mb: int = 64
    cpu_total_s: int = 3600
    keep_background: bool = False  # processes a cell started outlive its call (stopped until the next call)

    def to_wire(self, zygote_vm_kb: int) -> dict[str, int]:
        # RLIMIT_AS counts address space, and the preloaded zygote already maps a lot of it: add the budget on top
        return {
            "as_bytes": zygote_vm_kb * 1024 + self.memory_mb * 2**20,
            "fsize_bytes": self.fsize_mb * 2**20,
            "nofile": self.nofile,
            "nproc": self.nproc,
            "tmp_bytes": self.tmp_mb * 2**20,
            "tree_bytes": self.memory_mb * 2**20,  # all the worker's processes together, above their idle size
            "cpu_total_s": self.cpu_total_s,
            "keep_background": int(self.keep_background),
        }


@dataclass(frozen=True)
class SandboxInfo:
    """What isolation a zygote really has (measured at start, not assumed)."""

    mode: str
    network_isolated: bool
    private_uids: bool
    pid_namespace: bool
    readonly_root: bool
    interfaces: tuple[str, ...] = ()
    missing_preloads: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # how a worker's processes together are held to memory_mb: "cgroup" (cgroup v2 memory.max, cpu.max and
    # pids.max on the worker's own cgroup) or "polled" (the supervisor sums their PSS every 50 ms during calls)
    resource_control: str = "polled"
    # what a worker's processes do between calls: "stopped" (SIGSTOP after each call, SIGCONT at the next)
    between_calls: str = "stopped"

    @property
    def isolated(self) -> bool:
        """Whether untrusted code runs isolated (its own namespaces per worker, a minimal read-only view); for
        ``remote``, whether the service says so (``agentflow-env sandbox-server`` does; SandboxFusion says nothing)."""
        if self.mode == "remote":
            return self.network_isolated and self.pid_namespace and self.readonly_root
        return self.mode in ("bwrap", "namespaces")


class WorkerLost(Exception):
    """The worker channel broke: the process died, or it sent something that is not a reply."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.status = status
        self.reason = reason  # "memory": the worker's processes together went past the memory cap


class SandboxUnavailable(ToolError):
    """No isolation works on this machine, and running untrusted code without it was not asked for."""


def _is_root() -> bool:
    return os.geteuid() == 0


def resolve_mode(sandbox: str) -> str:
    """The mode asked for: the constructor's, or ``AGENTFLOW_SANDBOX`` when the constructor says ``auto`` (a mode,
    or ``remote:URL``)."""
    if sandbox == "auto":
        env = os.environ.get(SANDBOX_ENV, "").strip()
        if env.startswith(REMOTE_PREFIX):
            return env
        env = env.lower()
        if env:
            if env not in SANDBOX_MODES:
                raise ToolError(f"{SANDBOX_ENV}={env!r}; choose one of {SANDBOX_MODES}, or '{REMOTE_PREFIX}URL'")
            return env
    return sandbox


def _python_paths() -> list[str]:
    """Directories the interpreter needs to read (``sandbox='none'`` only: it sees the host's files)."""
    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(ZYGOTE_SCRIPT),
    }
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(os.path.realpath(p) for p in paths)


@functools.lru_cache(maxsize=1)
def _bwrap_has_size() -> bool:
    try:
        usage = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in usage


def _make_host_root() -> str:
    root = tempfile.mkdtemp(prefix="agentflow-py-")
    os.chmod(root, 0o755)  # workers with private uids must traverse it to reach their own 0700 folders
    return root


def bwrap_command(steps: list[dict[str, Any]]) -> list[str]:
    """The bubblewrap prefix: no network, own pid/ipc/uts namespaces, the minimal read-only view."""
    exe = shutil.which("bwrap")
    if exe is None:
        raise ToolError("bubblewrap (bwrap) is not installed")
    if not _bwrap_has_size():
        raise ToolError("this bubblewrap is too old (no --size for a capped /tmp); version 0.5 or later is needed")
    cmd = [
        exe,
        "--unshare-net",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",
        *view.bwrap_args(steps),
    ]
    if _is_root():
        for cap in _BWRAP_CAPS:
            cmd += ["--cap-add", cap]
    return cmd + ["--chdir", "/"]


def rootfs_command(mountpoint: str, steps: list[dict[str, Any]]) -> list[str]:
    """The same view without bubblewrap: ``rootfs.py`` unshares and mounts, then execs the zygote."""
    return [view.interpreter(), "-I", "-S", ROOTFS_SCRIPT, mountpoint, json.dumps(steps), "--"]


def _world_traversable(path: str) -> bool:
    """Whether an unprivileged uid can reach and read ``path`` (every parent needs o+x)."""
    p = Path(path).resolve()
    for part in [p, *p.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return bool(p.stat().st_mode & stat.S_IROTH)


def _uid_base(group: int) -> int:
    """A uid range private to this process and zygote: workers of different processes never share a uid."""
    return 100_000 + ((os.getpid() % 1_000_000) * UID_GROUPS + group) * UID_SLOTS


_FREE_GROUPS: list[int] = list(range(UID_GROUPS))


def _take_uid_group() -> int | None:
    with _LOCK_GROUPS:
        return _FREE_GROUPS.pop(0) if _FREE_GROUPS else None


def _give_back_uid_group(group: int | None) -> None:
    if group is not None:
        with _LOCK_GROUPS:
            if group not in _FREE_GROUPS:
                _FREE_GROUPS.append(group)


_LOCK_GROUPS = threading.Lock()


def _zygote_env(tmp: str) -> dict[str, str]:
    # Built from scratch: nothing from the host environment (API keys, tokens) reaches the sandbox.
    return dict(_SCRUBBED_ENV, HOME=tmp, TMPDIR=tmp)


# ------------------------------------------------------------------------------------------------ zygote
class ZygoteProcess:
    """A running zygote and its control channel (SOCK_SEQPACKET, one JSON message per packet)."""

    def __init__(self, sandbox: str = "auto", preload: tuple[str, ...] = ()):
        if sandbox not in SANDBOX_MODES or sandbox == "auto":
            raise ToolError(f"sandbox={sandbox!r}; a zygote runs in one of {SANDBOX_MODES[1:]}")
        self.uid_group: int | None = None
        self.lock = threading.Lock()
        self.owner_pid = os.getpid()
        self.broken = False
        self.host_root: str | None = None  # a host folder for worker dirs (sandbox='none' only)
        self.mountpoint: str | None = None  # an empty host folder rootfs.py mounts on (sandbox='namespaces')
        self.mode = sandbox
        try:
            self._start(sandbox, preload)
        except BaseException:
            self.shutdown()
            raise

    def _start(self, sandbox: str, preload: tuple[str, ...]) -> None:
        cmd, script, config = self._plan(sandbox, preload)
        self.uid_base = config.get("uid_base")
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = host_end
        with tempfile.TemporaryFile() as log:  # unlinked at once: nothing to clean up, readable on failure
            try:
                self.proc = subprocess.Popen(
                    [*cmd, script, str(child_end.fileno()), json.dumps(config)],
                    pass_fds=[child_end.fileno()],
                    env=_zygote_env(config["tmp_root"]),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                    cwd="/",
                )
            finally:
                child_end.close()
            try:
                hello = self._recv(HANDSHAKE_TIMEOUT_S)
            except (WorkerLost, TimeoutError) as exc:
                log.seek(0)
                detail = log.read().decode("utf-8", "replace")[-800:].strip() or "(empty)"
                raise ToolError(
                    f"the Python sandbox ({sandbox}) did not start ({exc}); its log says: {detail}"
                ) from None
        self.vm_kb = int(hello.get("vm_kb", 0))
        net_ok = hello.get("interfaces") in ([], ["lo"])
        isolated = sandbox != "none"
        self.cgroups = open_cgroups() if isolated else None
        self.info = SandboxInfo(
            mode=sandbox,
            network_isolated=net_ok,
            private_uids=self.uid_base is not None,
            pid_namespace=isolated,
            readonly_root=bool(hello.get("readonly_root")),
            interfaces=tuple(hello.get("interfaces", ())),
            missing_preloads=tuple(hello.get("missing", ())),
            notes=() if isolated else ("sandbox='none': trusted code only; it can read and change this machine",),
            resource_control="cgroup" if self.cgroups is not None else "polled",
        )
        if isolated and not (net_ok and self.info.readonly_root):
            raise ToolError(
                f"the {sandbox} sandbox started without full isolation (interfaces {self.info.interfaces}, "
                f"read-only root: {self.info.readonly_root})"
            )

    def _plan(self, sandbox: str, preload: tuple[str, ...]) -> tuple[list[str], str, dict[str, Any]]:
        config: dict[str, Any] = {"preload": list(preload), "max_workers": UID_SLOTS}
        if sandbox in ("bwrap", "namespaces"):
            steps = view.build_view([*view.DEFAULT_PACKAGES, *preload], ZYGOTE_TMP_BYTES)
            if sandbox == "bwrap":
                cmd = bwrap_command(steps)
            else:
                self.mountpoint = tempfile.mkdtemp(prefix="agentflow-root-")
                cmd = rootfs_command(self.mountpoint, steps)
            config.update(tmp_root="/tmp", isolate=True, site=view.SITE_DIR, uid_base=self._uid_range(_is_root()))
            script = f"{view.SANDBOX_DIR}/zygote.py"
            return [*cmd, view.interpreter(), "-I", "-S"], script, config
        uid_ok = _is_root() and all(_world_traversable(p) for p in _python_paths() if os.path.exists(p))
        self.host_root = _make_host_root()
        config.update(
            tmp_root=self.host_root,
            owns_tmp_root=True,  # the zygote removes it when it exits, even if this process dies first
            isolate=False,
            unshare_net=_is_root(),
            uid_base=self._uid_range(uid_ok),
        )
        return [sys.executable, "-I"], ZYGOTE_SCRIPT, config

    def _uid_range(self, wanted: bool) -> int | None:
        if not wanted:
            return None
        self.uid_group = _take_uid_group()
        if self.uid_group is None:
            _warn_once(f"more than {UID_GROUPS} Python sandboxes in one process: the extra ones get no private uids")
            return None
        return _uid_base(self.uid_group)

    # -- control channel
    def _recv(self, timeout: float) -> dict[str, Any]:
        data, fds = self._recv_with_fds(timeout)
        for fd in fds:
            os.close(fd)
        return data

    def _recv_with_fds(self, timeout: float) -> tuple[dict[str, Any], list[int]]:
        ready, _, _ = select.select([self.ctl], [], [], timeout)
        if not ready:
            raise TimeoutError(f"the zygote did not answer within {timeout:g} s")
        try:
            return wire.recv_packet(self.ctl)
        except OSError as exc:
            raise WorkerLost(f"zygote channel failed: {exc}") from None
        except EOFError:
            raise WorkerLost("the zygote exited") from None

    def request(self, msg: dict[str, Any], timeout: float = CONTROL_TIMEOUT_S) -> tuple[dict[str, Any], list[int]]:
        with self.lock:
            if self.broken:
                raise WorkerLost("the zygote is gone")
            try:
                wire.send_packet(self.ctl, msg)
                return self._recv_with_fds(timeout)
            except (OSError, WorkerLost, TimeoutError, ValueError) as exc:
                self.broken = True
                raise WorkerLost(str(exc)) from None

    def alive(self) -> bool:
        return not self.broken and self.proc.poll() is None and os.getpid() == self.owner_pid

    def spawn(self, limits: SandboxLimits) -> Worker:
        reply, fds = self.request({"op": "spawn", "limits": limits.to_wire(self.vm_kb)})
        if not reply.get("ok") or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ToolError(f"could not start a Python worker: {reply.get('error', 'no channel')}")
        worker = Worker(self, int(reply["wid"]), socket.socket(fileno=fds[0]), int(reply.get("ns") or 0))
        if self.cgroups is not None:
            worker.cgroup = self.cgroups.add(worker.wid, worker.ns, limits.memory_mb * 2**20, limits.nproc)
        return worker

    def kill(self, wid: int) -> int | None:
        """Kill a worker and everything it started; returns its wait status when known."""
        if not self.alive():
            return None
        try:
            reply, _ = self.request({"op": "kill", "wid": wid})
        except WorkerLost:
            self.shutdown()
            return None
        if reply.get("left"):
            logger.warning("Python_Coder_Tool: %s processes outlived their worker and were killed", reply["left"])
        if self.cgroups is not None:
            self.cgroups.remove(wid)
        status = reply.get("status")
        return int(status) if status is not None else None

    def shutdown(self) -> None:
        """Close the channel (the zygote kills its workers and exits), then make sure the process tree is gone."""
        if os.getpid() != self.owner_pid:  # a forked copy of the host: the zygote belongs to the original
            return
        self.broken = True
        ctl = getattr(self, "ctl", None)
        if ctl is not None:
            try:
                ctl.close()
            except OSError:
                pass
        proc = getattr(self, "proc", None)
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the zygote is pid 1 of its namespace: all die with it
                except OSError:
                    pass
                proc.wait()
            uid_base = getattr(self, "uid_base", None)
            if uid_base is not None and self.mode == "none":
                _sweep_uid_range(int(uid_base), UID_SLOTS)
        _give_back_uid_group(self.uid_group)
        self.uid_group = None
        cgroups: WorkerCgroups | None = getattr(self, "cgroups", None)
        if cgroups is not None:
            cgroups.close()
            self.cgroups = None
        for folder in (self.host_root, self.mountpoint):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


UNAVAILABLE_RETRY_S = 300.0  # after ``auto`` found no isolation, calls are refused at once for this long
_UNAVAILABLE: dict[tuple[str, ...], tuple[float, str]] = {}


def start_zygote(sandbox: str, preload: tuple[str, ...]) -> ZygoteProcess:
    """Start a zygote in ``sandbox`` mode; ``auto`` tries bubblewrap, then namespaces, and refuses past that."""
    if sandbox != "auto":
        return ZygoteProcess(sandbox, preload)
    known = _UNAVAILABLE.get(preload)
    if known is not None and time.monotonic() - known[0] < UNAVAILABLE_RETRY_S:
        raise SandboxUnavailable(known[1])
    failures = []
    for mode in ("bwrap", "namespaces"):
        try:
            zyg = ZygoteProcess(mode, preload)
        except ToolError as exc:
            failures.append(f"{mode}: {exc}")
            continue
        if failures:
            _warn_once(f"Python_Coder_Tool isolates with {mode}; {'; '.join(failures)}")
        return zyg
    message = (
        "the Python tool refuses to run untrusted code: no isolation works on this machine ("
        + "; ".join(failures)
        + f"). To fix it, {HOW_TO_ISOLATE}."
    )
    _UNAVAILABLE[preload] = (time.monotonic(), message)
    raise SandboxUnavailable(message)


def _sweep_uid_range(base: int, count: int) -> None:
    """Host-side last resort: kill any process left with one of the zygote's worker uids."""
    for _ in range(20):
        left = [pid for pid, (uid, state) in _z._proc_uids().items() if base <= uid < base + count and state != "Z"]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


# ------------------------------------------------------------------------------------------------ workers
class Worker:
    """The host's handle on one forked worker: a stream socket carrying length-prefixed JSON."""

    def __init__(self, zygote: ZygoteProcess, wid: int, sock: socket.socket, ns: int = 0):
        self.zygote = zygote
        self.wid = wid
        self.sock = sock
        self.ns = ns  # the inode of its pid namespace (0: not isolated)
        self.calls = 0
        self.cgroup = False  # its own cgroup v2 with memory.max/cpu.max/pids.max

    def oom_killed(self) -> bool:
        """Whether the kernel killed one of its processes at the cgroup's ``memory.max``."""
        cgroups = getattr(self.zygote, "cgroups", None)
        return bool(self.cgroup and cgroups is not None and cgroups.oom_kills(self.wid))

    def call(self, code: str, timeout: float, limit: int) -> dict[str, Any]:
        """Run one cell. ``TimeoutError`` past ``timeout`` seconds; ``WorkerLost`` if the worker died or lied."""
        self.calls += 1
        deadline = time.monotonic() + timeout
        try:
            self.sock.settimeout(max(timeout, 0.001))
            request = json.dumps({"code": code, "timeout": timeout, "limit": limit}, ensure_ascii=False)
            wire.send_body(
                self.sock,
                wire.CALL_NUMBER.pack(self.calls),
                wire.REQUEST_LIMIT.pack(limit),
                request.encode("utf-8", "replace"),
            )
            body = wire.recv_body(self.sock, wire.CALL_NUMBER.size + wire.reply_byte_limit(limit), deadline)
            (number,) = wire.CALL_NUMBER.unpack_from(body)
            reply = json.loads(body[wire.CALL_NUMBER.size :].decode("utf-8", "replace"))
        except TimeoutError:
            raise TimeoutError(f"no reply within {timeout:g} s") from None
        except (OSError, EOFError, ValueError, struct.error) as exc:
            raise WorkerLost(str(exc)) from None
        if number != self.calls:
            raise WorkerLost("the worker sent something that is not the reply to this call")
        if isinstance(reply, dict) and "died" in reply:
            status, reason = reply["died"], reply.get("reason")
            raise WorkerLost(
                "the Python process died",
                status if isinstance(status, int) else None,
                reason if reason == "memory" else None,
            )
        checked = wire.sanitize_reply(reply, limit)  # the host enforces the caps, whatever the worker says
        if checked is None:
            raise WorkerLost("the worker sent something that is not a reply")
        return checked

    def kill(self) -> int | None:
        try:
            self.sock.close()
        except OSError:
            pass
        return self.zygote.kill(self.wid)


# ------------------------------------------------------------------------------------------------ sharing
_LOCK = threading.Lock()
_ZYGOTES: dict[tuple[str, tuple[str, ...]], ZygoteProcess] = {}
_USERS: dict[tuple[str, tuple[str, ...]], int] = {}
_OWNER = [os.getpid()]
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


def _forget_if_forked() -> None:
    """After os.fork() in the host, the child must not use (or shut down) the parent's zygotes."""
    if _OWNER[0] != os.getpid():
        for zyg in _ZYGOTES.values():
            try:  # only this process's copy of the descriptor: the parent's channel stays open
                zyg.ctl.close()
            except OSError:
                pass
        _ZYGOTES.clear()
        _USERS.clear()
        _FREE_GROUPS[:] = range(UID_GROUPS)
        _OWNER[0] = os.getpid()


def acquire_zygote(key: tuple[str, tuple[str, ...]], register: bool) -> ZygoteProcess:
    """The live shared zygote for ``key`` (started or restarted as needed); ``register`` counts a new user."""
    with _LOCK:
        _forget_if_forked()
        zyg = _ZYGOTES.get(key)
        if zyg is None or not zyg.alive():
            if zyg is not None:
                zyg.shutdown()
            zyg = _ZYGOTES[key] = start_zygote(key[0], key[1])
        if register:
            _USERS[key] = _USERS.get(key, 0) + 1
        return zyg


def current_zygote(key: tuple[str, tuple[str, ...]]) -> ZygoteProcess | None:
    with _LOCK:
        _forget_if_forked()
        return _ZYGOTES.get(key)


def release_zygote(key: tuple[str, tuple[str, ...]]) -> None:
    """One user fewer; the last one out shuts the zygote down so no process outlives the tools."""
    with _LOCK:
        _forget_if_forked()
        left = _USERS.get(key, 0) - 1
        if left > 0:
            _USERS[key] = left
            return
        _USERS.pop(key, None)
        zyg = _ZYGOTES.pop(key, None)
    if zyg is not None:
        zyg.shutdown()


def shutdown_all() -> None:
    """Stop every zygote of this process (registered with ``atexit``)."""
    with _LOCK:
        _forget_if_forked()
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
        _USERS.clear()
    for zyg in zygotes:
        zyg.shutdown()


def _after_fork_in_child() -> None:
    # Fresh locks (another thread may have held them at fork time), and drop the parent's control
    # sockets: a forked child holding one would keep a zygote alive after the parent closed it.
    global _LOCK, _LOCK_GROUPS
    _LOCK, _LOCK_GROUPS = threading.Lock(), threading.Lock()
    _forget_if_forked()


atexit.register(shutdown_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
