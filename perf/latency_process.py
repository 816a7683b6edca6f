"""The loopback LLM server of ``perf/eval_throughput.py`` in a process of its own, and the bare-aiohttp floor.

``python perf/latency_process.py --serve LATENCY FLAVOUR`` serves an OpenAI-compatible ``/v1/chat/completions``
on 127.0.0.1 with aiohttp (one event loop: the server costs the measured client no CPU and little of the
machine), answers every call after LATENCY seconds with the replies of ``eval_throughput.default_reply``
(FLAVOUR ``default``) or of AgentFlow's own prompts (``paper_v2``: one reply every module reads as it needs),
and prints its port. ``GET /stats`` gives the counters since the last ``POST /reset``: requests by kind, when
each finished, the active window (first request in to last reply out), requests in flight (mean, peak), and the
request bodies seen (``GET /bodies``), which :func:`replay_floor` sends again from one asyncio loop with a bare
aiohttp session: the least CPU a client can spend per request.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MAX_BODIES = 20_000  # kept for the floor's replay

# paper-v2 runs AgentFlow's own prompts: one reply that every module reads as it needs (a plan, a command, the
# verifier's STOP, a final answer); the judge gets its structured fields
PAPER_V2_REPLY = (
    "Justification: one generalist call.\nContext: none\nSub-Goal: Answer the question directly.\n"
    "Tool Name: Generalist_Solution_Generator_Tool\n"
    'Generated Command:\n```python\nexecution = tool.execute(query="Answer the question directly.")\n```\n'
    "Conclusion: STOP\nAnswer: <answer>42</answer>"
)


def paper_v2_reply(kind: str, body: dict[str, Any]) -> str:
    if kind != "judge":
        return PAPER_V2_REPLY
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if schema == "AnswerExtraction":
        return json.dumps({"analysis": "a", "extracted_option": "A"})
    if schema:
        return json.dumps({"analysis": "a", "true_false": True})
    return "The answer matches.\nVERDICT: CORRECT"


class _State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.finished: dict[str, list[float]] = {}
        self.bodies: list[str] = []
        self.in_flight = 0
        self.peak = 0
        self.area = 0.0
        self.first: float | None = None
        self.last_end: float | None = None
        self.last = time.monotonic()

    def advance(self) -> None:
        now = time.monotonic()
        self.area += self.in_flight * (now - self.last)
        self.last = now

    def stats(self) -> dict[str, Any]:
        self.advance()
        window = (self.last_end - self.first) if self.first is not None and self.last_end is not None else 0.0
        return {
            "requests": sum(self.kinds.values()),
            "by_kind": dict(self.kinds),
            "finished": self.finished,
            "first_start": self.first,
            "last_end": self.last_end,
            "active_window_s": window,
            "mean_in_flight_active": self.area / window if window > 0 else 0.0,
            "peak_in_flight": self.peak,
            "server_cpu_s": time.process_time(),
        }


def serve(latency: float, flavour: str) -> None:
    from aiohttp import web

    from perf.eval_throughput import classify, default_reply

    state = _State()

    async def chat(request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw)
        state.advance()
        if state.first is None:
            state.first = state.last
        state.in_flight += 1
        state.peak = max(state.peak, state.in_flight)
        if len(state.bodies) < MAX_BODIES:
            state.bodies.append(raw.decode("utf-8"))
        kind = classify(body)
        try:
            await asyncio.sleep(latency)
            text = paper_v2_reply(kind, body) if flavour == "paper_v2" else default_reply(kind, body)
        finally:
            state.advance()
            state.in_flight -= 1
            state.last_end = state.last
            state.kinds[kind] += 1
            state.finished.setdefault(kind, []).append(state.last)
        payload = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
        return web.json_response(payload)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(state.stats())

    async def bodies(request: web.Request) -> web.Response:
        return web.json_response(state.bodies)

    async def reset(request: web.Request) -> web.Response:
        state.reset()
        return web.json_response({"ok": True})

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(
            [
                web.post("/v1/chat/completions", chat),
                web.get("/stats", stats),
                web.get("/bodies", bodies),
                web.post("/reset", reset),
            ]
        )
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # the parent closes stdin: stop
        await runner.cleanup()

    asyncio.run(main())


class ServerProcess:
    """``serve`` in a child process; ``stats``, ``bodies`` and ``reset`` ask it over HTTP."""

    def __init__(self, latency: float, flavour: str = "default"):
        self.latency, self.flavour = latency, flavour
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(latency), flavour],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port = int(self.proc.stdout.readline())
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/v1"

    def _get(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.base + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=60) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        return dict(self._get("/stats"))

    def bodies(self) -> list[str]:
        return list(self._get("/bodies"))

    def reset(self) -> None:
        self._get("/reset", "POST")

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def replay_floor(url: str, bodies: list[str], concurrency: int) -> tuple[float, float]:
    """Send ``bodies`` to ``url``/chat/completions from one asyncio loop with a bare aiohttp session,
    ``concurrency`` in flight; returns (CPU seconds of this process, wall seconds)."""
    import aiohttp

    async def main() -> None:
        slots = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=0)
        headers = {"Content-Type": "application/json", "Authorization": "Bearer EMPTY"}
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(body: str) -> None:
                async with slots:
                    async with session.post(f"{url}/chat/completions", data=body.encode(), headers=headers) as resp:
                        json.loads(await resp.read())

            await asyncio.gather(*(one(b) for b in bodies))

    cpu0, t0 = time.process_time(), time.perf_counter()
    asyncio.run(main())
    return time.process_time() - cpu0, time.perf_counter() - t0


def load_now() -> dict[str, Any]:
    """The machine's load average (1, 5, 15 min) and cores, beside every figure."""
    one, five, fifteen = os.getloadavg()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2)}


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--serve":
    serve(float(sys.argv[2]), sys.argv[3])
