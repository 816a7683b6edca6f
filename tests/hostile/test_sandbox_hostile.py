"""Hostile code against the Python tool's sandbox, one test per class of attack, in both isolation modes.

``bwrap`` is bubblewrap; ``namespaces`` is the fallback for machines without it, forced here so that it is
tested wherever the kernel allows it; ``default-no-bwrap`` is the default (``sandbox="auto"``) on a machine where
bubblewrap is hidden, which must pick the namespaces itself. CI sets ``AGENTFLOW_REQUIRE_BWRAP=1`` where
bubblewrap is installed: then a mode that cannot start fails instead of skipping. Every call has a timeout of a
few seconds; network tests only touch loopback listeners that the test itself opens.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from agentflow_env.error import ConfigError, ToolError
from agentflow_env.tools.python.sandbox import launcher, view
from agentflow_env.tools.python.sandbox import zygote as zyg
from agentflow_env.tools.python.tool import PythonCoderTool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Python sandbox needs Linux")

REPO = Path(__file__).resolve().parent.parent.parent
REQUIRE = os.environ.get("AGENTFLOW_REQUIRE_BWRAP") == "1"
HIDDEN = "default-no-bwrap"
MODES = ("bwrap", "namespaces", HIDDEN)
# the default mode's tools get a preload of their own, so they never share a zygote that another test module's
# default tool started with bubblewrap visible ("json" is preloaded anyway: nothing else changes)
HIDDEN_PRELOAD = ("json",)


def _start(mode: str, **kwargs) -> PythonCoderTool:
    if mode == "bwrap" and shutil.which("bwrap") is None and not REQUIRE:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    if mode == HIDDEN:
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


@pytest.fixture(scope="module", params=MODES)
def mode(request):
    if request.param != HIDDEN:
        yield request.param
        return
    real_which = shutil.which

    def which(cmd, *args, **kwargs):
        return None if os.path.basename(str(cmd)) == "bwrap" else real_which(cmd, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:  # for the whole module: a restarted zygote must not find it either
        mp.setattr(launcher.shutil, "which", which)
        mp.delenv("AGENTFLOW_SANDBOX", raising=False)
        mp.setattr(launcher, "_UNAVAILABLE", {})
        yield request.param


@pytest.fixture(scope="module")
def tool(mode):
    t = _start(mode)
    yield t
    t.close()


@pytest.fixture(scope="module")
def other(mode):
    """A second tool of the same mode: another episode running at the same time."""
    t = _start(mode)
    yield t
    t.close()


def _ok(tool: PythonCoderTool) -> None:
    r = tool.run("6 * 7", 5)
    assert r.ok and r.text == "42", r.text


def _fails(tool: PythonCoderTool, code: str) -> str:
    r = tool.run(code, 5)
    assert not r.ok, f"hostile code succeeded: {code!r} -> {r.text}"
    return r.text


# ------------------------------------------------------------------------------------------------ default refusal
def test_without_any_isolation_the_default_refuses_and_says_how_to_fix_it(monkeypatch, caplog):
    def broken(sandbox, preload=()):
        raise ToolError(f"{sandbox} does not work on this test machine")

    attempts = []
    monkeypatch.setattr(
        launcher, "ZygoteProcess", lambda sandbox, preload=(): attempts.append(sandbox) or broken(sandbox)
    )
    monkeypatch.setattr(launcher, "_UNAVAILABLE", {})
    monkeypatch.delenv("AGENTFLOW_SANDBOX", raising=False)
    t = PythonCoderTool(preload=("this_key_is_private_to_the_refusal_test",))
    try:
        with caplog.at_level(logging.ERROR):
            r = t.run("print('pwned')", 5)
        assert not r.ok and r.error == "no sandbox" and "pwned" not in r.text
        assert "apt-get install bubblewrap" in r.text and "unprivileged_userns_clone" in r.text
        assert "sandbox='none'" in r.text and "AGENTFLOW_SANDBOX=none" in r.text
        assert any("refuses" in rec.message for rec in caplog.records)
        assert not t.run("1", 5).ok  # every call, not just the first
        assert attempts == ["bwrap", "namespaces"]  # and without trying again on every call
    finally:
        t.close()


def test_no_sandbox_is_an_explicit_loud_choice_of_the_caller(monkeypatch, caplog):
    monkeypatch.setenv("AGENTFLOW_SANDBOX", "none")
    with caplog.at_level(logging.WARNING):
        t = PythonCoderTool()
    try:
        assert any("WITHOUT a sandbox" in rec.message for rec in caplog.records)
        assert t.sandbox_info.mode == "none" and not t.sandbox_info.isolated
        assert t.run("6 * 7", 5).text == "42"
    finally:
        t.close()
    monkeypatch.setenv("AGENTFLOW_SANDBOX", "nonsense")
    with pytest.raises(ConfigError, match="AGENTFLOW_SANDBOX"):
        PythonCoderTool()
    monkeypatch.setenv("AGENTFLOW_SANDBOX", "none")
    assert PythonCoderTool(sandbox="namespaces")._state.key[0] == "namespaces"  # the constructor's choice wins


def test_code_cannot_ask_for_trust(tool):
    """Trust is the caller's option; nothing in the action can select a weaker mode."""
    r = tool.run("# sandbox='none'\nimport os\nos.environ.get('AGENTFLOW_SANDBOX'), os.path.exists('/work')", 5)
    assert r.text == "(None, False)"
    assert tool.sandbox_info.isolated


# ------------------------------------------------------------------------------------------------ the host's files
def _ancestors_of_the_interpreter(folder: str) -> set[str]:
    """Names in ``folder`` that lead to the interpreter's prefix (bound in, e.g. a pyenv under /root)."""
    names = set()
    for prefix in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(view.interpreter())):
        prefix = os.path.realpath(prefix)
        if prefix.startswith(folder.rstrip("/") + "/"):
            names.add(prefix[len(folder.rstrip("/")) + 1 :].split("/")[0])
    return names


def test_host_secrets_are_not_visible(tool, monkeypatch):
    monkeypatch.setenv("AGENTFLOW_TEST_API_KEY", "sk-test-secret")
    tool.reset()
    home = os.path.expanduser("~")
    secret = Path(home) / f".agentflow-test-secret-{uuid.uuid4().hex}"
    secret.write_text("sk-home-secret")
    shared = [Path(tempfile.mkstemp(dir=d, prefix="agentflow-other-user-")[1]) for d in ("/tmp", "/var/tmp")]
    for f in shared:
        f.write_text("another user's file")
        f.chmod(0o644)
    try:
        for path in ("/etc/shadow", "/etc/passwd", "/etc/hostname", str(secret), "/var/tmp", "/run", *map(str, shared)):
            _fails(tool, f"import os\nos.listdir({path!r}) if os.path.isdir({path!r}) else open({path!r}).read()")
        for folder in {"/root", "/home", home}:
            r = tool.run(f"import os\nos.listdir({folder!r}) if os.path.isdir({folder!r}) else []", 5)
            assert r.ok and set(eval(r.text)) <= _ancestors_of_the_interpreter(folder), (folder, r.text)
    finally:
        secret.unlink()
        for f in shared:
            f.unlink()
    r = tool.run("import os\nprint(dict(os.environ))\nprint(open('/proc/1/environ').read())", 5)
    assert "sk-test-secret" not in r.text
    r = tool.run("import os\nsorted(os.listdir('/'))", 5)
    top = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "opt", "proc", "sbin", "tmp", "usr"}
    assert set(eval(r.text)) <= top | _ancestors_of_the_interpreter("/"), r.text


def test_project_source_data_and_testsets_are_not_reachable(tool):
    """Reward hack: importing the task generator or reading answers must be impossible."""
    for module in ("benchmarks", "agentflow_env", "leaderboards", "agents"):
        assert "ModuleNotFoundError" in _fails(tool, f"import {module}")
    paths = [
        REPO,
        REPO / "benchmarks",
        REPO / "agentflow_env" / "tools" / "python" / "sandbox" / "launcher.py",
        REPO / "pyproject.toml",
        REPO.parent / "shared" / "data",
    ]
    if sys.prefix != sys.base_prefix:
        paths += [Path(sys.prefix), Path(sys.prefix) / "pyvenv.cfg"]  # the venv, with the editable install's .pth
    for p in paths:
        _fails(tool, f"import os\np = {str(p)!r}\nos.listdir(p) if os.path.isdir(p) else open(p).read()")
    r = tool.run("import sys\nsys.path", 5)
    assert str(REPO) not in r.text and "site-packages" not in r.text and "__editable__" not in r.text, r.text


def test_only_allowed_packages_are_importable(tool):
    r = tool.run("import numpy, sympy, mpmath\nnumpy.__file__.startswith('/opt/agentflow/site/')", 5)
    assert r.text == "True", r.text
    for module in ("pytest", "torch", "hypothesis", "pip"):
        _fails(tool, f"import {module}")


def test_view_lists_no_project_or_home_path():
    steps = view.build_view(view.DEFAULT_PACKAGES, 1 << 20)
    sources = [s["src"] for s in steps if s["op"] == "ro"]
    allowed_repo_files = {str(REPO / "agentflow_env" / "tools" / "python" / "sandbox" / f) for f in view.SCRIPTS}
    for src in sources:
        if src.startswith(str(REPO) + "/"):
            if src not in allowed_repo_files:
                name = src.rsplit("/", 1)[-1]
                assert name in ("numpy", "numpy.libs", "sympy", "mpmath"), src  # from a venv inside the checkout
            continue  # a checkout under /tmp (a CI clone) is fine: only these entries of it are bound
        assert not any(src == d or src.startswith(d + "/") for d in ("/tmp", "/var", "/run", "/home", "/etc/shadow"))
    assert str(REPO) not in sources and os.path.expanduser("~") not in sources


def test_writes_to_the_host_fail(tool, tmp_path):
    import numpy

    site = Path(numpy.__file__).resolve().parents[1]  # the host's site-packages, which the sandbox reads from
    targets = [REPO / "escaped.txt", site / "escaped.txt", tmp_path / "escaped.txt", Path("/escaped")]
    try:
        for target in targets:
            _fails(tool, f"open({str(target)!r}, 'w').write('x')")
            assert not target.exists()
        _fails(tool, "import shutil\nshutil.rmtree('/usr/lib')")
        assert Path("/usr/lib").is_dir()
        home_dir = Path(tempfile.mkdtemp(dir=os.path.expanduser("~"), prefix=".agentflow-keep-"))
        (home_dir / "data.txt").write_text("keep me")
        tool.run(f"import shutil\nshutil.rmtree({str(home_dir)!r})", 5)
        assert (home_dir / "data.txt").read_text() == "keep me"
    finally:
        for target in targets[:3]:
            target.unlink(missing_ok=True)
        if "home_dir" in locals():
            shutil.rmtree(home_dir, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ sockets and network
def test_host_unix_sockets_are_unreachable(tool):
    folders = [tempfile.mkdtemp(dir=d) for d in ("/var/tmp", "/tmp")]
    listeners = []
    try:
        for folder in folders:
            os.chmod(folder, 0o777)
            path = os.path.join(folder, "host.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            os.chmod(path, 0o777)
            s.listen(4)
            s.setblocking(False)
            listeners.append(s)
            _fails(tool, f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(1)\ns.connect({path!r})")
        abstract = f"\0agentflow-host-{uuid.uuid4().hex}"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(abstract)
        s.listen(4)
        s.setblocking(False)
        listeners.append(s)
        _fails(tool, f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(1)\ns.connect({abstract!r})")
        for path in ("/var/run/docker.sock", "/run/dbus/system_bus_socket"):
            _fails(tool, f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(1)\ns.connect({path!r})")
        for s in listeners:
            with pytest.raises(BlockingIOError):
                s.accept()
    finally:
        for s in listeners:
            s.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def test_host_loopback_is_unreachable(tool):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        _fails(tool, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


# ------------------------------------------------------------------------------------------- cross-episode channels
def test_concurrent_episodes_share_no_loopback_or_abstract_socket(tool, other):
    name = f"agentflow-episode-{uuid.uuid4().hex}"
    serve = (
        "import socket\n"
        "tcp = socket.socket(); tcp.bind(('127.0.0.1', 0)); tcp.listen(4)\n"
        f"ab = socket.socket(socket.AF_UNIX); ab.bind('\\0{name}'); ab.listen(4)\n"
        "import builtins; builtins._keep = (tcp, ab)\n"
        "tcp.getsockname()[1]"
    )
    r = tool.run(serve, 5)
    if not r.ok:  # loopback is down in the worker's namespace: nothing to reach anyway
        assert "Errno" in r.text, r.text
        port = 1
    else:
        port = int(r.text)
    _fails(other, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
    _fails(other, f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(1)\ns.connect('\\0{name}')")
    tool.reset()


def test_sysv_shared_memory_is_per_worker_and_freed_at_reset(tool, other):
    key = 0x5A5A0000 + (os.getpid() & 0xFFFF)
    make = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"shmid = libc.shmget({key}, 4 * 2**20, 0o1666)\n"
        "(shmid >= 0, ctypes.get_errno())"
    )
    find = f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmget({key}, 0, 0o666) >= 0"
    r = tool.run(make, 5)
    assert r.text.startswith("(True"), r.text
    assert tool.run(find, 5).text == "True"  # same episode: still there
    assert other.run(find, 5).text == "False"  # another episode: its own IPC namespace
    before = Path("/proc/sysvipc/shm").read_text()
    assert f"{key:>10}" not in before and str(key) not in before.split()  # never in the host's namespace
    tool.reset()
    assert tool.run(find, 5).text == "False"  # the namespace, and the segment, died with the worker
    # attach, fill, detach, repeat: detached pages belong to no process, so the total is capped in the namespace
    hoard = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
        "total = 0\nfor i in range(64):\n"
        "    shmid = libc.shmget(0x1000 + i, 4 * 2**20, 0o1600)\n"
        "    if shmid < 0:\n        break\n"
        "    addr = libc.shmat(shmid, None, 0)\n    ctypes.memset(addr, 1, 4 * 2**20)\n"
        "    libc.shmdt(ctypes.c_void_p(addr))\n    total += 4\n"
        "total"
    )
    r = tool.run(hoard, 10)
    assert r.ok and int(r.text) <= tool.limits.tmp_mb, r.text
    tool.reset()


def test_tmp_is_per_worker_size_capped_and_freed_at_reset(tool, other):
    fill = (
        "import os\nn = 0\ntry:\n    with open('/tmp/fill', 'wb') as f:\n        while True:\n"
        "            f.write(b'x' * 2**20); f.flush(); n += 1\nexcept OSError as e:\n    print(e.errno)\nn"
    )
    r = tool.run(fill, 10)
    assert r.ok and int(r.text.split()[-1]) <= tool.limits.tmp_mb, r.text
    r = other.run("open('/tmp/mine', 'wb').write(b'y' * 2**20)", 5)
    assert r.text == str(2**20), r.text  # the other episode's /tmp is untouched
    assert tool.run("import os\nos.path.exists('/tmp/fill')", 5).text == "True"
    r = tool.run("open('/dev/shm/more', 'wb').write(b'z' * 2**20)", 5)
    assert not r.ok or "28" in r.text  # /dev/shm is the same capped space
    tool.reset()
    assert tool.run("import os\nos.listdir('/tmp')", 5).text == "[]"


# ------------------------------------------------------------------------------------------------ memory and processes
def test_nested_user_namespaces_and_mounts_are_refused(tool):
    for flags in ("0x10000000", "0x10020000", "0x00020000", "0x40000000"):
        r = tool.run(
            f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n(libc.unshare({flags}), ctypes.get_errno())", 5
        )
        assert r.text == "(-1, 1)", (flags, r.text)
    r = tool.run("import subprocess\nsubprocess.run(['unshare', '-Ur', 'true']).returncode", 5)
    assert r.ok and r.text != "0", r.text
    assert "PermissionError" in _fails(tool, "import os\nos.memfd_create('hoard')")
    r = tool.run(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.mount(b'none', b'/tmp', b'tmpfs', 0, None)", 5
    )
    assert r.text == "-1", r.text


def test_memory_is_capped_across_the_whole_process_tree(mode):
    """Four children of 150 MB each, every one under the per-process limit, 600 MB against a 300 MB cap."""
    t = _start(mode, memory_mb=300)
    code = (
        "import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        b = b'x' * (150 * 2**20)\n        time.sleep(10)\n        os._exit(0)\n    kids.append(pid)\n"
        "[os.waitpid(k, 0)[1] for k in kids]"
    )
    try:
        start = time.monotonic()
        r = t.run(code, 20)
        assert not r.ok and r.error == "memory limit" and "300 MB" in r.text, r.text
        assert time.monotonic() - start < 8  # stopped as it grew, not at the children's natural end
        assert t.run("b = b'x' * (150 * 2**20)\nlen(b)", 10).ok  # one process under the cap is fine
        _ok(t)
    finally:
        t.close()


def test_memory_is_capped_per_process_with_a_process_limit(tool):
    r = tool.run("bytearray(3 * 2**30)", 5)
    assert not r.ok and "MemoryError" in r.text
    code = (
        "import os\nkids = []\nfor _ in range(64):\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        import time; time.sleep(30); os._exit(0)\n"
        "    kids.append(pid)\nlen(kids)"
    )
    r = tool.run(code, 5)
    assert r.ok and int(r.text) <= tool.limits.nproc, r.text
    tool.reset()


def test_fork_and_exit_chains_are_dead_right_after_reset(tool):
    chain = (
        "import os, time\n"
        "def hop(depth):\n"
        "    while True:\n"
        "        try:\n"
        "            pid = os.fork()\n"
        "        except OSError:\n"
        "            time.sleep(0.01); continue\n"
        "        if pid:\n"
        "            os._exit(0)\n"  # the parent leaves: the child is an orphan that forks on
        "        os.setsid()\n"
        "        time.sleep(0.005)\n"
        "if os.fork() == 0:\n    hop(0)\n"
        "time.sleep(0.3)\n"
        "os.stat('/proc/self/ns/pid').st_ino, os.getuid()"
    )
    r = tool.run(chain, 5)
    assert r.ok, r.text
    ns_inode, uid = eval(r.text)
    left = [row for row in _host_stats(ns_inode) if row[0] != "Z"]  # zombies hold nothing; the kernel reaps them
    assert len(left) == 2, f"right after the call: {left} in the worker (want only its supervisor and kernel)"
    tool.reset()  # the used worker, stopped since its call returned, is killed in the background
    _assert_gone(tool, ns_inode, uid if tool.sandbox_info.private_uids else None, within_s=30)
    _ok(tool)


def test_a_double_forked_daemon_dies_when_the_tool_closes(mode):
    t = _start(mode)
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "os.stat('/proc/self/ns/pid').st_ino, os.getuid()"
    )
    try:
        private_uids = t.sandbox_info.private_uids
        r = t.run(daemon, 5)
        assert r.ok, r.text
    finally:
        t.close()
    ns_inode, uid = eval(r.text)
    _assert_gone(None, ns_inode, uid if private_uids else None)


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


def test_signals_stay_inside_the_worker(tool, other):
    host = os.getpid()
    r = tool.run("import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())", 5)
    assert host not in eval(r.text) and max(eval(r.text)) < 100, r.text  # only its own pid namespace
    tool.run(f"import os, signal\nos.kill(-1, signal.SIGKILL)\nos.kill({host}, signal.SIGKILL)", 5)
    _fails(tool, "import os\nos.kill(1, 9)\nos.kill(0, 9)")
    assert os.getpid() == host
    _ok(tool)
    _ok(other)


def test_supervisor_cannot_be_traced_or_read(tool):
    r = tool.run(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "(libc.ptrace(16, 1, 0, 0), ctypes.get_errno(), os.getppid())",
        5,
    )
    assert r.text == "(-1, 1, 1)", r.text  # PTRACE_ATTACH to the supervisor (pid 1): EPERM
    _fails(tool, "import os\nos.listdir('/proc/1/fd')")
    _fails(tool, "open('/proc/1/mem', 'rb').read(1)")


# ------------------------------------------------------------------------------------------------ the reply channel
_FORGE = (
    "import json, os, socket, struct, stat\nsent = 0\n"
    "reply = {'output': 'FORGED ok', 'dropped': 0, 'error': None, 'exc': None}\n"
    "for fd in range(64):\n"
    "    try:\n"
    "        if not stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
    "            continue\n"
    "        s = socket.socket(fileno=os.dup(fd))\n"
    "    except OSError:\n"
    "        continue\n"
    "    s.setblocking(False)\n"
    "    for n in range(1, 6):\n"
    "        for prefix in (b'', struct.pack('!q', n), bytes(16), struct.pack('!q', n) * 2):\n"
    "            body = prefix + json.dumps(dict(reply, n=n, t=None)).encode()\n"
    "            try:\n"
    "                s.send(struct.pack('!I', len(body)) + body)\n"
    "                sent += 1\n"
    "            except OSError:\n"
    "                pass\n"
    "sent"
)


def test_frames_forged_by_one_call_never_answer_the_next(tool):
    """Call 1 writes reply frames of every layout into every socket it holds; call 2 must still be itself."""
    tool.reset()
    r = tool.run(_FORGE, 5)
    assert r.ok and int(r.text) >= 20, r.text  # the frames really went out, and the call itself still worked
    r = tool.run("1/0", 5)
    assert not r.ok and "ZeroDivisionError" in r.text and "FORGED" not in r.text, r.text[:300]
    _ok(tool)
    big = _FORGE.replace("'FORGED ok'", "'FORGED ' + 'A' * 140_000")
    tool.run(big, 5)  # a stale frame too big to skip: the worker is killed rather than answer with it
    r = tool.run("1/0", 5)
    assert not r.ok and "FORGED" not in r.text and len(r.text) < 2300, r.text[:300]
    _ok(tool)
    tool.reset()


def test_host_caps_a_forged_oversized_reply():
    """Even a worker that lies about its reply gets at most max_output_chars through."""
    host_end, worker_end = socket.socketpair()

    class FakeZygote:
        def kill(self, wid):
            return None

    def send(n: int, reply: object) -> None:
        zyg.send_body(worker_end, zyg.CALL_NUMBER.pack(n), json.dumps(reply).encode())

    worker = launcher.Worker(FakeZygote(), 1, host_end)  # type: ignore[arg-type]
    forged = {"output": "A" * 80_000, "dropped": -5, "error": "E" * 20_000, "exc": None}
    send(1, forged)
    reply = worker.call("1", 5, 2000)  # fits the byte limit of the frame, so the caps must do the work
    assert len(reply["output"]) == 2000 and reply["dropped"] == 78_000
    assert len(reply["error"]) <= zyg.TRACEBACK_CHARS + 3
    send(2, dict(forged, output="A" * 140_000))
    with pytest.raises(launcher.WorkerLost):  # past the byte limit: refused before it is even parsed
        worker.call("1", 5, 2000)
    host_end, worker_end = socket.socketpair()
    worker = launcher.Worker(FakeZygote(), 1, host_end)  # type: ignore[arg-type]
    send(1, {"output": 7})
    with pytest.raises(launcher.WorkerLost):
        worker.call("1", 5, 2000)
    send(5, {"output": "a reply for a later call"})
    with pytest.raises(launcher.WorkerLost):
        worker.call("1", 5, 2000)
    host_end.close()
    worker_end.close()


def test_tool_caps_output_it_receives(tool):
    r = tool.run("print('B' * 100_000)", 5)
    assert len(r.text) < 2300 and "[output cut:" in r.text


def test_tool_card_says_what_persists_within_an_episode(tool):
    card = tool.card()
    assert "do not persist between calls" in card and "until the episode ends" in card
    assert tool.run("import math\nmath.tau = 3\n'patched'", 5).text == "'patched'"
    assert tool.run("import math\nmath.tau", 5).text == "3"  # the documented notebook-like state
    tool.reset()
    assert tool.run("import math\nmath.tau", 5).text.startswith("6.28")


def test_a_worker_that_dies_reports_how(tool):
    r = tool.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", 5)
    assert not r.ok and "SIGSEGV" in r.text, r.text
    _ok(tool)


def test_hostile_suite_runs_in_bounded_time(tool):
    start = time.monotonic()
    r = tool.run("while True:\n    pass", 1.0)
    assert r.error == "timeout" and time.monotonic() - start < 5
    _ok(tool)


def test_sandbox_info_reports_isolation(tool, mode):
    info = tool.sandbox_info
    assert info.mode == ("namespaces" if mode == HIDDEN else mode), info  # bwrap hidden: the default falls back
    assert info.isolated and info.network_isolated and info.readonly_root
    assert info.resource_control in ("cgroup", "polled") and info.between_calls == "stopped", info
    assert json.loads(json.dumps(info.interfaces)) in ([], ["lo"])


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_seccomp_program_is_well_formed(arch):
    from agentflow_env.tools.python.sandbox import nslib

    program = nslib.seccomp_program(arch)
    assert program is not None and len(program) < 256
    for pc, (code, jt, jf, _k) in enumerate(program):
        if code & 0x07 == 0x05:  # BPF_JMP: both targets inside the program
            assert pc + 1 + jt < len(program) and pc + 1 + jf < len(program)
    assert program[-1][0] == 0x06 and nslib.seccomp_program("sparc") is None


# ------------------------------------------------------------------------------------------------ round 3 classes
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


def test_memfd_secret_is_denied(tool):
    """memfd_secret (447): its pages are nobody's, outside every cap (672 MB were held against a 512 MB cap)."""
    code = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n(libc.syscall(447, 0), ctypes.get_errno())"
    r = tool.run(code, 5)
    assert r.text == "(-1, 1)", r.text  # EPERM from the filter (ENOSYS would mean the kernel lacks it: not enough)


@pytest.mark.parametrize(
    "family", ["AF_VSOCK", "AF_NETLINK", "AF_PACKET", "AF_BLUETOOTH", "AF_ALG", "AF_CAN", "AF_TIPC", "AF_RDS"]
)
def test_only_unix_and_ip_sockets_can_be_made(tool, family):
    """vsock is outside the network namespace (a listener took a port in the VM's vsock space); netlink, packet
    and the rest reach the kernel's attack surface. Both socket() and socketpair() are filtered."""
    numbers = {"AF_VSOCK": 40, "AF_ALG": 38, "AF_TIPC": 30, "AF_RDS": 21, "AF_BLUETOOTH": 31, "AF_CAN": 29}
    number = getattr(socket, family, None) or numbers[family]
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = []\n"
        f"for kind in (1, 2, 3, 5):\n    fd = libc.socket({number}, kind, 0)\n"
        "    out.append((fd, ctypes.get_errno()))\n"
        f"pair = (ctypes.c_int * 2)()\nout.append((libc.socketpair({number}, 1, 0, pair), ctypes.get_errno()))\n"
        "sorted(set(out))"
    )
    r = tool.run(code, 5)
    assert r.text == "[(-1, 97)]", f"{family}: {r.text}"  # EAFNOSUPPORT for every type, from the filter
    ok = (
        "import socket\na = socket.socket(socket.AF_INET); b = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "c = socket.socket(socket.AF_UNIX); d, e = socket.socketpair()\n'made'"
    )
    assert tool.run(ok, 5).text == "'made'"


_LEAVE_BEHIND = (
    "import os, threading, time\n"
    "def spin():\n    while True:\n        pass\n"
    "threading.Thread(target=spin, daemon=True).start()\n"  # a busy thread in the kernel itself
    "if os.fork() == 0:\n"  # a busy child
    "    spin()\n"
    "if os.fork() == 0:\n"  # a daemon that starts allocating once the call has returned
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(0.3)\n"
    "        hoard = []\n"
    "        for _ in range(200):\n"
    "            hoard.append(b'x' * 2**22)\n"
    "            time.sleep(0.005)\n"
    "        time.sleep(600)\n"
    "    os._exit(0)\n"
    "time.sleep(0.1)\n"
    "os.stat('/proc/self/ns/pid').st_ino"
)


def _leave_behind_and_watch(t: PythonCoderTool) -> tuple[int, list, list]:
    r = t.run(_LEAVE_BEHIND, 5)
    assert r.ok, r.text
    ns_inode = int(r.text)
    first = [row for row in _host_stats(ns_inode) if row[0] != "Z"]  # zombies hold nothing
    time.sleep(1.5)  # no call runs: the busy thread, the busy child and the hoarder would have 1.5 s
    return ns_inode, first, [row for row in _host_stats(ns_inode) if row[0] != "Z"]


def test_a_cells_processes_die_and_its_threads_stop_when_the_call_returns(tool):
    """Children kept burning CPU and allocating after their call (worker RSS 1.2-1.6 GB with no call running)."""
    tool.reset()
    ns_inode, first, later = _leave_behind_and_watch(tool)
    assert len(first) == 2, f"processes right after the call: {first} (want only the supervisor and the kernel)"
    assert all(state == "T" for state, _, _ in later[1:]) or len(later) == 2, later  # the kernel is stopped
    cpu = sum(c for _, c, _ in later) - sum(c for _, c, _ in first)
    assert cpu < 0.2, f"the worker used {cpu:.2f} CPU s in 1.5 s with no call running"
    rss = sum(m for _, _, m in later)
    assert rss < tool.limits.memory_mb * 2**20, f"{rss / 2**20:.0f} MB held with no call running"
    r = tool.run("import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())", 5)
    assert len(eval(r.text)) == 2, r.text  # nothing of the last cell but what the kernel itself holds
    tool.reset()


def test_kept_background_processes_are_stopped_between_calls(mode):
    """keep_background=True keeps a cell's processes for the next calls, but they run only while a call runs."""
    t = _start(mode, keep_background=True, memory_mb=300)
    try:
        ns_inode, first, later = _leave_behind_and_watch(t)
        assert len(first) >= 4, first  # supervisor, kernel, the busy child, the daemon
        assert all(state == "T" for state, _, _ in later if state != "S"), later  # all stopped...
        assert sum(state == "T" for state, _, _ in later) >= 3, later  # ...but the supervisor (waiting)
        cpu = sum(c for _, c, _ in later) - sum(c for _, c, _ in first)
        assert cpu < 0.2, f"the worker used {cpu:.2f} CPU s in 1.5 s with no call running"
        rss = sum(m for _, _, m in later)
        assert rss < 300 * 2**20, f"{rss / 2**20:.0f} MB held with no call running"
        r = t.run("import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])", 5)
        assert r.ok and int(r.text) >= 4, r.text  # still there, for this call
    finally:
        t.close()
    _assert_gone(None, ns_inode, None)


def test_the_zygote_starts_with_the_tool_not_in_the_first_call(mode, monkeypatch):
    """The first call of a process included the zygote's start (4.9 s against a 2 s time budget)."""
    t = _start(mode) if mode != HIDDEN else None  # the others share a running zygote: build a fresh key instead
    if t is not None:
        t.close()
    kwargs = {"sandbox": mode} if mode != HIDDEN else {}
    fresh = PythonCoderTool(preload=(f"agentflow_prestart_{uuid.uuid4().hex}",), **kwargs)
    try:
        fresh.reset()  # the episode's start waits for the zygote begun when the tool was built
        started, spawned = [], []
        real_spawn = launcher.ZygoteProcess.spawn
        monkeypatch.setattr(launcher, "start_zygote", lambda *a: started.append(a) or pytest.fail("zygote started"))

        def spawn(self, limits):  # the spare for the next episode is forked in the background: that is fine
            spawned.append(threading.current_thread() is threading.main_thread())
            return real_spawn(self, limits)

        monkeypatch.setattr(launcher.ZygoteProcess, "spawn", spawn)
        _ok(fresh)
        assert not started and not any(spawned), "the first call started the zygote or forked its worker"
    finally:
        monkeypatch.undo()
        fresh.close()


def test_reset_swaps_in_the_spare_forked_during_the_episode(tool):
    """Pre-forked: reset() forks nothing itself once the spare is there (it is forked in the background)."""
    tool.reset()
    _ok(tool)
    state = tool._state
    deadline = time.monotonic() + 30
    while state.spare is None and time.monotonic() < deadline:
        time.sleep(0.02)
    spare = state.spare
    assert spare is not None, "no spare worker was forked in the background within 30 s"
    tool.reset()
    assert spare in state.idle and state.spare is not spare
    _ok(tool)


def test_cgroup_limits_per_worker_where_a_delegated_cgroup_is_writable(tmp_path, monkeypatch):
    """With a writable cgroup v2 (here a stand-in folder: this machine's may lack the controllers), each worker gets
    its own cgroup with memory.max, cpu.max and pids.max, its processes move in, sandbox_info says "cgroup", and a
    kill at memory.max is reported as the memory limit. Without one, sandbox_info says "polled"."""
    from agentflow_env.tools.python.sandbox import cgroups

    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    monkeypatch.setenv(cgroups.CGROUP_ENV, str(tmp_path))
    t = _start("namespaces", memory_mb=300, nproc=8, preload=(f"agentflow_cgroup_{uuid.uuid4().hex}",))
    try:
        assert t.sandbox_info.resource_control == "cgroup"
        assert set((tmp_path / "cgroup.subtree_control").read_text().split()) == {"+memory", "+cpu", "+pids"}
        (folder,) = tmp_path.glob("agentflow-*")
        r = t.run("import os\nos.getpid()", 5)
        assert r.ok, r.text
        (worker,) = list(t._state.idle)
        path = folder / f"w{worker.wid}"
        assert int((path / "memory.max").read_text()) == 300 * 2**20 + cgroups.MEMORY_SLACK_BYTES
        assert (path / "pids.max").read_text() == "12" and (path / "cpu.max").read_text() == cgroups.CPU_MAX
        assert int((path / "cgroup.procs").read_text()) in _pid_namespace_members(worker.ns)  # moved in (host pid)
        (path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")  # the kernel's report
        r = t.run("6 * 7", 5)
        assert not r.ok and r.error == "memory limit" and "300 MB" in r.text, r.text
        assert not path.exists()  # the worker, and its cgroup, are gone
        _ok(t)
    finally:
        t.close()
    assert not folder.exists()
    monkeypatch.setenv(cgroups.CGROUP_ENV, str(tmp_path / "missing"))
    assert cgroups.open_cgroups() is None
