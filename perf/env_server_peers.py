"""The servers ``perf/env_server.py`` runs its load against, each in its own process on loopback.

- the real env server (``agentflow-env env-server --port 0``);
- a replay server: a stdlib asyncio server (TCP_NODELAY) that answers every request with one recorded
  episode's replies from the real server and does nothing else (what the same clients get without env work);
- an echo server: a stdlib asyncio HTTP echo (the floor of a loopback request on this machine).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

__all__ = ["start_echo", "start_replay", "start_server", "stop"]


def start_server(*flags: str) -> tuple[subprocess.Popen, str]:
    """The env server in its own session (``--port 0``); returns it and its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "agentflow_env.cli", "env-server", "--port", "0", "--max-episodes", "4096", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    line = server.stdout.readline()
    return server, line.split(" on ")[1].split()[0]


def stop(server: subprocess.Popen) -> None:
    """Stop a server started here (its whole process group)."""
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(30)


_ECHO = r"""
import asyncio, socket, sys
async def handle(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
            body = await reader.readexactly(n)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except Exception:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


_REPLAY = r"""
import asyncio, json, socket, sys
replies = json.load(open(sys.argv[1]))  # the bodies the real server gave: create, reset, each step, delete
bodies = {k: [v.encode() for v in vs] for k, vs in replies.items()}
async def handle(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    steps = 0
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].split(b" ")
            n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
            await reader.readexactly(n[0] if n else 0)
            path = line[1]
            if line[0] == b"DELETE":
                body = bodies["delete"][0]
            elif path.endswith(b"/reset"):
                body, steps = bodies["reset"][0], 0
            elif path.endswith(b"/step"):
                body, steps = bodies["step"][min(steps, len(bodies["step"]) - 1)], steps + 1
            else:
                body = bodies["create"][0]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Connection: keep-alive\r\n\r\n" % len(body) + body)
    except Exception:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


def _record_replies(url: str, env_id: str, path: str) -> None:
    """One episode's reply bodies from the real server, for the replay server."""
    from agentflow_env.remote.client import _Transport
    from agents.policies.scripted import scripted_planner_for

    http = _Transport(url, 60, None)
    planner = scripted_planner_for(env_id)
    create = http.request("POST", "/v1/episodes", {"env_id": env_id, "kwargs": {"split": "test"}})
    base = f"/v1/episodes/{create['episode_id']}"
    reset = http.request("POST", f"{base}/reset", {"seed": 0, "options": None})
    steps, obs, done = [], reset["observation"], False
    while not done:
        out = http.request("POST", f"{base}/step", {"action": planner.act([obs])[0]})
        steps.append(out)
        obs, done = out["observation"], out["terminated"] or out["truncated"]
    delete = http.request("DELETE", base, None)
    http.close()
    replies = {"create": [create], "reset": [reset], "step": steps, "delete": [delete]}
    with open(path, "w") as fh:
        json.dump({k: [json.dumps(v) for v in vs] for k, vs in replies.items()}, fh)


def start_replay(url: str, env_id: str, folder: str) -> tuple[subprocess.Popen, str]:
    """A stdlib asyncio server (TCP_NODELAY) that answers the client's requests with one recorded episode's
    replies and does nothing else: what the same clients get from a server without env work."""
    path = os.path.join(folder, "replies.json")
    _record_replies(url, env_id, path)
    replay = subprocess.Popen(
        [sys.executable, "-c", _REPLAY, path], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    return replay, f"http://127.0.0.1:{int(replay.stdout.readline())}"


def start_echo() -> tuple[subprocess.Popen, int]:
    """A stdlib asyncio HTTP echo with TCP_NODELAY in its own process: the floor of a loopback request here."""
    echo = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True, start_new_session=True)
    return echo, int(echo.stdout.readline())
