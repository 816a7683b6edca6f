"""The Python tool through a sandbox service (``sandbox="remote:URL"``) and ``agentflow-env sandbox-server``.

SandboxFusion's wire format both ways: this project's client against a SandboxFusion-style stub written here, and
a plain SandboxFusion request against this project's server. The stub runs the test's own code unisolated in a
temporary folder (it stands in for the service; every cell it runs is written below). The server runs cells in
the real sandbox and skips where none can start.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentflow_env.error import ConfigError, ToolError
from agentflow_env.tools.python.tool import PythonCoderTool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Python sandbox needs Linux")

REPO = Path(__file__).resolve().parents[3]
TOKEN = "t0ken-for-the-sandbox-server-tests"


class SandboxFusionStub:
    """A SandboxFusion-style ``/run_code``: ``python -c code`` in a folder, answered in SandboxFusion's format.
    ``busy`` answers that many requests 503 first; every request body is kept in ``requests``."""

    def __init__(self, folder: Path):
        self.requests: list[dict] = []
        self.busy = 0
        self.dead = False
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if stub.dead:  # a kept-alive connection to a service that went away: closed without a reply
                    self.close_connection = True
                    return
                stub.requests.append(body)
                if stub.busy > 0:
                    stub.busy -= 1
                    self._send(503, {"detail": "busy"})
                    return
                self._send(200, stub.run(body))

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.folder = folder
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def run(self, body: dict) -> dict:
        assert body["language"] == "python"
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", body["code"]],
                input=body.get("stdin") or "",
                capture_output=True,
                text=True,
                timeout=body["run_timeout"],
                cwd=self.folder,
            )
        except subprocess.TimeoutExpired:
            result = {"status": "TimeLimitExceeded", "execution_time": body["run_timeout"], "return_code": None}
            return {"status": "Failed", "message": "", "run_result": {**result, "stdout": "", "stderr": ""}}
        run = {"status": "Finished", "execution_time": 0.1, "return_code": done.returncode}
        run.update(stdout=done.stdout, stderr=done.stderr)
        return {"status": "Success" if done.returncode == 0 else "Failed", "message": "", "run_result": run}

    def close(self) -> None:
        self.dead = True
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub(tmp_path):
    s = SandboxFusionStub(tmp_path)
    yield s
    s.close()


@pytest.fixture(scope="module")
def server():
    from agentflow_env.remote.sandbox_server import SandboxServer

    try:
        srv = SandboxServer(port=0, concurrency=2, idle_timeout_s=30).start()
    except ToolError as exc:
        if os.environ.get("AGENTFLOW_REQUIRE_BWRAP") == "1":
            raise
        pytest.skip(f"no sandbox can start here, so no sandbox server: {exc}")
    yield srv
    srv.close()


def _post(url: str, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


# ------------------------------------------------------------------ our client, a SandboxFusion-style service
def test_the_remote_backend_speaks_sandboxfusion_and_keeps_an_episodes_state_by_replay(stub):
    tool = PythonCoderTool(sandbox=f"remote:{stub.url}/run_code", memory_mb=300, max_output_chars=500)
    try:
        tool.reset()
        first = tool.run("import math\nmath.answer = 21\nopen('state.txt', 'w').write('kept')\nprint('set')", 10)
        assert first.ok and first.text == "set", first.text
        second = tool.run("import math\nmath.answer * 2, open('state.txt').read()", 10)
        assert second.ok and second.text == "(42, 'kept')", second.text  # the first cell replayed, its output not shown
        sent = stub.requests[0]
        assert sent["language"] == "python" and sent["memory_limit_MB"] == 300 and sent["run_timeout"] == 10
        assert sent["stdin"] == "" and sent["files"] == {} and sent["fetch_files"] == []
        assert stub.requests[1]["run_timeout"] > 10  # the replay has time of its own
        raised = tool.run("x = 1\n1/0", 10)
        assert not raised.ok and raised.error == "ZeroDivisionError: division by zero"
        assert 'File "<cell>", line 2' in raised.text  # the local tool's traceback, cut the same way
        long = tool.run("print('a' * 2000)", 10)
        assert long.text.startswith("a" * 500) and "[output cut: 1501 more characters" in long.text
        died = tool.run("import os\nos._exit(3)", 10)
        assert not died.ok and "exited with code 3" in died.text, died.text
        lost = tool.run("import math\ngetattr(math, 'answer', 'gone')", 10)
        assert lost.text == "'gone'"  # the worker died: its state went with it, as locally
        tool.run("import math\nmath.answer = 1", 10)
        timed_out = tool.run("while True: pass", 1)
        assert not timed_out.ok and timed_out.error == "timeout"
        assert tool.run("import math\ngetattr(math, 'answer', 'gone')", 10).text == "'gone'"
        tool.run("import math\nmath.answer = 2", 10)
        tool.reset()
        assert tool.run("import math\ngetattr(math, 'answer', 'gone')", 10).text == "'gone'"  # a new episode
        assert tool.sandbox_info.mode == "remote" and not tool.sandbox_info.isolated  # unknown: not claimed
    finally:
        tool.close()


def test_busy_answers_are_retried_and_a_dead_service_is_that_turns_tool_error(stub):
    tool = PythonCoderTool(sandbox=f"remote:{stub.url}")
    try:
        stub.busy = 2
        r = tool.run("6 * 7", 10)
        assert r.ok and r.text == "42" and len(stub.requests) == 3  # two 503s, retried with backoff
        stub.close()
        dead = tool.run("6 * 7", 10)
        assert not dead.ok and dead.error == "remote sandbox failed"
        assert stub.url in dead.text and "did not run here either" in dead.text
    finally:
        tool.close()


def test_the_paper_flows_coder_runs_its_code_remotely(stub):
    from agentflow_env.engines.base import SamplingParams
    from agentflow_env.engines.scripted import ScriptedEngine
    from agentflow_env.paper_flow.toolbox import PythonCodeGeneratorTool

    engine = ScriptedEngine(["```python\nprint('sum:', sum(i * i for i in range(1, 11)))\n```"])
    tool = PythonCodeGeneratorTool(engine, SamplingParams(), "sys", str, sandbox=f"remote:{stub.url}")
    try:
        tool.timeout = 30.0
        assert tool.execute(query="sum of squares")["printed_output"] == "sum: 385"
        assert len(stub.requests) == 1
    finally:
        tool.close()


def test_remote_urls_are_checked_and_the_mode_can_come_from_the_environment(monkeypatch, stub):
    for bad in ("remote:https://host:1", "remote:ftp://x", "remote:http://h:1/?token=x"):
        with pytest.raises(ConfigError):
            PythonCoderTool(sandbox=bad)
    monkeypatch.setenv("AGENTFLOW_SANDBOX", f"remote:{stub.url}")
    tool = PythonCoderTool()  # sandbox="auto" reads it, as for the local modes
    try:
        assert tool.run("6 * 7", 10).text == "42" and len(stub.requests) == 1
    finally:
        tool.close()


# ------------------------------------------------------------------ our server
def test_the_server_answers_a_plain_sandboxfusion_request(server):
    code = "import sys\nname = input()\nprint(open('in/data.txt').read() + name)\nprint('warn', file=sys.stderr)\n"
    code += "open('out.txt', 'w').write('made')\nsys.exit(3)\n"
    body = {
        "code": code,
        "language": "python",
        "compile_timeout": 10,
        "run_timeout": 10,
        "memory_limit_MB": 256,
        "stdin": "bob\n",
        "files": {"in/data.txt": base64.b64encode(b"hello ").decode()},
        "fetch_files": ["out.txt"],
    }
    status, reply = _post(server.url, "/run_code", body)
    assert status == 200 and reply["status"] == "Failed", reply
    run = reply["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 3
    assert run["stdout"] == "hello bob\n" and run["stderr"] == "warn\n"
    assert base64.b64decode(reply["files"]["out.txt"]) == b"made"
    status, reply = _post(server.url, "/run_code", {"code": "1 + 1", "language": "python"})
    assert reply["status"] == "Success" and reply["run_result"]["stdout"] == ""  # a script: no value shown
    status, reply = _post(server.url, "/run_code", {"code": "raise ValueError('no')", "language": "python"})
    assert reply["run_result"]["return_code"] == 1 and "ValueError: no" in reply["run_result"]["stderr"]
    status, reply = _post(server.url, "/run_code", {"code": "while True: pass", "language": "python", "run_timeout": 1})
    assert reply["status"] == "Failed" and reply["run_result"]["status"] == "TimeLimitExceeded"
    status, reply = _post(server.url, "/run_code", {"code": "int main(){}", "language": "cpp"})
    assert reply["status"] == "SandboxError" and "Python only" in reply["message"]
    status, reply = _post(server.url, "/run_code", {"language": "python"})
    assert status == 400 and "code" in reply["error"]


def test_through_the_server_an_episode_keeps_its_state_and_survives_a_lost_session(server):
    tool = PythonCoderTool(sandbox=f"remote:{server.url}", tmp_mb=8)
    try:
        tool.reset()
        assert tool.run("import math\nmath.answer = 21\nopen('/tmp/state.txt', 'w').write('kept')", 10).ok
        assert tool.run("import math\nmath.answer * 2, open('/tmp/state.txt').read()", 10).text == "(42, 'kept')"
        assert tool.sandbox_info.isolated and tool.sandbox_info.mode == "remote"
        with server._table_lock:  # the server forgets the session (a restart, or its idle timeout)
            sessions = list(server._sessions.values())
            server._sessions.clear()
        for session in sessions:
            server._end_held(session)
        again = tool.run("import math\nmath.answer + 1, open('/tmp/state.txt').read()", 10)
        assert again.text == "(22, 'kept')", again.text  # the cells were replayed into a fresh worker
        big = tool.run("open('/tmp/big', 'wb').write(b'x' * 20 * 2**20)", 10)
        assert not big.ok  # the client's tmp_mb=8 holds on the server
        tool.reset()
        assert tool.run("import os\nos.path.exists('/tmp/state.txt')", 10).text == "False"
    finally:
        tool.close()


def test_the_server_needs_a_token_beyond_loopback_and_checks_it(server):
    from agentflow_env.remote.sandbox_server import SandboxServer

    with pytest.raises(ConfigError, match="token"):
        SandboxServer("0.0.0.0", 0)  # refused before it binds or starts a sandbox
    with pytest.raises(ConfigError, match="16 characters"):
        SandboxServer("0.0.0.0", 0, token="short")
    with pytest.raises(ConfigError, match="isolated"):
        SandboxServer(port=0, sandbox="none")
    for weak in ("none", f"remote:{server.url}"):  # nor through the environment
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AGENTFLOW_SANDBOX", weak)
            with pytest.raises(ConfigError, match="isolated"):
                SandboxServer(port=0)
    guarded = SandboxServer(port=0, token=TOKEN, concurrency=1, queue=0).start()
    try:
        body = {"code": "print(6 * 7)", "language": "python"}
        status, reply = _post(guarded.url, "/run_code", body)
        assert status == 401 and "AGENTFLOW_SANDBOX_TOKEN" in reply["error"]
        status, reply = _post(guarded.url, "/run_code", body, {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and reply["run_result"]["stdout"] == "42\n"
        status, reply = _post(guarded.url, f"/token/{TOKEN}/run_code", body)  # for clients without headers (verl)
        assert status == 200 and reply["run_result"]["stdout"] == "42\n"
        assert _post(guarded.url, "/token/wrong-token-of-some-length/run_code", body)[0] == 401
        slow = {"code": "import time\ntime.sleep(3)", "language": "python", "run_timeout": 10}
        auth = {"Authorization": f"Bearer {TOKEN}"}
        first = threading.Thread(target=_post, args=(guarded.url, "/run_code", slow, auth))
        first.start()
        deadline = time.monotonic() + 20
        while guarded._in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        status, reply = _post(guarded.url, "/run_code", body, auth)  # one cell running, no queue: refused at once
        first.join()
        assert status == 503 and "busy" in reply["error"]
        tool = PythonCoderTool(sandbox=f"remote:{guarded.url}", remote_token=TOKEN)
        try:
            assert tool.run("6 * 7", 10).text == "42"
        finally:
            tool.close()
    finally:
        guarded.close()


# ------------------------------------------------------------------ a node without CAP_SYS_ADMIN
_NO_ADMIN_EPISODE = textwrap.dedent(
    """
    import json, sys
    from agentflow_env.tools.python.tool import PythonCoderTool
    out = {}
    for mode in ("auto", "bwrap", "namespaces"):
        tool = PythonCoderTool(sandbox=mode, prestart=False)
        out[mode] = tool.run("6 * 7", 10).text
        tool.close()
    tool = PythonCoderTool(sandbox="remote:" + sys.argv[1])
    tool.reset()
    out["remote"] = [tool.run(code, 10).text for code in (
        "import math\\nmath.answer = 21\\n_ = open('/tmp/s.txt', 'w').write('kept')",
        "import math\\nmath.answer * 2, open('/tmp/s.txt').read()",
    )]
    tool.reset()
    out["remote"].append(tool.run("import math\\ngetattr(math, 'answer', 'gone')", 10).text)
    tool.close()
    print(json.dumps(out))
    """
)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to drop caps")
def test_without_cap_sys_admin_local_modes_refuse_and_remote_runs_the_episode(server):
    env = {k: v for k, v in os.environ.items() if k != "AGENTFLOW_SANDBOX"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--", sys.executable, "-c"]
        + [_NO_ADMIN_EPISODE, server.url],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "refuses to run untrusted code" in out["auto"], out["auto"]
    assert out["bwrap"].startswith("Error") and out["namespaces"].startswith("Error"), out
    assert "42" not in out["bwrap"] + out["namespaces"]
    assert out["remote"][1:] == ["(42, 'kept')", "'gone'"] and out["remote"][0].startswith("(no output"), out["remote"]
