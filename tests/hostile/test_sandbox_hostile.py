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
import time
import uuid
from pathlib import Path

import pytest

from agentflow_env.error import ConfigError, ToolError
from agentflow_env.tools.python.sandbox import launcher, view, wire
from agentflow_env.tools.python.tool import PythonCoderTool
from tests.hostile.sandbox_common import (
    HIDDEN,
    REPO,
    _assert_gone,
    _fails,
    _host_stats,
    _ok,
    _start,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Python sandbox needs Linux")


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
    import site
    import sysconfig

    steps = view.build_view(view.DEFAULT_PACKAGES, 1 << 20)
    sources = [s["src"] for s in steps if s["op"] == "ro"]
    allowed_repo_files = {str(REPO / "agentflow_env" / "tools" / "python" / "sandbox" / f) for f in view.SCRIPTS}
    packages = ("numpy", "numpy.libs", "sympy", "mpmath")
    # the interpreter's own package folders, wherever its venv lives (/tmp, a home folder): only these are bound
    site_dirs = {
        os.path.realpath(p)
        for p in (*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))
    }
    for src in sources:
        name = src.rsplit("/", 1)[-1]
        if src.startswith(str(REPO) + "/"):
            if src not in allowed_repo_files:
                assert name in packages, src  # from a venv inside the checkout
            continue  # a checkout under /tmp (a CI clone) is fine: only these entries of it are bound
        if name in packages and os.path.realpath(os.path.dirname(src)) in site_dirs:
            continue  # one of the allowed packages, from the running interpreter's site-packages
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
        wire.send_body(worker_end, wire.CALL_NUMBER.pack(n), json.dumps(reply).encode())

    worker = launcher.Worker(FakeZygote(), 1, host_end)  # type: ignore[arg-type]
    forged = {"output": "A" * 80_000, "dropped": -5, "error": "E" * 20_000, "exc": None}
    send(1, forged)
    reply = worker.call("1", 5, 2000)  # fits the byte limit of the frame, so the caps must do the work
    assert len(reply["output"]) == 2000 and reply["dropped"] == 78_000
    assert len(reply["error"]) <= wire.TRACEBACK_CHARS + 3
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
