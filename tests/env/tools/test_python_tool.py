"""Python_Coder_Tool: notebook semantics, recycling, lifecycle, and the hostile-input suite (contained, next works).

Hostile tests use 1-2 s timeouts; tests that rely on a sandbox layer skip with a reason when that layer is absent.
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.error import ConfigError, ToolError
from agentflow_env.tools import make_tool
from agentflow_env.tools.python.sandbox import launcher
from agentflow_env.tools.python.sandbox.zygote import _proc_uids
from agentflow_env.tools.python.tool import PythonCoderTool, strip_code_fences

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Python sandbox needs Linux")


@pytest.fixture(scope="module")
def tool():
    t = PythonCoderTool(max_output_chars=2000)
    t.warm_up()
    yield t
    t.close()


def _ok(tool: PythonCoderTool, code: str = "6 * 7") -> None:
    """The call after a hostile one must work normally."""
    result = tool.run(code, 5)
    assert result.ok and result.text == "42", result.text


def _uid_processes(uid: int) -> list[int]:
    return [pid for pid, (u, state) in _proc_uids().items() if u == uid and state != "Z"]


# ------------------------------------------------------------------------------------------------ semantics
def test_make_tool_builds_it_with_no_arguments():
    t = make_tool("python")
    try:
        assert isinstance(t, PythonCoderTool) and t.name == "Python_Coder_Tool"
        assert "Python_Coder_Tool" in t.card() and t.examples
    finally:
        t.close()


def test_printed_output_plus_trailing_expression(tool):
    r = tool.run("print('a')\nx = 2\nx ** 10", 5)
    assert r.ok and r.text == "a\n1024"
    assert tool.run("x = 1", 5).text.startswith("(no output")
    assert tool.run("None", 5).text.startswith("(no output")


def test_each_call_gets_fresh_globals(tool):
    assert tool.run("secret_value = 17", 5).ok
    r = tool.run("secret_value", 5)
    assert not r.ok and "NameError" in r.text and "secret_value" in r.error


def test_error_gives_last_traceback_lines(tool):
    r = tool.run("def f(d):\n    return 1 / d\nprint('before')\nf(0)", 5)
    assert not r.ok and r.error == "ZeroDivisionError: division by zero"
    assert r.text.startswith("before\nError: Traceback")
    assert 'File "<cell>", line 2, in f' in r.text and "return 1 / d" in r.text
    assert "zygote" not in r.text  # the worker's own frames are hidden
    syntax = tool.run("def (:", 5)
    assert not syntax.ok and "SyntaxError" in syntax.text


def test_preloaded_libraries_and_fences(tool):
    r = tool.run(
        "```python\nimport sympy as sp, numpy as np\nx = sp.symbols('x')\n"
        "print(sp.solve(x**2 - 5*x + 6, x))\nint(np.arange(5).sum())\n```",
        5,
    )
    assert r.ok and r.text == "[2, 3]\n10"
    assert strip_code_fences("```py\n1\n```") == "1" and strip_code_fences("a ``` b") == "a ``` b"


def test_fd_level_output_of_subprocesses_is_captured(tool):
    r = tool.run("import subprocess\nsubprocess.run(['echo', 'from-a-child'])\n'done'", 5)
    assert r.ok and "from-a-child" in r.text and r.text.endswith("'done'")


def test_bad_commands_cost_the_call_not_the_tool(tool):
    assert not tool.run("   ", 5).ok
    small = PythonCoderTool(max_code_chars=10)
    try:
        assert "at most 10" in small.run("print('0123456789')", 5).text
    finally:
        small.close()
    with pytest.raises(ConfigError):
        PythonCoderTool(sandbox="docker")
    with pytest.raises(ConfigError):
        PythonCoderTool(recycle="never")


def test_reset_recycles_the_worker_so_no_state_leaks(tool):
    assert tool.run("import math\nmath.leaked = 1\nopen('note.txt', 'w').write('x')", 5).ok
    assert tool.run("import math, os\n(hasattr(math, 'leaked'), os.path.exists('note.txt'))", 5).text == "(True, True)"
    tool.reset()
    assert (
        tool.run("import math, os\n(hasattr(math, 'leaked'), os.path.exists('note.txt'))", 5).text == "(False, False)"
    )


def test_recycle_per_call_gives_a_fresh_process_each_time():
    t = PythonCoderTool(recycle="call", preload=("bisect",))
    try:
        assert t.run("import math\nmath.leaked = 1", 5).ok
        assert t.run("import math\nhasattr(math, 'leaked')", 5).text == "False"
        assert len(t._state.idle) == 1  # the replacement is already forked
    finally:
        t.close()


def test_pool_serves_threads_concurrently():
    import threading

    t = PythonCoderTool(pool_size=2, preload=("bisect",))
    results: list[str] = []
    try:
        t.warm_up()

        def work() -> None:
            for _ in range(4):
                code = (
                    "import time, os\nstart = time.monotonic()\ntime.sleep(0.2)\n"
                    "(os.getpid(), os.readlink('/proc/self/ns/pid'), start, time.monotonic())"
                )
                results.append(t.run(code, 30).text)

        threads = [threading.Thread(target=work) for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=300)
        cells = [ast.literal_eval(text) for text in results]
        assert len(cells) == 8 and len({cell[:2] for cell in cells}) == 2  # two workers, each reused
        # the cells ran at the same time (the clock is the host's in every namespace), not one after another
        assert any(a[:2] != b[:2] and a[2] < b[3] and b[2] < a[3] for a in cells for b in cells)
    finally:
        t.close()


def test_builtins_patched_by_one_call_are_restored_for_the_next(tool):
    assert tool.run("import builtins\nbuiltins.print = None\nbuiltins.len = lambda x: 0", 5).ok
    assert tool.run("print(len('abc'))", 5).text == "3"


# ------------------------------------------------------------------------------------------------ hostile inputs
def test_infinite_loop_is_killed_at_the_timeout(tool):
    start = time.monotonic()
    r = tool.run("while True:\n    pass", 1.0)
    assert not r.ok and r.error == "timeout" and "TimeoutError" in r.text
    assert time.monotonic() - start < 6
    _ok(tool)


def test_ignoring_signals_does_not_defeat_the_timeout(tool):
    code = (
        "import signal\nfor s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGXCPU, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
    )
    r = tool.run(code, 1.0)
    assert not r.ok and r.error == "timeout"
    _ok(tool)


def test_fork_bomb_is_contained_and_swept(tool):
    if os.geteuid() == 0 and not tool.sandbox_info.private_uids:
        pytest.skip("root without private worker uids: RLIMIT_NPROC does not apply to root, so no fork bomb here")
    uid = int(tool.run("import os\nos.getuid()", 5).text)
    host_before = len(_proc_uids())
    r = tool.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", 1.5)
    assert not r.ok and r.error == "timeout"
    if tool.sandbox_info.private_uids:
        assert _uid_processes(uid) == []  # every process of the worker's private uid is gone
    assert len(_proc_uids()) < host_before + 50
    _ok(tool)


def test_background_children_die_with_the_worker_at_reset(tool):
    if not tool.sandbox_info.private_uids:
        pytest.skip("needs private worker uids (run as root with bubblewrap)")
    r = tool.run("import os, subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\nos.getuid()", 5)
    uid = int(r.text)
    left = _uid_processes(uid)
    assert len(left) == 2, left  # the sleep died when the call returned: the worker's supervisor and kernel remain
    tool.reset()  # the used worker is killed in the background
    deadline = time.monotonic() + 30
    while _uid_processes(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _uid_processes(uid) == []
    _ok(tool)


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(10**11)",
        "import numpy as np\nnp.ones(10**11)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(10**8))",
    ],
)
def test_memory_bomb_raises_memory_error(tool, code):
    r = tool.run(code, 20)  # ~1 GB of page faults first: slow on a loaded machine
    assert not r.ok and "MemoryError" in r.text
    _ok(tool)


def test_huge_print_is_cut_with_a_visible_notice(tool):
    r = tool.run("print('x' * 100_000_000)\nimport sys\nsys.stderr.write('y' * 1000)", 10)
    assert r.ok and "[output cut:" in r.text and len(r.text) < 2300
    r = tool.run("import os\nos.system('yes | head -c 50000000')", 10)
    assert "[output cut:" in r.text and len(r.text) < 2300
    _ok(tool)


def test_recursion_bombs(tool):
    r = tool.run("def f(n):\n    return f(n + 1)\nf(0)", 5)
    assert not r.ok and "RecursionError" in r.text and len(r.text) < 3500
    r = tool.run("import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)", 1.5)
    assert not r.ok  # a MemoryError, a crash or the timeout: whichever comes first, it is reported
    _ok(tool)


def test_writing_outside_the_temp_dir_fails(tool, tmp_path):
    info = tool.sandbox_info
    if not (info.readonly_root or info.private_uids):
        pytest.skip("no filesystem isolation here (needs bubblewrap, or root for private uids)")
    os.chmod(tmp_path, 0o755)
    targets = [tmp_path / "escaped.txt", Path(launcher.__file__).parent / "escaped.txt"]
    try:
        for target in targets:
            r = tool.run(f"open({str(target)!r}, 'w').write('pwned')", 5)
            assert not r.ok and ("Error" in r.error or "denied" in r.error), r.text
            assert not target.exists()
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
    assert tool.run("import os\nopen('inside.txt', 'w').write('ok')\nos.path.getsize('inside.txt')", 5).text == "2"


def test_sandbox_tmp_is_size_capped(tool):
    if not tool.sandbox_info.isolated:
        pytest.skip("no isolated sandbox here")
    r = tool.run("import os\nst = os.statvfs('/tmp')\nst.f_blocks * st.f_frsize // 2**20", 5)
    assert int(r.text) <= tool.limits.tmp_mb


def test_socket_to_localhost_reaches_nothing(tool):
    if not tool.sandbox_info.network_isolated:
        pytest.skip(f"no network isolation here ({tool.sandbox_info.notes or 'bubblewrap unavailable'})")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        code = (
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "s.sendall(b'hello from the sandbox')"
        )
        r = tool.run(code, 5)
        assert not r.ok and ("refused" in r.text.lower() or "unreachable" in r.text.lower()), r.text
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing connected
    finally:
        listener.close()
    _ok(tool)


def test_environment_is_scrubbed(tool, monkeypatch):
    monkeypatch.setenv("AGENTFLOW_TEST_SECRET", "s3cr3t-token")
    tool.reset()
    r = tool.run("import os\nsorted(os.environ)", 5)
    keys = eval(r.text)  # a list of names printed by repr()
    allowed = set(launcher._SCRUBBED_ENV) | {"HOME", "TMPDIR", "PWD"}
    assert set(keys) <= allowed, set(keys) - allowed
    r = tool.run("import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ').read())", 5)
    assert "s3cr3t" not in r.text and "PYTEST_CURRENT_TEST" not in r.text


def test_killing_the_host_is_refused(tool):
    info = tool.sandbox_info
    if not (info.private_uids or info.pid_namespace):
        pytest.skip("workers share the host's uid and pid namespace here (no bubblewrap): they could signal it")
    host = os.getpid()
    for code in (f"import os, signal\nos.kill({host}, signal.SIGKILL)", "import os, signal\nos.kill(os.getppid(), 9)"):
        tool.run(code, 5)
        _ok(tool)
    tool.run("import os\nos.kill(-1, 9)", 5)  # at most its own uid, or its own pid namespace
    _ok(tool)
    assert os.getpid() == host


def test_sys_exit_and_os_exit(tool):
    r = tool.run("import sys\nprint('bye')\nsys.exit(3)", 5)
    assert not r.ok and "SystemExit: 3" in r.text and r.text.startswith("bye")
    r = tool.run("import os\nos._exit(7)", 5)
    assert not r.ok and "died" in r.text and "code 7" in r.text
    r = tool.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", 5)
    assert not r.ok and "SIGSEGV" in r.text
    _ok(tool)


def test_unicode_junk(tool):
    junk = "\ud800\udfff\x00\u202e\ufeff😀" + "\u0301" * 500 + "\U0010ffff"
    for code in (junk, f"print({junk!r})\n{junk!r}", "print('\\udcff' * 3)", "# -*- coding: latin-1 -*-\n'é'"):
        r = tool.run(code, 5)
        r.text.encode("utf-8")  # always valid UTF-8 for the observation space
    _ok(tool)


def test_tampering_with_the_channel_only_breaks_that_call(tool):
    r = tool.run(
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\xff' * 64)\n    except OSError:\n"
        "        pass\nwhile True:\n    pass",
        1.0,
    )
    assert not r.ok
    _ok(tool)


# ------------------------------------------------------------------------------------------------ lifecycle
def test_tools_share_one_zygote_and_the_last_close_stops_it():
    key_preload = ("textwrap",)  # a private key, so other tests' zygote is not involved
    tools = [PythonCoderTool(preload=key_preload) for _ in range(3)]
    for t in tools:
        assert t.run("1 + 1", 5).text == "2"
    zyg = launcher.current_zygote(("auto", key_preload))
    assert zyg is not None and all(t._state.idle[0].zygote is zyg for t in tools)
    tools[0].close()
    tools[1].close()
    assert zyg.alive() and tools[2].run("2 + 2", 5).text == "4"
    tools[2].close()
    tools[2].close()  # twice is fine
    assert not zyg.alive() and zyg.proc.poll() is not None
    assert launcher.current_zygote(("auto", key_preload)) is None
    assert zyg.host_root is None or not os.path.exists(zyg.host_root)
    zombies = [p for p, (_, state) in _proc_uids().items() if state == "Z" and _ppid(p) == os.getpid()]
    assert zombies == []


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def test_pickled_copy_and_forked_child_get_their_own_workers(tool):
    import pickle

    copy = pickle.loads(pickle.dumps(tool))
    try:
        assert copy.max_output_chars == tool.max_output_chars and copy.run("6 * 7", 5).text == "42"
    finally:
        copy.close()
    _ok(tool)
    pid = os.fork()
    if pid == 0:  # the child must not talk over the parent's channels: it starts its own zygote
        code = 1
        try:
            code = 0 if tool.run("6 * 7", 30).text == "42" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    _ok(tool)


def test_a_dead_zygote_is_replaced_transparently():
    t = PythonCoderTool(preload=("string",))
    try:
        assert t.run("1", 5).text == "1"
        zyg = launcher.current_zygote(("auto", ("string",)))
        os.killpg(zyg.proc.pid, 9)
        zyg.proc.wait()
        r = t.run("6 * 7", 5)  # the old worker is gone; the call is reported, or served by a new zygote
        if not r.ok:
            _ok(t)
        assert launcher.current_zygote(("auto", ("string",))) is not zyg
    finally:
        t.close()


def test_interpreter_exit_leaves_no_processes():
    script = (
        "from agentflow_env.tools.python.tool import PythonCoderTool\n"
        "from agentflow_env.tools.python.sandbox import launcher\n"
        "t = PythonCoderTool()\n"
        'assert t.run(\'import subprocess; subprocess.Popen(["sleep", "600"])\', 10).ok\n'
        "z = launcher.current_zygote(('auto', ()))\n"
        "print(z.proc.pid, z.uid_base, flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pid_text, base_text = proc.stdout.split()
    time.sleep(0.2)
    assert not Path(f"/proc/{pid_text}").exists()
    if base_text != "None":
        base = int(base_text)
        assert [p for p, (u, st) in _proc_uids().items() if base <= u < base + launcher.UID_SLOTS and st != "Z"] == []


def test_fallback_without_bubblewrap_still_limits_and_times_out(monkeypatch):
    monkeypatch.setenv("AGENTFLOW_TEST_SECRET", "s3cr3t-token")
    t = PythonCoderTool(sandbox="none", preload=("bisect",))
    try:
        info = t.sandbox_info
        assert info.mode == "none" and not info.pid_namespace
        assert t.run("sum(range(10))", 5).text == "45"
        assert "MemoryError" in t.run("bytearray(10**11)", 5).text
        assert t.run("while True:\n    pass", 1.0).error == "timeout"
        assert "s3cr3t" not in t.run("import os\ndict(os.environ)", 5).text
        assert t.run("import os\nos.path.realpath('.').startswith(os.environ['TMPDIR'])", 5).text == "True"
    finally:
        t.close()


def test_require_bwrap_when_asked():
    if os.environ.get("AGENTFLOW_REQUIRE_BWRAP") != "1":
        pytest.skip("set AGENTFLOW_REQUIRE_BWRAP=1 (CI does) to insist that bubblewrap sandboxing works here")
    t = PythonCoderTool(sandbox="bwrap")
    try:
        info = t.sandbox_info
        assert info.mode == "bwrap" and info.isolated
        assert info.private_uids or os.geteuid() != 0
    finally:
        t.close()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")
def test_bwrap_really_runs_bwrap():
    t = PythonCoderTool(sandbox="bwrap", preload=("heapq",))
    try:
        try:
            info = t.sandbox_info
        except ToolError as exc:
            pytest.skip(f"bwrap is installed but cannot sandbox here: {exc}")
        assert info.mode == "bwrap" and info.network_isolated and info.pid_namespace
        # (socket.if_nameindex() needs netlink, which the filter denies: the worker's own /proc says the same)
        code = "[line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]]"
        assert t.run(code, 5).text == "['lo']"
    finally:
        t.close()


# ------------------------------------------------------------------------------------------------ env level
def test_env_episode_survives_malicious_commands():
    from agents.policies.baselines import final_answer, tool_call

    tool = PythonCoderTool()
    task = Task(id="t1", question="What is 6*7?", answer="42", family="math")
    env = AgentFlowEnv([task], lambda p, t: float(p.strip() == t.answer), [tool], max_turns=6, tool_timeout_s=1.0)
    try:
        env.reset(seed=0)
        hostile = ["while True: pass", "import os\nos._exit(1)", "print('z' * 10**8)", "import sys; sys.exit()"]
        for code in hostile:
            obs, reward, terminated, truncated, info = env.step(tool_call("Python_Coder_Tool", code))
            assert not terminated and not truncated and reward == 0
        obs, *_ = env.step(tool_call("Python_Coder_Tool", "6 * 7"))
        assert "42" in obs["memory"]
        _, reward, terminated, _, _ = env.step(final_answer("42"))
        assert terminated and reward == 1.0
    finally:
        env.close()
    assert tool._state.idle == [] and not tool._state.registered


def test_preload_allows_a_package_and_its_dependencies_in_the_sandbox():
    pytest.importorskip("pandas")
    t = PythonCoderTool(preload=("pandas",))
    try:
        assert t.sandbox_info.missing_preloads == ()
        assert t.run("import pandas as pd\npd.DataFrame({'a': [1, 2]}).sum().to_dict()", 30).text == "{'a': 3}"
    finally:
        t.close()


def test_back_to_back_episodes_fork_the_spare_first_and_kill_every_used_worker(monkeypatch):
    """Episodes back to back: the background thread forks the next spare before it kills used workers (a kill
    takes as long as a fork), leaves at most a few used workers waiting, and kills every one in the end."""
    from agentflow_env.tools.python import tool as tool_module

    monkeypatch.setattr(tool_module, "_FRESH_KEPT", 0)  # every spare forked here, none handed on by a closed tool
    monkeypatch.setattr(tool_module, "_FRESH", {})
    t = PythonCoderTool()
    t.warm_up()
    events: list[str] = []
    real_kill, real_spawn = launcher.Worker.kill, launcher.ZygoteProcess.spawn

    def kill(self):  # a slow kill, as on a busy machine
        events.append("kill")
        time.sleep(0.05)
        return real_kill(self)

    def spawn(self, limits):
        events.append("spawn")
        return real_spawn(self, limits)

    monkeypatch.setattr(launcher.Worker, "kill", kill)
    monkeypatch.setattr(launcher.ZygoteProcess, "spawn", spawn)
    used = []
    try:
        for _ in range(6):
            t.reset()
            _ok(t)
            used += [w for w in t._state.idle if w.calls]  # this episode's worker, killed at a later reset
            assert len(t._state.doomed) <= tool_module._MAX_DOOMED + 1
        deadline = time.monotonic() + 30
        while t._state.maintainer is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert t._state.maintainer is None and t._state.doomed == [] and t._state.spare is not None
        assert events.index("spawn") < events.index("kill")  # the first used worker waited for the next spare
        distinct = {id(w): w for w in used}
        assert events.count("kill") >= len(distinct) - 1  # every used worker but the last episode's is killed
    finally:
        monkeypatch.undo()
        t.close()


def test_the_frame_format_is_standalone_and_the_zygote_script_loads_it_beside_itself(tmp_path):
    """``sandbox/wire.py`` imports only the standard library (it is mounted beside the zygote script, where no
    package exists); run as a script, the zygote loads it from its own folder, and both sides use one module."""
    from agentflow_env.tools.python.sandbox import view, wire, zygote

    tree = ast.parse(Path(wire.__file__).read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert "wire.py" in view.SCRIPTS and zygote.wire is wire and launcher.wire is wire
    for name in view.SCRIPTS:  # the script's folder alone, as inside the sandbox
        (tmp_path / name).write_bytes((Path(zygote.__file__).parent / name).read_bytes())
    probe = "import runpy; z = runpy.run_path(%r); print(z['wire'].__name__, z['nslib'].__name__)"
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe % str(tmp_path / "zygote.py")], capture_output=True, text=True
    )
    assert out.stdout.split() == ["wire", "nslib"], out.stderr


def test_a_closed_tools_unused_worker_serves_the_next_tool_and_a_used_one_never_does(monkeypatch):
    """A worker that never ran code outlives its closed tool for the next one of the same sandbox (no fork, no
    kill: each is a round trip to the one zygote); a worker that ran code is killed with its tool."""
    from agentflow_env.tools.python import tool as tool_module

    keep = PythonCoderTool()  # holds the zygote while the others come and go
    keep.warm_up()
    spawns: list[int] = []
    real_spawn = launcher.ZygoteProcess.spawn

    def spawn(self, limits):
        spawns.append(1)
        return real_spawn(self, limits)

    monkeypatch.setattr(launcher.ZygoteProcess, "spawn", spawn)
    try:
        first = PythonCoderTool()
        first.reset()  # waits for its prestarted worker; it runs nothing
        unused = list(first._state.idle)
        assert len(unused) == 1 and unused[0].calls == 0
        first.close()
        spawns.clear()
        second = PythonCoderTool()
        second.reset()
        assert second._state.idle == unused and spawns == []  # the same process, not a new fork
        _ok(second)
        used = second._state.idle[0]
        assert used.calls == 1
        deadline = time.monotonic() + 30
        while second._state.maintainer is not None and time.monotonic() < deadline:
            time.sleep(0.02)  # the spare for its next episode, forked once it ran code
        spare = second._state.spare
        second.close()
        kept = [w for workers in tool_module._FRESH.values() for w in workers]
        assert used not in kept and used.sock.fileno() == -1  # killed with its tool, not kept
        third = PythonCoderTool()
        third.reset()
        assert used not in third._state.idle  # the worker that ran code was killed, never handed on
        assert third._state.idle == ([spare] if spare is not None else third._state.idle)
        _ok(third)
        third.close()
        different = PythonCoderTool(memory_mb=300)  # other limits: never a worker forked with the default ones
        different.reset()
        assert all(w is not spare for w in different._state.idle)
        different.close()
    finally:
        monkeypatch.undo()
        keep.close()
