"""The env server under hostile and heavy traffic, on loopback and bounded in time: malformed frames,
slow clients (slowloris), and 1,000 connections at once. After each it still serves, and its threads
and memory stay bounded."""

from __future__ import annotations

import json
import random
import resource
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.remote.client import RemoteEnv
from agentflow_env.remote.server import EnvServer

HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"


def _addr(srv: EnvServer) -> tuple[str, int]:
    parts = urlsplit(srv.url)
    return parts.hostname, parts.port


def _exchange(addr: tuple[str, int], data: bytes, wait: float = 3.0) -> bytes:
    with socket.create_connection(addr, timeout=wait) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            out.append(chunk)
        return b"".join(out)


def _still_serves(srv: EnvServer) -> None:
    out = _exchange(_addr(srv), HEALTH)
    assert out.startswith(b"HTTP/1.1 200"), out[:200]
    env = RemoteEnv("agentflow/Gen-GameOf24-v1", srv.url, split="test", timeout_s=30)
    try:
        assert env.reset(seed=0)[0]["question"]
        assert env.step("Final Answer: 24")[2]
    finally:
        env.close()


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture()
def srv():
    server = EnvServer("127.0.0.1", 0, max_connections=64, read_timeout_s=1.0, idle_connection_s=2.0, workers=4)
    server.start()
    yield server
    server.close()


def _malformed(rng: random.Random) -> bytes:
    body = json.dumps({"env_id": "agentflow/Gen-GameOf24-v1"}).encode()
    choices = [
        lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 400))),  # noise
        lambda: b"GET\r\n\r\n",
        lambda: b"GET / HTTP/9.9\r\n\r\n",
        lambda: b"POST /v1/episodes HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        lambda: b"POST /v1/episodes HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        lambda: b"POST /v1/episodes HTTP/1.1\r\nContent-Length: 5\r\n\r\n{",  # short body
        lambda: b"POST /v1/episodes HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body[::-1]),
        lambda: b"POST /v1/episodes HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",  # headers over the limit
        lambda: b"POST /v1/episodes HTTP/1.1\r\nbad header line\r\n\r\n",
        lambda: b'POST /v1/step_many HTTP/1.1\r\nContent-Length: 12\r\n\r\n{"steps": 5}',
        lambda: b"POST /v1/episodes/" + b"%" * 3000 + b"/step HTTP/1.1\r\n\r\n",
        lambda: b"\r\n\r\n" * 50,
        lambda: b"POST /v1/episodes HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]" * 3,
        lambda: json.dumps({"env_id": "x" * 1000}).encode(),
    ]
    return rng.choice(choices)()


def test_malformed_frames_get_an_error_or_a_close_and_never_take_the_server_down(srv):
    rng = random.Random(0)
    addr = _addr(srv)
    for _ in range(300):
        out = _exchange(addr, _malformed(rng), wait=2.0)
        if out:
            assert out.startswith(b"HTTP/1.1 4") or out.startswith(b"HTTP/1.1 5"), out[:120]
            assert out.count(b"HTTP/1.1 ") == 1  # nothing after the error was taken for a request
    _still_serves(srv)


def test_slow_clients_are_cut_off_and_hold_no_thread(srv):
    addr = _addr(srv)
    threads_before = threading.active_count()
    socks = []
    for _ in range(40):
        sock = socket.create_connection(addr, timeout=5)
        sock.sendall(b"POST /v1/episodes HTTP/1.1\r\n")  # and then one byte now and then, never the end
        socks.append(sock)
    started = time.monotonic()
    closed = 0
    while time.monotonic() - started < 8 and closed < len(socks):
        closed = 0
        for sock in socks:
            try:
                sock.sendall(b"X")
                sock.settimeout(0.01)
                data = sock.recv(4096)
                closed += data == b"" or data.startswith(b"HTTP/1.1 408")
            except (TimeoutError, BlockingIOError):
                pass
            except OSError:
                closed += 1
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    for sock in socks:
        sock.close()
    assert closed == len(socks), f"{closed}/{len(socks)} slow connections were closed within {elapsed:.1f} s"
    assert threading.active_count() <= threads_before + 1  # asyncio holds them, not threads
    _still_serves(srv)


def test_a_thousand_connections_at_once_leave_threads_and_memory_bounded(srv):
    addr = _addr(srv)
    _still_serves(srv)  # warm: the first env's imports and pools are not the server's growth
    rss_before = _rss_mb()
    threads_before = threading.active_count()
    socks = []
    for i in range(1000):
        sock = socket.create_connection(addr, timeout=10)
        if i % 2:
            sock.sendall(HEALTH)  # half ask something, half stay idle
        socks.append(sock)
    answered = refused = closed = 0
    for sock in socks:
        sock.settimeout(5)
        try:
            data = sock.recv(4096)
        except TimeoutError:
            continue  # a hang: counted by its absence below
        except OSError:
            data = b""
        answered += data.startswith(b"HTTP/1.1 200")
        refused += data.startswith(b"HTTP/1.1 503")
        closed += data == b""  # an idle connection within the cap, closed after idle_connection_s
        if data.startswith(b"HTTP/1.1 503"):
            assert b"maximum of 64 connections" in data
    peak_threads = threading.active_count()
    health = srv.health()
    for sock in socks:
        sock.close()
    assert answered + refused + closed == 1000, (answered, refused, closed)  # no connection hangs
    assert refused >= 500 and answered >= 64, (answered, refused, closed)  # beyond the cap: a clear 503
    assert health["connections"] <= 64
    assert peak_threads <= threads_before + srv.workers + 1
    assert _rss_mb() - rss_before < 150, f"RSS grew {_rss_mb() - rss_before:.0f} MB"
    deadline = time.monotonic() + 10
    while srv.health()["connections"] > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.health()["connections"] <= 1
    _still_serves(srv)
