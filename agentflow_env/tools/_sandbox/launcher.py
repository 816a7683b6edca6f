"""Host side of the Python sandbox: probes bubblewrap, starts the shared per-process zygote, hands out workers.

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
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.error import ToolError
from agentflow_env.tools._sandbox import zygote as _z

__all__ = [
    "SandboxInfo",
    "SandboxLimits",
    "Worker",
    "WorkerLost",
    "ZygoteProcess",
    "acquire_zygote",
    "probe_bwrap",
    "release_zygote",
    "shutdown_all",
]

logger = logging.getLogger(__name__)

ZYGOTE_SCRIPT = str(Path(_z.__file__).resolve())
SANDBOX_MODES = ("auto", "bwrap", "none")
HANDSHAKE_TIMEOUT_S = 120.0
CONTROL_TIMEOUT_S = 30.0
SANDBOX_TMP_MB = 512  # all workers of one zygote share this much /tmp (memory-backed)
UID_SLOTS = 512  # workers per zygote
UID_GROUPS = 4  # live zygotes per process that get private uids
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


@dataclass(frozen=True)
class SandboxLimits:
    """Per-worker resource limits (the wall timeout is per call and enforced by the host)."""

    memory_mb: int = 1024
    nproc: int = 8
    fsize_mb: int = 64
    nofile: int = 64
    cpu_total_s: int = 3600

    def to_wire(self, zygote_vm_kb: int) -> dict[str, int]:
        # RLIMIT_AS counts address space, and the preloaded zygote already maps a lot of it: add the budget on top
        return {
            "as_bytes": zygote_vm_kb * 1024 + self.memory_mb * 2**20,
            "fsize_bytes": self.fsize_mb * 2**20,
            "nofile": self.nofile,
            "nproc": self.nproc,
            "cpu_total_s": self.cpu_total_s,
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


class WorkerLost(Exception):
    """The worker channel broke: the process died, or it sent something that is not a reply."""


# ------------------------------------------------------------------------------------------------ bubblewrap
def _is_root() -> bool:
    return os.geteuid() == 0


def _python_paths() -> list[str]:
    """Directories the interpreter needs to read inside the sandbox."""
    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(ZYGOTE_SCRIPT),
    }
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(os.path.realpath(p) for p in paths)


def _others_can_enter(path: str) -> bool:
    """Whether a uid that is neither owner nor group can list and enter ``path`` (mode o+rx)."""
    try:
        return os.stat(path).st_mode & 0o005 == 0o005
    except OSError:
        return False


def _hidden_dirs() -> list[str]:
    """Home directories are masked with an empty tmpfs (secrets live there); needed paths are bound back."""
    dirs = {"/root", "/home", os.path.expanduser("~")}
    return sorted(d for d in dirs if d not in ("/", "") and os.path.isdir(d))


@functools.lru_cache(maxsize=1)
def _bwrap_has_size() -> bool:
    try:
        usage = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in usage


def _private_tmp(host_root: str | None) -> list[str]:
    """/tmp in the sandbox: a size-capped tmpfs (so no snippet can fill the host disk), or a host folder."""
    if host_root is None:
        return ["--perms", "0755", "--size", str(SANDBOX_TMP_MB * 2**20), "--tmpfs", "/tmp"]
    return ["--bind", host_root, "/tmp"]


def _make_host_root() -> str:
    root = tempfile.mkdtemp(prefix="agentflow-py-")
    os.chmod(root, 0o755)  # workers with private uids must traverse it to reach their own 0700 folders
    return root


def bwrap_command(host_root: str | None, uid_drop: bool) -> list[str]:
    """The bubblewrap prefix: no network, own pid/ipc/uts namespaces, read-only root, private /tmp."""
    exe = shutil.which("bwrap")
    if exe is None:
        raise ToolError("bubblewrap is not installed (apt-get install bubblewrap)")
    cmd = [
        exe,
        "--unshare-net",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--unshare-uts",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        *_private_tmp(host_root),
    ]
    hidden = _hidden_dirs()
    for d in hidden:
        cmd += ["--perms", "0755", "--tmpfs", d]
    bound: list[str] = []
    made: set[str] = set()
    # /tmp is private too: an interpreter or venv that lives there (a CI checkout) is bound back in
    masked = [*hidden, "/tmp"]
    for p in _python_paths():  # sorted, so a parent comes before its children
        top = next((d for d in masked if p.startswith(d + "/")), None)
        if top is None or any(p == b or p.startswith(b + "/") for b in bound):
            continue
        if uid_drop and not _others_can_enter(p):
            # e.g. a 0700 checkout from mktemp on sys.path: bound whole, it would hide the readable
            # venv inside it from the dropped uids; its needed children are bound on their own
            continue
        # bwrap would create the missing parents with mode 0700, which a dropped uid cannot traverse
        for parent in reversed(Path(p).parents):
            s = str(parent)
            if s.startswith(top + "/") and s not in made:
                made.add(s)
                cmd += ["--perms", "0755", "--dir", s]
        cmd += ["--ro-bind", p, p]
        bound.append(p)
    if uid_drop:
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"):
            cmd += ["--cap-add", cap]
    return cmd + ["--chdir", "/tmp"]


_PROBE = r"""
import json, os, socket, sys
names = sorted(n for _, n in socket.if_nameindex())
readonly = True
try:
    open("/agentflow-probe-write", "w").close()
    readonly = False
    os.unlink("/agentflow-probe-write")
except OSError:
    pass
uid_ok = None
if os.geteuid() == 0:
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([]); os.setgid(UID); os.setuid(UID)
            import csv, decimal
            for p in sys.path:
                if os.path.isdir(p):
                    os.listdir(p)
            os._exit(0)
        except BaseException:
            os._exit(1)
    uid_ok = os.waitpid(pid, 0)[1] == 0
print(json.dumps({"interfaces": names, "readonly": readonly, "uid_ok": uid_ok, "pid": os.getpid()}))
"""


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> tuple[bool, str, bool]:
    """Run a tiny program under the real bubblewrap command: (works, why-not, private uids work)."""
    if shutil.which("bwrap") is None:
        return False, "bubblewrap (bwrap) is not installed; install the Debian package 'bubblewrap'", False
    host_root = None if _bwrap_has_size() else _make_host_root()
    try:
        uid_drop = _is_root()
        cmd = [
            *bwrap_command(host_root, uid_drop),
            sys.executable,
            "-I",
            "-c",
            _PROBE.replace("UID", str(_uid_base(UID_GROUPS - 1) + UID_SLOTS - 1)),
        ]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=60, env=_zygote_env("/tmp"), stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"bwrap could not run: {exc}", False
        if proc.returncode != 0:
            return False, f"bwrap exited with {proc.returncode}: {proc.stderr.strip()[-300:]}", False
        try:
            facts = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return False, f"bwrap probe printed no report: {proc.stdout[-200:]!r} {proc.stderr[-200:]!r}", False
        if facts["interfaces"] not in ([], ["lo"]):
            return False, f"bwrap ran but the network is visible: interfaces {facts['interfaces']}", False
        if not facts["readonly"]:
            return False, "bwrap ran but the root filesystem is writable", False
        return True, "", bool(facts.get("uid_ok"))
    finally:
        if host_root is not None:
            shutil.rmtree(host_root, ignore_errors=True)


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
        if sandbox not in SANDBOX_MODES:
            raise ToolError(f"sandbox={sandbox!r}; choose one of {SANDBOX_MODES}")
        self.uid_group: int | None = None
        self.lock = threading.Lock()
        self.owner_pid = os.getpid()
        self.broken = False
        self.host_root: str | None = None  # a host folder for worker dirs, only when no tmpfs /tmp is possible
        self.info, cmd, config = self._plan(sandbox, preload)
        self.uid_base = config.get("uid_base")
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = host_end
        with tempfile.TemporaryFile() as log:  # unlinked at once: nothing to clean up, readable on failure
            try:
                self.proc = subprocess.Popen(
                    [*cmd, sys.executable, "-I", ZYGOTE_SCRIPT, str(child_end.fileno()), json.dumps(config)],
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
                self.shutdown()
                log.seek(0)
                detail = log.read().decode("utf-8", "replace")[-800:] or "(empty)"
                raise ToolError(f"the Python sandbox did not start ({exc}); its log says: {detail}") from None
        self.vm_kb = int(hello.get("vm_kb", 0))
        net_ok = hello.get("interfaces") in ([], ["lo"])
        self.info = SandboxInfo(
            mode=self.info.mode,
            network_isolated=net_ok,
            private_uids=self.uid_base is not None,
            pid_namespace=self.info.pid_namespace,
            readonly_root=self.info.readonly_root,
            interfaces=tuple(hello.get("interfaces", ())),
            missing_preloads=tuple(hello.get("missing", ())),
            notes=self.info.notes,
        )
        if not net_ok:
            logger.warning(
                "Python_Coder_Tool: the sandbox has network access (interfaces %s); %s",
                self.info.interfaces,
                "; ".join(self.info.notes) or "bubblewrap is not in use",
            )

    def _plan(self, sandbox: str, preload: tuple[str, ...]) -> tuple[SandboxInfo, list[str], dict[str, Any]]:
        config: dict[str, Any] = {"preload": list(preload), "max_workers": UID_SLOTS}
        if sandbox != "none":
            works, why, uid_ok = probe_bwrap()
            if works:
                if not _bwrap_has_size():
                    self.host_root = _make_host_root()
                config.update(tmp_root="/tmp", pid_namespace=True, uid_base=self._uid_range(uid_ok))
                info = SandboxInfo("bwrap", True, uid_ok, True, True)
                return info, bwrap_command(self.host_root, uid_ok), config
            if sandbox == "bwrap":
                raise ToolError(f"sandbox='bwrap' was asked for but bubblewrap does not work here: {why}")
            _warn_once(f"Python_Coder_Tool runs without bubblewrap ({why}); falling back to rlimits")
        uid_ok = _is_root() and all(_world_traversable(p) for p in _python_paths() if os.path.exists(p))
        notes: tuple[str, ...] = ()
        if _is_root() and not uid_ok:
            notes = ("workers run as root: the interpreter is not readable by other uids, so there is no uid drop",)
            _warn_once(f"Python_Coder_Tool: {notes[0]}; install bubblewrap for real isolation")
        self.host_root = _make_host_root()
        config.update(
            tmp_root=self.host_root,
            owns_tmp_root=True,  # the zygote removes it when it exits, even if this process dies first
            pid_namespace=False,
            unshare_net=_is_root(),
            uid_base=self._uid_range(uid_ok),
        )
        return SandboxInfo("none", False, uid_ok, False, False, notes=notes), [], config

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
            data, fds, _flags, _addr = socket.recv_fds(self.ctl, _z.MAX_CONTROL_PACKET, 1)
        except OSError as exc:
            raise WorkerLost(f"zygote channel failed: {exc}") from None
        if not data:
            raise WorkerLost("the zygote exited")
        return json.loads(data), list(fds)

    def request(self, msg: dict[str, Any], timeout: float = CONTROL_TIMEOUT_S) -> tuple[dict[str, Any], list[int]]:
        with self.lock:
            if self.broken:
                raise WorkerLost("the zygote is gone")
            try:
                self.ctl.send(json.dumps(msg).encode())
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
        return Worker(self, int(reply["wid"]), socket.socket(fileno=fds[0]))

    def kill(self, wid: int) -> int | None:
        """Kill a worker and everything it started; returns its wait status when known."""
        if not self.alive():
            return None
        try:
            reply, _ = self.request({"op": "kill", "wid": wid})
        except WorkerLost:
            self.shutdown()
            return None
        status = reply.get("status")
        return int(status) if status is not None else None

    def shutdown(self) -> None:
        """Close the channel (the zygote kills its workers and exits), then make sure the process tree is gone."""
        if os.getpid() != self.owner_pid:  # a forked copy of the host: the zygote belongs to the original
            return
        self.broken = True
        try:
            self.ctl.close()
        except OSError:
            pass
        proc = getattr(self, "proc", None)
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # bwrap's pid-1 dies with it, and the namespace with that
                except OSError:
                    pass
                proc.wait()
            if self.uid_base is not None and not self.info.pid_namespace:
                _sweep_uid_range(self.uid_base, UID_SLOTS)
        _give_back_uid_group(self.uid_group)
        self.uid_group = None
        if self.host_root is not None:
            shutil.rmtree(self.host_root, ignore_errors=True)


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

    def __init__(self, zygote: ZygoteProcess, wid: int, sock: socket.socket):
        self.zygote = zygote
        self.wid = wid
        self.sock = sock
        self.calls = 0

    def call(self, code: str, timeout: float, limit: int) -> dict[str, Any]:
        """Run one cell. ``TimeoutError`` past ``timeout`` seconds; ``WorkerLost`` if the worker died or lied."""
        self.calls += 1
        deadline = time.monotonic() + timeout
        try:
            self.sock.settimeout(max(timeout, 0.001))
            _z.send_frame(self.sock, {"n": self.calls, "code": code, "timeout": timeout, "limit": limit})
            reply = _z.recv_frame(self.sock, 6 * (limit + 2 * _z.TRACEBACK_CHARS) + 65536, deadline)  # \uXXXX: 6 B
        except TimeoutError:
            raise TimeoutError(f"no reply within {timeout:g} s") from None
        except (OSError, EOFError, ValueError) as exc:
            raise WorkerLost(str(exc)) from None
        if not isinstance(reply, dict) or reply.get("n") != self.calls or not isinstance(reply.get("output"), str):
            raise WorkerLost("the worker sent something that is not the reply to this call")
        return reply

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
            zyg = _ZYGOTES[key] = ZygoteProcess(key[0], key[1])
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
