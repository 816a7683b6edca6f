"""The fork server that runs inside the sandbox: it preloads numpy/sympy once and forks one worker per request.

Run as a script (``python -I -S zygote.py CTL_FD CONFIG_JSON``); it imports nothing from agentflow_env, only
``wire`` (the frames it exchanges with the host, shared with ``launcher``) and ``nslib`` from its own folder.
The host imports this module without running it (``tools/python/wire.py`` reads the kernel's cell functions).
"""

from __future__ import annotations

import ast
import builtins
import collections
import fcntl
import gc
import importlib
import io
import json
import linecache
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any


def _sibling(name: str) -> Any:
    """A standalone module of this folder: the package's when the host imports this file, the plain file when it
    runs as a script (inside the sandbox there is no package, and ``-I`` leaves the script's folder off the path)."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(here)


if TYPE_CHECKING:
    from agentflow_env.tools.python.sandbox import nslib, wire
else:
    wire, nslib = _sibling("wire"), _sibling("nslib")

CELL = "<cell>"
TRACEBACK_LINES = 12
TRACEBACK_CHARS = wire.TRACEBACK_CHARS  # a reply's cap, which the kernel cuts tracebacks to

# Pure-Python and C modules a math/data snippet usually needs; importing them here makes them free in workers.
PRELOAD = (
    "math",
    "cmath",
    "fractions",
    "decimal",
    "itertools",
    "functools",
    "collections",
    "re",
    "random",
    "statistics",
    "string",
    "json",
    "datetime",
    "heapq",
    "bisect",
    "operator",
    "copy",
    "textwrap",
    "unicodedata",
    "typing",
    "dataclasses",
    "numpy",
    "sympy",
)


def clean_text(text: str) -> str:
    """Replace lone surrogates and other unencodable code points so the text is valid UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


# ---------------------------------------------------------------------------------------------------- cells
class CappedStream(io.TextIOBase):
    """A text sink that keeps the first ``limit`` characters and counts the rest (stdout and stderr share it)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def write(self, s: str) -> int:  # type: ignore[override]
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        room = self.limit - self.kept
        if room > 0:
            piece = s[:room]
            self.parts.append(piece)
            self.kept += len(piece)
            self.dropped += len(s) - len(piece)
        else:
            self.dropped += len(s)
        return len(s)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def text(self) -> str:
        return "".join(self.parts)


def _compile_cell(code: str) -> tuple[Any, Any]:
    """Compile a cell: every statement, then the trailing expression (if any) separately so its value is shown."""
    tree = ast.parse(code, CELL, "exec")
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = ast.Expression(final.value)
    body = compile(tree, CELL, "exec")
    tail = compile(last, CELL, "eval") if last is not None else None
    return body, tail


def _format_error(exc: BaseException) -> str:
    """The last lines of the traceback, with the worker's own frames dropped."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != CELL:
        tb = tb.tb_next
    lines = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n").split("\n")
    if len(lines) > TRACEBACK_LINES:
        lines = ["Traceback (most recent call last, earlier lines cut):", *lines[-TRACEBACK_LINES + 1 :]]
    text = "\n".join(lines)
    return text if len(text) <= TRACEBACK_CHARS else "..." + text[-TRACEBACK_CHARS:]


_PRISTINE_BUILTINS = dict(builtins.__dict__)


def _restore_builtins() -> None:
    """Undo ``builtins.print = None`` and the like, so one cell cannot break the next."""
    current = builtins.__dict__
    if current != _PRISTINE_BUILTINS:
        current.clear()
        current.update(_PRISTINE_BUILTINS)


def run_cell(code: str, limit: int) -> dict[str, Any]:
    """Run ``code`` in fresh globals; returns printed output, the trailing value's repr, and any error."""
    stream = CappedStream(limit)
    saved = (sys.stdout, sys.stderr, sys.stdin, sys.getrecursionlimit(), os.getcwd())
    linecache.cache[CELL] = (len(code), None, code.splitlines(True), CELL)
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    error = exc_name = None
    sys.stdout = sys.stderr = stream
    sys.stdin = io.StringIO("")
    try:
        body, tail = _compile_cell(code)
        exec(body, scope)
        if tail is not None:
            value = eval(tail, scope)
            if value is not None:
                stream.write(repr(value) + "\n")
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are the user's, not ours
        exc_name = type(exc).__name__
        try:
            error = _format_error(exc)
        except BaseException as inner:  # a hostile __str__ must not kill the worker
            error = f"{exc_name} (its message could not be shown: {type(inner).__name__})"
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved[0], saved[1], saved[2]
        sys.settrace(None)
        sys.setprofile(None)
        _restore_builtins()
        sys.setrecursionlimit(saved[3])
        try:
            os.chdir(saved[4])
        except OSError:
            pass
    return {"output": stream.text(), "dropped": stream.dropped, "error": error, "exc": exc_name}


# ---------------------------------------------------------------------------------------------------- worker
# A worker is three processes, forked from the zygote:
#   keeper      outside the worker's namespaces; waits for the supervisor and reports its wait status;
#   supervisor  pid 1 of the worker's pid namespace; owns the host channel and never runs user code;
#   kernel      runs the cells (a child of the supervisor, under seccomp, rlimits, no capabilities).
# Killing the supervisor makes the kernel kill every process of the pid namespace; the keeper's report tells
# the zygote when that is done. The kernel reaches the host only through the supervisor, which answers each
# request once, with the reply that carries that request's one-time token (the host checks and caps it).
class _FdOutput:
    """Output written to file descriptors 1 and 2 (subprocesses, C code) lands in a memfd that is drained per call."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("cell-output", 0)
        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) | os.O_APPEND)
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)

    def drain(self, limit: int) -> tuple[str, int]:
        try:
            size = os.fstat(self.fd).st_size
            if size == 0:
                return "", 0
            data = os.pread(self.fd, limit * 4, 0)
            os.ftruncate(self.fd, 0)
        except OSError:
            return "", 0
        text = data.decode("utf-8", "replace")[:limit]
        return text, max(size - len(text.encode("utf-8", "replace")), 0)


def _set_limits(limits: dict[str, Any]) -> None:
    def cap(which: int, value: int) -> None:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            soft, hard = resource.getrlimit(which)
            resource.setrlimit(which, (min(value, hard) if hard != resource.RLIM_INFINITY else value, hard))

    cap(resource.RLIMIT_AS, int(limits["as_bytes"]))
    cap(resource.RLIMIT_FSIZE, int(limits["fsize_bytes"]))
    cap(resource.RLIMIT_NOFILE, int(limits["nofile"]))
    cap(resource.RLIMIT_NPROC, int(limits["nproc"]))
    cap(resource.RLIMIT_CORE, 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    total = int(limits["cpu_total_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (total, total if hard == resource.RLIM_INFINITY else min(total, hard)))


def _cpu_budget(seconds: float) -> None:
    """Per call: the soft CPU limit is what was used so far plus this call's budget (SIGXCPU past it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    want = int(usage.ru_utime + usage.ru_stime + seconds) + 2
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
    except (ValueError, OSError):
        pass


def _drop_privileges(uid: int | None) -> None:
    """A private uid when the zygote is root (which also clears every capability), else no capabilities."""
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    try:
        nslib.drop_capabilities()
    except OSError:
        pass
    nslib.prctl(nslib.PR_SET_NO_NEW_PRIVS, 1)


def _keep_only_fds(keep: list[int]) -> None:
    lo = 3
    for fd in sorted(set(keep)):
        if fd >= lo:
            os.closerange(lo, fd)
            lo = fd + 1
    os.closerange(lo, 65536)


def _become_kernel(sock: socket.socket, wdir: str, uid: int | None, limits: dict[str, Any]) -> _FdOutput:
    parent = os.getppid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    _drop_privileges(uid)
    nslib.prctl(nslib.PR_SET_DUMPABLE, 1)  # a uid change cleared it: the supervisor must read the cells' /proc
    nslib.prctl(nslib.PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(0)  # the supervisor died between fork and prctl
    if nslib.seccomp_program() is None:
        print("warning: no seccomp filter on this architecture", file=sys.__stderr__)
    os.chdir(wdir)
    out = _FdOutput()  # its memfd first: the filter forbids new ones
    _keep_only_fds([sock.fileno(), out.fd])
    nslib.install_seccomp()
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write gets EFBIG instead of killing the worker
    os.environ["HOME"] = os.environ["TMPDIR"] = wdir
    import tempfile

    tempfile.tempdir = wdir
    _set_limits(limits)
    return out


def kernel_main(sock: socket.socket, wdir: str, uid: int | None, limits: dict[str, Any]) -> None:
    """Run cells for the supervisor until it closes the channel. Never returns normally (``os._exit``)."""
    out = _become_kernel(sock, wdir, uid, limits)
    # bind what the loop needs now, so a cell that rebinds module attributes cannot break the protocol
    recv, send, run, drain, budget, exit_ = wire.recv_body, wire.send_body, run_cell, out.drain, _cpu_budget, os._exit
    loads, dumps, token_bytes, blocking = json.loads, json.dumps, wire.TOKEN_BYTES, sock.setblocking
    reap = not limits.get("keep_background")  # with background processes kept, their statuses are the cells'
    # Ready, in the background of a pre-forked worker: one empty cell first pages in the compile/exec/output path
    # (the fork shares the zygote's pages copy-on-write), then the supervisor hears that the kernel is idle and
    # measures its memory baseline, so an episode's first call pays for neither.
    run("None", 64)
    drain(64)
    try:
        send(sock, wire.KERNEL_READY)
    except BaseException:
        exit_(0)
    while True:
        try:
            try:
                body = recv(sock, 1 << 26)
            except (BlockingIOError, TimeoutError, InterruptedError):  # a cell made its channel non-blocking
                blocking(True)
                body = recv(sock, 1 << 26)
            token, req = body[:token_bytes], loads(body[token_bytes:])
        except BaseException:  # EOF or garbage: the supervisor is gone; leave
            exit_(0)
        if reap:
            _reap_children()  # the cell's children were killed after the last call: no zombies count as processes
        budget(float(req.get("timeout", 30.0)))
        limit = int(req.get("limit", 8000))
        reply = run(str(req.get("code", "")), limit)
        extra, extra_dropped = drain(limit)
        if extra:  # output of child processes and C code first, then Python's; one cap for both
            both = extra + reply["output"]
            reply["output"] = both[:limit]
            reply["dropped"] += extra_dropped + len(both) - len(reply["output"])
        reply["output"] = clean_text(reply["output"])
        if reply["error"] is not None:
            reply["error"] = clean_text(reply["error"])
        try:
            send(sock, token, dumps(reply, ensure_ascii=False).encode())
        except BaseException:
            exit_(0)


def _reap_children() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return
        except OSError:
            return


def _mount_worker_fs(tmp_bytes: int, uid: int) -> None:
    """The worker's own /proc (its pid namespace), and its own size-capped /tmp, also behind /dev/shm."""
    flags = nslib.MS_NOSUID | nslib.MS_NODEV
    try:
        nslib.mount("proc", "/proc", "proc", flags | nslib.MS_NOEXEC)
    except OSError:  # a partly hidden parent /proc forbids a fresh one in a user namespace: hide it instead
        nslib.mount("tmpfs", "/proc", "tmpfs", flags, "mode=0555,size=4096")
    nslib.mount("tmpfs", "/tmp", "tmpfs", flags, f"size={int(tmp_bytes)},mode=0700,uid={uid},gid={uid}")
    if os.path.isdir("/dev/shm"):
        nslib.mount("/tmp", "/dev/shm", None, nslib.MS_BIND)
    _cap_sysv_ipc(tmp_bytes)


def _cap_sysv_ipc(tmp_bytes: int) -> None:
    """SysV shared memory and message queues of the worker's IPC namespace: at most /tmp's size in all.

    Pages of a detached segment belong to no process, so the tree's memory cap would not see them.
    """
    pages = max(int(tmp_bytes) // 4096, 1)
    for name, value in (("shmmax", pages * 4096), ("shmall", pages), ("shmmni", 64), ("msgmni", 16)):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as fh:
                fh.write(str(value))
        except OSError:  # not ours to set here (e.g. no /proc): the namespace still dies with the worker
            pass
    try:  # and nobody changes them back: the namespace's root uid may write these files without capabilities
        nslib.mount("/proc/sys", "/proc/sys", None, nslib.MS_BIND | nslib.MS_REC)
        flags = nslib.MS_REMOUNT | nslib.MS_BIND | nslib.MS_RDONLY | nslib.MS_NOSUID | nslib.MS_NODEV
        nslib.mount(None, "/proc/sys", None, flags | nslib.MS_NOEXEC)
    except OSError:
        pass


def _reap_orphans(kernel: int, kernel_status: int | None) -> int | None:
    """pid 1 inherits the cells' orphans: reap them, or their zombies use up the process limit."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return kernel_status
        if pid == 0:
            return kernel_status
        if pid == kernel:
            kernel_status = status


class TreeMemory:
    """The memory of every process in the worker's pid namespace (PSS: shared pages counted once), against a cap.

    The supervisor polls it while a cell runs: RLIMIT_AS bounds each process, this bounds their sum, to within
    what the processes can allocate between two polls.
    """

    POLL_S = 0.05

    def __init__(self, cap_bytes: int):
        self.cap_bytes = cap_bytes
        self.baseline: int | None = None

    @staticmethod
    def used() -> int:
        return sum(TreeMemory.pss(entry) for entry in os.listdir("/proc") if entry.isdigit())

    @staticmethod
    def pss(pid: int | str) -> int:
        """One process's proportional set size in bytes (0 when it is gone); reading it walks its page tables."""
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Pss:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def over(self) -> bool:
        return self.baseline is not None and self.used() - self.baseline > self.cap_bytes


def _recv_watching(sock: socket.socket, limit: int, memory: TreeMemory | None) -> bytes | str:
    """``recv_body``, checking the memory cap whenever the socket's receive timeout (SO_RCVTIMEO) expires."""
    buf = bytearray()
    need = wire.HEADER.size
    size = None
    while len(buf) < need:
        try:
            chunk = sock.recv(need - len(buf))
        except (BlockingIOError, InterruptedError):  # the kernel-level timeout: no extra syscall per call
            if memory is not None and memory.over():
                return "memory"
            continue
        if not chunk:
            raise EOFError("peer closed the channel")
        buf += chunk
        if size is None and len(buf) >= wire.HEADER.size:
            (size,) = wire.HEADER.unpack_from(buf)
            if size > limit:
                raise ValueError(f"message of {size} bytes exceeds the limit of {limit}")
            need = wire.HEADER.size + size
    return bytes(buf[wire.HEADER.size :])


def _relay(mine: socket.socket, body: bytes, limit: int, memory: TreeMemory | None) -> bytes | str | None:
    """Pass one request to the kernel; its reply (JSON bytes, not parsed here), ``"memory"`` when the worker's
    processes went past the memory cap, or ``None`` if the kernel broke the protocol or died. Only the reply that
    carries this request's one-time token counts."""
    token = os.urandom(wire.TOKEN_BYTES)
    try:
        wire.send_body(mine, token, body)
        for _ in range(64):  # stale frames the cell wrote into its channel are skipped
            reply = _recv_watching(mine, wire.TOKEN_BYTES + wire.reply_byte_limit(limit), memory)
            if isinstance(reply, str) or reply[: wire.TOKEN_BYTES] == token:
                return reply if isinstance(reply, str) else reply[wire.TOKEN_BYTES :]
    except (OSError, EOFError, ValueError):
        pass
    return None


def _fork_kernel(host: socket.socket, uid: int | None, limits: dict[str, Any], wdir: str) -> tuple[int, socket.socket]:
    """Start the kernel process; returns its pid and the supervisor's end of their channel."""
    mine, theirs = socket.socketpair()
    kernel = os.fork()
    if kernel == 0:
        code = 70
        try:
            host.close()
            mine.close()
            kernel_main(theirs, wdir, uid, limits)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    theirs.close()
    return kernel, mine


class CellProcesses:
    """The processes a worker's cells started, found from the supervisor, and what happens to them between calls.

    After each call the supervisor kills every process but itself and the kernel (unless ``keep_background``),
    then stops (SIGSTOP) the kernel and whatever was kept; the next request continues them (SIGCONT). So between
    calls nothing of a worker runs or grows: no CPU, no new memory, whatever threads or children a cell left.
    With its own pid namespace the supervisor is pid 1 and /proc lists exactly the worker's processes; without
    one the supervisor is a child subreaper and walks its descendants.
    """

    ROUNDS = 200  # stop passes: each stops all it sees; a fork chain is bounded by RLIMIT_NPROC
    WAIT_S = 5.0  # killing: until every process is gone (a killed process takes a moment to exit)

    def __init__(self, kernel: int, isolated: bool, keep_background: bool):
        self.kernel = kernel
        self.isolated = isolated
        self.keep_background = keep_background
        self.stopped: list[int] = []
        self.me = os.getpid()

    def others(self) -> list[int]:
        """Live processes of the worker other than the supervisor and the kernel."""
        if self.isolated:
            pids = [int(e) for e in os.listdir("/proc") if e.isdigit()]
        else:
            pids = _tree_below(self.me)
        return [p for p in pids if p not in (self.me, self.kernel) and not _is_zombie(p)]

    def settle(self) -> None:
        """After a call: kill the cell's processes (or keep them) and stop everything that is left."""
        _signal(self.kernel, signal.SIGSTOP)
        if self.keep_background:
            for _ in range(self.ROUNDS):
                new = [p for p in self.others() if p not in self.stopped]
                if not new:
                    break
                for p in new:
                    _signal(p, signal.SIGSTOP)
                self.stopped += new
        else:
            killed: set[int] = set()
            deadline = time.monotonic() + self.WAIT_S
            while time.monotonic() < deadline:
                left = self.others()
                if not left:
                    break
                new = [p for p in left if p not in killed]
                for p in new:
                    _signal(p, signal.SIGSTOP)  # a stopped process forks no more; SIGKILL still ends it
                for p in new:
                    _signal(p, signal.SIGKILL)
                killed.update(new)
                _reap_orphans(self.kernel, None)
                if not new:
                    time.sleep(0.0005)  # all killed, some still exiting (freeing their memory)
        self.stopped.append(self.kernel)

    def thaw(self) -> None:
        """Before a call: continue the kernel and the processes kept from earlier calls."""
        for p in self.stopped:
            _signal(p, signal.SIGCONT)
        self.stopped = []


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # gone


def _tree_below(root: int) -> list[int]:
    """Every descendant of ``root``, by the kernel's per-thread children lists (falls back to a /proc scan)."""
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN
                return [p for p in _descendants(root) if p != root]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


def _stop_kernel(kernel: int, kernel_status: int | None, everything: bool) -> int | None:
    """Kill the kernel (``everything``: every process of the namespace but this pid 1); its wait status."""
    try:
        os.kill(-1 if everything else kernel, signal.SIGKILL)
    except OSError:
        pass
    if kernel_status is None:
        try:
            kernel_status = os.waitpid(kernel, 0)[1]
        except ChildProcessError:
            pass
    return kernel_status


def supervisor_main(host: socket.socket, uid: int | None, limits: dict[str, Any], wdir: str, isolate: bool) -> None:
    """pid 1 of the worker: set up its filesystem, fork the kernel, then relay requests and replies."""
    if isolate:
        _mount_worker_fs(int(limits["tmp_bytes"]), os.geteuid() if uid is None else uid)
    os.setsid()
    if not isolate:  # orphans of the cells become ours, not the zygote's: they are found and killed after a call
        nslib.prctl(nslib.PR_SET_CHILD_SUBREAPER, 1)
    kernel, mine = _fork_kernel(host, uid, limits, wdir)
    keeper = os.getppid()
    _drop_privileges(uid)
    nslib.prctl(nslib.PR_SET_PDEATHSIG, int(signal.SIGKILL))  # again: a uid change clears it
    if os.getppid() != keeper:
        os._exit(0)
    nslib.prctl(nslib.PR_SET_DUMPABLE, 0)  # no ptrace, no /proc/<pid>/fd or mem for the kernel's uid
    _keep_only_fds([host.fileno(), mine.fileno(), 2])
    kernel_status: int | None = None
    cells = CellProcesses(kernel, isolate, bool(limits.get("keep_background")))
    # only with its own pid namespace (and /proc) does /proc list exactly the worker's processes
    memory = TreeMemory(int(limits["tree_bytes"])) if isolate and os.path.exists("/proc/self/smaps_rollup") else None
    # The baseline: the idle supervisor and kernel, the only processes of the namespace yet. This one's share is
    # measured while the kernel sets itself up, the kernel's once it says it is idle: a spare forked during an
    # episode has both before its first call; a worker wanted at once waits for the kernel's share only.
    own = TreeMemory.pss("self") if memory is not None else 0
    try:
        if (
            wire.recv_body(mine, len(wire.KERNEL_READY), time.monotonic() + 60) == wire.KERNEL_READY
            and memory is not None
        ):
            memory.baseline = own + TreeMemory.pss(kernel)
    except (OSError, EOFError, ValueError):
        pass  # the kernel died setting up: the first request finds out
    mine.settimeout(None)
    if memory is not None:
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, int(memory.POLL_S * 1e6)))
    while True:  # any exit kills the pid namespace, kernel and all, with this process
        try:
            head = wire.recv_body(host, 1 << 26)
            number, (limit,), body = (
                head[:8],
                wire.REQUEST_LIMIT.unpack_from(head, 8),
                head[8 + wire.REQUEST_LIMIT.size :],
            )
        except BaseException:
            os._exit(0)
        cells.thaw()
        kernel_status = _reap_orphans(kernel, kernel_status)
        if memory is not None and memory.baseline is None:  # the kernel never said it was ready
            memory.baseline = memory.used()
        answer = _relay(mine, body, limit, memory) if kernel_status is None else None
        if isinstance(answer, bytes):
            cells.settle()  # before the reply: when the host hears back, the cell's processes are gone or stopped
        else:
            kernel_status = _stop_kernel(kernel, kernel_status, everything=memory is not None)
            answer = json.dumps({"died": kernel_status, "reason": answer}).encode()
        try:
            wire.send_body(host, number, answer)
        except BaseException:
            os._exit(0)
        if kernel_status is not None:
            os._exit(0)


def keeper_main(host: socket.socket, report: int, uid: int | None, limits: dict[str, Any], config: dict) -> None:
    """New namespaces for the worker, then fork its supervisor (their pid 1) and wait for it."""
    parent = os.getppid()
    nslib.prctl(nslib.PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(0)
    isolate = bool(config.get("isolate"))
    if isolate:
        flags = nslib.CLONE_NEWNS | nslib.CLONE_NEWPID | nslib.CLONE_NEWNET | nslib.CLONE_NEWIPC | nslib.CLONE_NEWUTS
        try:
            nslib.unshare(flags)
        except PermissionError:  # no CAP_SYS_ADMIN here: a user namespace gives the worker its own
            euid, egid = os.geteuid(), os.getegid()
            nslib.unshare(flags | nslib.CLONE_NEWUSER)
            # our uid is the namespace's root: only that uid may set its IPC limits (the capabilities go later)
            nslib.write_id_maps("self", 0, euid, egid)
        nslib.mount(None, "/", None, nslib.MS_REC | nslib.MS_PRIVATE)
    wdir = "/tmp" if isolate else str(config["wdir"])
    ns_r, ns_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(report)
            os.close(ns_r)
            nslib.prctl(nslib.PR_SET_PDEATHSIG, int(signal.SIGKILL))
            os.write(ns_w, str(os.stat("/proc/self/ns/pid").st_ino).encode())  # still the zygote's /proc here
            os.close(ns_w)
            supervisor_main(host, uid, limits, wdir, isolate)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    host.close()
    os.close(ns_w)
    with os.fdopen(ns_r, "rb") as fh:
        ns_id = int(fh.read() or 0)
    os.write(report, f"{pid} {ns_id}\n".encode())
    _, status = os.waitpid(pid, 0)
    os.write(report, f"{status}\n".encode())
    # Stay until the zygote kills us: a live (or unreaped) keeper keeps its pid from being reused while the
    # zygote may still signal it, and its hold on the worker's pid namespace keeps that namespace's inode
    # number from going to a new namespace (inode numbers are reused at once) before the survivors check.
    while True:
        signal.pause()


# ---------------------------------------------------------------------------------------------------- zygote
def _proc_uids() -> dict[int, tuple[int, str]]:
    """pid -> (real uid, state letter) of every live process visible in /proc."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                uid, state = -1, "?"
                for line in fh:
                    if line.startswith("State:"):
                        state = line.split()[1]
                    elif line.startswith("Uid:"):
                        uid = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            continue
        table[int(entry)] = (uid, state)
    return table


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, by parent links in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


class Zygote:
    """Owns the workers it forked; each worker gets an id, a uid (when running as root) and its own namespaces."""

    def __init__(self, ctl: socket.socket, config: dict[str, Any]):
        self.ctl = ctl
        self.config = config
        self.isolate = bool(config.get("isolate"))
        self.tmp_root = config["tmp_root"]
        self.uid_base = config.get("uid_base")
        self.max_workers = int(config.get("max_workers", 1024))
        self.workers: dict[int, dict[str, Any]] = {}
        self.statuses: dict[int, int] = {}
        self.exiting: set[int] = set()  # keepers killed and not waited for: ``reap`` collects them as they exit
        self.free_slots = collections.deque(range(self.max_workers))  # FIFO: a swept uid is reused last
        self.next_id = 1

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.exiting:
                self.exiting.discard(pid)
            else:
                self.statuses[pid] = status

    def spawn(self, limits: dict[str, Any]) -> None:
        if not self.free_slots:
            wire.send_packet(self.ctl, {"ok": False, "error": f"more than {self.max_workers} live workers"})
            return
        slot = self.free_slots.popleft()
        wid, self.next_id = self.next_id, self.next_id + 1
        uid = None if self.uid_base is None else int(self.uid_base) + slot
        wdir = os.path.join(self.tmp_root, f"w{wid}")
        if not self.isolate:
            os.mkdir(wdir, 0o700)
            if uid is not None:
                os.chown(wdir, uid, uid)
        if uid is None and not self.isolate:  # a shared uid: RLIMIT_NPROC counts all its processes; allow nproc more
            own = os.getuid()
            limits = dict(limits, nproc=int(limits["nproc"]) + sum(u == own for u, _ in _proc_uids().values()))
        limits = dict(limits, nproc=int(limits["nproc"]) + 1)  # the supervisor runs under the same uid
        host_end, child_end = socket.socketpair()
        report_r, report_w = os.pipe()
        keeper = os.fork()
        if keeper == 0:
            code = 70
            try:
                self.ctl.close()
                host_end.close()
                os.close(report_r)
                keeper_main(child_end, report_w, uid, limits, dict(self.config, wdir=wdir))
            except BaseException as exc:
                traceback.print_exc()
                os.write(report_w, f"error {type(exc).__name__}: {exc}".replace("\n", " ").encode()[:400] + b"\n")
            finally:
                os._exit(code)
        child_end.close()
        os.close(report_w)
        info = {"keeper": keeper, "report": report_r, "uid": uid, "dir": wdir, "slot": slot, "pid": None, "ns": 0}
        line = self._read_report(info, 30.0)
        try:
            pid, ns_id = (int(x) for x in (line or "").split())
        except ValueError:
            host_end.close()
            self._finish(info)
            why = (line or "it exited").strip().removeprefix("error ")
            wire.send_packet(self.ctl, {"ok": False, "error": f"the worker could not enter its namespaces: {why}"})
            return
        info.update(pid=pid, ns=ns_id, pidfd=_pidfd(pid))
        self.workers[wid] = info
        wire.send_packet(self.ctl, {"ok": True, "wid": wid, "pid": pid, "uid": uid, "ns": ns_id}, [host_end.fileno()])
        host_end.close()

    @staticmethod
    def _read_report(info: dict[str, Any], timeout: float) -> str | None:
        """One line from the worker's keeper, or ``None`` (it died first, or said nothing in time)."""
        data = b""
        deadline = time.monotonic() + timeout
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([info["report"]], [], [], left)[0]:
                return None
            chunk = os.read(info["report"], 64)
            if not chunk:
                return None
            data += chunk
        return data.decode()

    def kill(self, wid: int) -> None:
        info = self.workers.pop(wid, None)
        if info is None:
            wire.send_packet(self.ctl, {"ok": False, "error": f"no worker {wid}"})
            return
        status, left = self._finish(info)
        wire.send_packet(self.ctl, {"ok": True, "status": status, "left": left})

    def _finish(self, info: dict[str, Any]) -> tuple[int | None, int]:
        """Kill a worker and everything it started, and check that nothing is left: (status, survivors found)."""
        pid, uid = info["pid"], info["uid"]
        if pid is not None:
            self._kill_supervisor(info)
        if not self.isolate or pid is None:
            if uid is not None:
                self._sweep_uid(uid)
            elif pid is not None:
                self._kill_tree(pid)
        line = self._read_report(info, 10.0) if pid is not None else None
        try:
            status = int(line) if line else None
        except ValueError:
            status = None
        os.close(info["report"])
        if info.get("pidfd") is not None:
            os.close(info["pidfd"])
        keeper_held = self._unreaped(info["keeper"])
        left = 0
        if self.isolate and info["ns"] and keeper_held:
            # the keeper still holds the namespace, so no other namespace has its inode number yet
            survivors = _pid_namespace_members(info["ns"])
            left = len(survivors)
            for p in survivors:  # never expected: the kernel empties a pid namespace before its pid 1 is reaped
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        if keeper_held:  # our own child, not reaped yet: its pid is still its own
            try:
                os.kill(info["keeper"], signal.SIGKILL)
            except OSError:
                pass
            # Not waited for: the worker's processes are gone (checked above), and the keeper's own exit (its
            # memory, the worker's network, IPC and mount namespaces with its /tmp) runs while this loop serves
            # the next request. ``reap`` collects it; ``shutdown`` waits for every one.
            self.exiting.add(info["keeper"])
        else:
            self.statuses.pop(info["keeper"], None)
        if not self.isolate:
            shutil.rmtree(info["dir"], ignore_errors=True)
        self.free_slots.append(info["slot"])
        return status, left

    def _kill_supervisor(self, info: dict[str, Any]) -> None:
        """SIGKILL the worker's supervisor (pid 1 of its namespace when isolated), never another process.

        The supervisor is the keeper's child, not ours: once it exits (say, on its host channel's close) the
        keeper reaps it and its pid is free; a fork-heavy cell can wrap the pid counter, so a plain kill by pid
        could hit another worker. A pidfd taken at spawn names this process only. Without pidfds, the
        supervisor is signalled only while the keeper has not yet reported its death."""
        if info.get("pidfd") is not None:
            try:
                signal.pidfd_send_signal(info["pidfd"], signal.SIGKILL)
            except OSError:  # it has exited already
                pass
            return
        if select.select([info["report"]], [], [], 0)[0]:  # its wait status is in the pipe: it was reaped
            return
        try:
            os.kill(info["pid"], signal.SIGKILL)
        except OSError:
            pass

    def _unreaped(self, pid: int) -> bool:
        """Whether our child ``pid`` is not reaped yet (alive or a zombie), so signalling it reaches it."""
        if pid in self.statuses:
            return False
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if done:
            self.statuses[pid] = status
        return not done

    def _sweep_uid(self, uid: int) -> None:
        """Kill every process of the worker's private uid: a helper becomes that uid and signals ``-1``."""
        for _ in range(100):
            left = [p for p, (u, state) in _proc_uids().items() if u == uid and state != "Z"]
            if not left:
                return
            helper = os.fork()
            if helper == 0:
                try:
                    os.setgid(uid)
                    os.setuid(uid)
                    os.kill(-1, signal.SIGKILL)  # every process this uid can signal, i.e. its own
                finally:
                    os._exit(0)
            os.waitpid(helper, 0)
            for p in left:  # belt and braces (e.g. a process that changed its uid is still ours by pid)
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            self.reap()

    def _kill_tree(self, pid: int) -> None:
        """Without a private uid or namespace: freeze the worker's process tree, then kill it (best effort)."""
        for _ in range(20):
            tree = [p for p in _descendants(pid) if p not in self.statuses]
            if not tree:
                break
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for p in tree:
                    try:
                        os.kill(p, sig)
                    except OSError:
                        pass
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            self.reap()
            if pid in self.statuses or len(tree) == 1:
                break

    def shutdown(self) -> None:
        for wid in list(self.workers):
            self._finish(self.workers.pop(wid))
        for pid in self.exiting:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.exiting.clear()
        self.reap()

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.ctl], [], [], 1.0)
            self.reap()
            if not ready:
                continue
            try:
                msg, _ = wire.recv_packet(self.ctl)
            except (OSError, EOFError):
                return
            op = msg.get("op")
            if op == "spawn":
                self.spawn(msg["limits"])
            elif op == "kill":
                self.kill(int(msg["wid"]))
            elif op == "ping":
                wire.send_packet(self.ctl, {"ok": True, "workers": len(self.workers)})
            else:
                wire.send_packet(self.ctl, {"ok": False, "error": f"unknown op {op!r}"})


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (Linux 5.3+), taken while it is alive; ``None`` where pidfds are not available."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pid_namespace_members(ns_id: int) -> list[int]:
    """Live processes in the pid namespace with inode ``ns_id`` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/pid").st_ino != ns_id:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                        continue
            except (OSError, IndexError):
                continue
            found.append(int(entry))
    return found


def _network_interfaces() -> list[str]:
    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        return []


def main(argv: list[str]) -> int:
    ctl = socket.socket(fileno=int(argv[1]))
    config = json.loads(argv[2])
    if config.get("site"):
        sys.path.append(config["site"])
    if config.get("unshare_net"):
        try:
            nslib.unshare(nslib.CLONE_NEWNET)
        except OSError:
            pass
    nslib.prctl(nslib.PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal ^C goes to the host; it closes us
    missing = []
    for name in list(PRELOAD) + list(config.get("preload", ())):
        try:
            __import__(name)
        except Exception:  # an optional module that is absent or broken is simply not preloaded
            missing.append(name)
    gc.collect()
    gc.freeze()  # keep the preloaded heap shared copy-on-write with every worker
    with open("/proc/self/status", encoding="ascii") as fh:
        vm_kb = next((int(line.split()[1]) for line in fh if line.startswith("VmSize:")), 0)
    zygote = Zygote(ctl, config)
    readonly = True
    try:
        open("/.agentflow-probe", "w").close()
        readonly = False
        os.unlink("/.agentflow-probe")
    except OSError:
        pass
    wire.send_packet(
        ctl,
        {
            "ok": True,
            "pid": os.getpid(),
            "interfaces": _network_interfaces(),
            "missing": missing,
            "vm_kb": vm_kb,
            "euid": os.geteuid(),
            "readonly_root": readonly,
            "python": sys.version.split()[0],
        },
    )
    try:
        zygote.serve()
    finally:
        zygote.shutdown()
        if config.get("owns_tmp_root"):
            shutil.rmtree(config["tmp_root"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
