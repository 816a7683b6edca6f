"""The HTTP engine on the shared event loop, against a loopback aiohttp server: connections are kept alive and
reused, every request of every engine and calling thread runs on one loop thread (no thread, uuid or TLS context
per request), and errors are retried and reported as before (5xx, 429 with Retry-After, unreadable replies)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from agentflow_env.engines.event_loop import shared_loop
from agentflow_env.engines.openai_engine import OpenAIEngine
from agentflow_env.error import EngineError, MalformedReplyError

Reply = tuple[int, dict[str, str], bytes]


def _ok(text: str) -> Reply:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


class Server:
    """An aiohttp server on 127.0.0.1 in a thread of its own; ``answer(body, n)`` gives the n-th reply (from 1)."""

    def __init__(self, answer: Callable[[dict[str, Any], int], Reply]):
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.peers: list[Any] = []  # the client's (host, port) per request: one per connection
        self.client_threads: list[list[str]] = []
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        from aiohttp import web

        async def chat(request: web.Request) -> web.Response:
            body = json.loads(await request.read())
            self.requests.append(body)
            self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
            self.client_threads.append([t.name for t in threading.enumerate()])
            await asyncio.sleep(0.01)
            status, headers, data = self.answer(body, len(self.requests))
            return web.Response(status=status, headers=headers, body=data)

        async def start() -> None:
            app = web.Application()
            app.add_routes([web.post("/v1/chat/completions", chat)])
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"  # type: ignore[union-attr]
            self._ready.set()

        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def __enter__(self) -> Server:
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture
def echo() -> Iterator[Server]:
    with Server(lambda body, n: _ok("re:" + body["messages"][-1]["content"])) as srv:
        yield srv


def test_connections_are_kept_alive_and_reused(echo: Server) -> None:
    engine = OpenAIEngine("m", base_url=echo.url, concurrency=4)
    for i in range(10):
        assert engine.generate([f"q{i}"]) == [f"re:q{i}"]
    assert len(set(echo.peers)) == 1  # ten calls one after the other: one connection
    assert engine.generate([f"b{i}" for i in range(12)]) == [f"re:b{i}" for i in range(12)]  # order kept
    assert engine.generate([f"c{i}" for i in range(12)]) == [f"re:c{i}" for i in range(12)]
    assert len(set(echo.peers)) <= 4  # at most `concurrency` connections, reused across batches
    assert engine.last_usage == [{"prompt_tokens": 3, "completion_tokens": 2}] * 12
    assert engine.usage_total["requests"] == 34


def test_every_request_runs_on_one_loop_thread(echo: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl
    import uuid

    monkeypatch.setattr(uuid, "uuid4", lambda: pytest.fail("a uuid per request"))
    made: list[int] = []
    real_context = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: (made.append(1), real_context(*a, **k))[1])
    one, two = OpenAIEngine("a", base_url=echo.url, concurrency=8), OpenAIEngine("b", base_url=echo.url)
    assert one._event_loop() is two._event_loop() is shared_loop()
    out: dict[int, list[str]] = {}

    def call(k: int) -> None:
        engine = one if k % 2 else two
        out[k] = engine.generate([f"{k}-{i}" for i in range(6)])

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {k: [f"re:{k}-{i}" for i in range(6)] for k in range(4)}
    assert made == []  # no TLS context per request (nor per client)
    for names in echo.client_threads:  # no thread pool per batch, no thread per request
        assert not [n for n in names if n.startswith("openai")]
    assert sum(1 for t in threading.enumerate() if t.name == "agentflow-http") == 1


def test_agenerate_on_the_loop_and_no_blocking_call_there(echo: Server) -> None:
    engine = OpenAIEngine("m", base_url=echo.url)
    loop = shared_loop()
    texts, usage = loop.run(engine.agenerate(["x", "y"]))
    assert texts == ["re:x", "re:y"] and usage == [{"prompt_tokens": 3, "completion_tokens": 2}] * 2

    async def blocking() -> None:
        engine.generate(["z"])

    with pytest.raises(RuntimeError, match="deadlock"):
        loop.run(blocking())


def test_5xx_and_429_are_retried_with_retry_after() -> None:
    def answer(body: dict[str, Any], n: int) -> Reply:
        if n == 1:
            return 503, {"Content-Type": "application/json"}, b'{"error": {"message": "busy"}}'
        if n == 2:
            return 429, {"Retry-After": "0.01"}, b'{"error": {"message": "slow down"}}'
        return _ok("fine")

    with Server(answer) as srv:
        engine = OpenAIEngine("m", base_url=srv.url, backoff=0.01, max_retries=3)
        assert engine.generate(["x"]) == ["fine"]
        assert len(srv.requests) == 3


def test_unreadable_replies_are_retried_then_a_malformed_reply_error() -> None:
    bad = [b"", b"<html>proxy</html>", b'{"choices": [', b'{"choices": []}', b'{"choices": [{"index": 0}]}']

    with Server(lambda body, n: (200, {"Content-Type": "application/json"}, bad[(n - 1) % len(bad)])) as srv:
        engine = OpenAIEngine("m", base_url=srv.url, backoff=0.001, max_backoff=0.01, max_retries=4)
        with pytest.raises(MalformedReplyError, match="after 5 tries"):
            engine.generate(["x"])
        assert len(srv.requests) == 5
    flaky = {"seen": 0}

    def once_bad(body: dict[str, Any], n: int) -> Reply:
        flaky["seen"] += 1
        return (200, {}, b"{not json") if n == 1 else _ok("good")

    with Server(once_bad) as srv:
        engine = OpenAIEngine("m", base_url=srv.url, backoff=0.001, max_retries=2)
        assert engine.generate(["x"]) == ["good"] and flaky["seen"] == 2


def test_a_4xx_fails_at_once_with_the_servers_message() -> None:
    with Server(lambda body, n: (400, {}, b'{"error": {"message": "your prompt is bad"}}')) as srv:
        engine = OpenAIEngine("m", base_url=srv.url, backoff=0.001, max_retries=3)
        with pytest.raises(EngineError, match="your prompt is bad") as caught:
            engine.generate(["x"])
        assert not isinstance(caught.value, MalformedReplyError)
        assert len(srv.requests) == 1


def test_the_request_body_is_what_the_openai_client_sent() -> None:
    from agentflow_env.engines.base import SamplingParams

    with Server(lambda body, n: _ok("ok")) as srv:
        engine = OpenAIEngine("m", base_url=srv.url, extra_body={"top_k": 20})
        sampling = SamplingParams(temperature=0.5, top_p=0.9, max_tokens=7, stop=["X"], seed=3)
        engine.generate([[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]], sampling)
        assert srv.requests[0] == {
            "model": "m",
            "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
            "temperature": 0.5,
            "top_p": 0.9,
            "max_tokens": 7,
            "stop": ["X"],
            "seed": 3,
            "top_k": 20,
        }


def test_the_environments_proxy_is_used_and_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY / NO_PROXY apply as they do for the openai client, read once per URL (not on a worker thread
    per request, as aiohttp's trust_env does)."""
    import concurrent.futures

    real_submit = concurrent.futures.ThreadPoolExecutor.submit
    hops: list[Any] = []

    def counting_submit(self: Any, fn: Any, *a: Any, **k: Any) -> Any:
        hops.append(fn)
        return real_submit(self, fn, *a, **k)

    monkeypatch.setattr(
        concurrent.futures.ThreadPoolExecutor,
        "submit",
        counting_submit,
    )
    with Server(lambda body, n: _ok("via proxy")) as proxy, Server(lambda body, n: _ok("direct")) as direct:
        proxy_port = proxy.url.split(":")[2].split("/")[0]
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.delenv("http_proxy", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        # a host that does not resolve: only the proxy can answer for it
        far = OpenAIEngine("m", base_url=f"http://upstream-{proxy_port}.invalid/v1", max_retries=0)
        assert far.generate(["x", "y"]) == ["via proxy", "via proxy"]
        assert len(proxy.requests) == 2 and direct.requests == []
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        near = OpenAIEngine("m", base_url=direct.url, max_retries=0)
        assert near.generate(["z"]) == ["direct"]  # NO_PROXY names the host: the proxy is not asked
        assert len(proxy.requests) == 2 and len(direct.requests) == 1
    assert hops == []  # no thread hop per request (aiohttp's trust_env makes two)


def test_run_hands_back_results_and_exceptions_and_a_closed_loop_fails_its_waiting_calls() -> None:
    from agentflow_env.engines.event_loop import EventLoopThread

    loop = EventLoopThread(name="agentflow-http-test")
    try:

        async def value(x: int) -> int:
            await asyncio.sleep(0)
            return x * 2

        async def boom() -> None:
            raise KeyError("boom")

        async def cancelled() -> None:
            raise asyncio.CancelledError

        assert [loop.run(value(k)) for k in range(3)] == [0, 2, 4]
        with pytest.raises(KeyError, match="boom"):
            loop.run(boom())
        with pytest.raises(asyncio.CancelledError):
            loop.run(cancelled())
        assert not loop._running  # nothing kept once the calls are over

        started = threading.Event()

        async def forever() -> None:
            started.set()
            await asyncio.Event().wait()

        failed: list[BaseException] = []

        def wait_forever() -> None:
            try:
                loop.run(forever())
            except BaseException as exc:
                failed.append(exc)

        waiter = threading.Thread(target=wait_forever)
        waiter.start()
        assert started.wait(5)
    finally:
        loop.close()
    waiter.join(5)
    assert not waiter.is_alive(), "a call waiting on a closed loop hangs"
    assert len(failed) == 1 and isinstance(failed[0], EngineError)
    coro = value(1)
    with pytest.raises(EngineError, match="closed"):
        loop.run(coro)


def test_the_loop_is_uvloops_when_installed_and_the_variable_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentflow_env.engines.event_loop import new_event_loop
    from agentflow_env.error import ConfigError

    monkeypatch.setenv("AGENTFLOW_EVENT_LOOP", "asyncio")
    loop = new_event_loop()
    assert type(loop).__module__.startswith("asyncio")
    loop.close()
    monkeypatch.setenv("AGENTFLOW_EVENT_LOOP", "tokio")
    with pytest.raises(ConfigError, match="AGENTFLOW_EVENT_LOOP"):
        new_event_loop()
    uvloop = pytest.importorskip("uvloop")
    for choice in ("", "uvloop"):
        monkeypatch.setenv("AGENTFLOW_EVENT_LOOP", choice)
        loop = new_event_loop()
        assert isinstance(loop, uvloop.Loop)
        loop.close()


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_replies_are_the_same_on_either_loop(choice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if choice == "uvloop":
        pytest.importorskip("uvloop")
    from agentflow_env.engines import event_loop

    monkeypatch.setenv("AGENTFLOW_EVENT_LOOP", choice)
    monkeypatch.setattr(event_loop, "_SHARED", None)  # a fresh shared loop of the chosen kind
    with Server(lambda body, n: _ok("re:" + body["messages"][-1]["content"])) as server:
        engine = OpenAIEngine("m", base_url=server.url, concurrency=4)
        assert engine.generate([f"q{i}" for i in range(5)]) == [f"re:q{i}" for i in range(5)]
        assert type(engine._event_loop().loop).__module__.startswith(choice)
    event_loop.shared_loop().close()
