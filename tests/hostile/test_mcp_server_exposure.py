"""``agentflow-env mcp-server`` follows env-server's rules: loopback by default, a token required for any other
bind, and with a token every request must carry it (``agentflow_env.remote.exposure``, shared by both servers)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("AGENTFLOW_MCP_SERVER_TOKEN", None)
SERVER = [sys.executable, "-m", "agentflow_env.cli", "mcp-server", "--tools", "calculator"]
TOKEN = "0123456789abcdef0123"


def _run_briefly(args: list[str], seconds: float = 30.0) -> tuple[int | None, str]:
    """The exit code (None: still serving after ``seconds``, then killed) and stderr."""
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=seconds)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        return None, err


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "example.org"])
def test_a_bind_beyond_loopback_without_a_token_is_refused(host: str) -> None:
    pytest.importorskip("mcp")
    port = free_port()
    code, err = _run_briefly([*SERVER, "--transport", "streamable-http", "--host", host, "--port", str(port)])
    assert code not in (None, 0), "the server started with no token beyond loopback"
    assert "token" in err and "beyond this machine" in err, err[-500:]


def test_a_short_token_is_refused() -> None:
    pytest.importorskip("mcp")
    code, err = _run_briefly([*SERVER, "--transport", "streamable-http", "--token", "short", "--port", "1"])
    assert code not in (None, 0) and "at least 16 characters" in err, err[-500:]


def _post(port: int, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/mcp",
            body=body,
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
        )
        return conn.getresponse().status
    finally:
        conn.close()


def test_with_a_token_every_request_must_carry_it() -> None:
    pytest.importorskip("mcp")
    port = free_port()
    proc = subprocess.Popen(
        [*SERVER, "--transport", "streamable-http", "--port", str(port), "--token", TOKEN],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        assert _post(port, {}) == 401
        assert _post(port, {"Authorization": "Bearer wrong-token-of-some-length"}) == 401
        assert _post(port, {"Authorization": f"Bearer {TOKEN}"}) != 401
    finally:
        proc.kill()
        proc.wait(timeout=30)
