"""A small OpenAI-compatible HTTP server backed by any Engine (chat and text completions, no streaming).

Concurrent requests with the same sampling settings are batched into one ``generate`` call.
Run it: ``agentflow-env serve hf:runs/tiny-lm --port 8000`` (or ``python -m agentflow_env.engines.server``).
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import astuple, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentflow_env.engines.base import Engine, Prompt, SamplingParams

__all__ = ["EngineServer", "HTTPFault", "main"]

logger = logging.getLogger(__name__)


class HTTPFault(Exception):
    """Raised by an engine behind the server to answer with this HTTP status (429, 500, 503...)."""

    def __init__(self, status: int, message: str = "", retry_after: float | None = None):
        super().__init__(message or f"HTTP {status}")
        self.status = int(status)
        self.message = message or f"HTTP {status}"
        self.retry_after = retry_after


class BadRequest(ValueError):
    """The request body is not one the server can answer (HTTP 400)."""


@dataclass
class _Job:
    prompt: Prompt
    sampling: SamplingParams
    future: Future[str]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise BadRequest("message content must be a string or a list of text parts")


def _sampling(body: dict[str, Any]) -> SamplingParams:
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    n = int(body.get("n") or 1)
    if n != 1:
        raise BadRequest("this server returns one choice per request; send n=1")
    if body.get("stream"):
        raise BadRequest("streaming is not supported; send stream=false")
    defaults = SamplingParams()

    def number(key: str, default: float) -> float:
        value = body.get(key)
        return default if value is None else float(value)

    seed = body.get("seed")
    return SamplingParams(
        temperature=number("temperature", defaults.temperature),
        top_p=number("top_p", defaults.top_p),
        max_tokens=int(number("max_tokens", number("max_completion_tokens", defaults.max_tokens))),
        stop=[str(s) for s in stop],
        seed=None if seed is None else int(seed),
    )


class _Batcher:
    """One worker thread: takes the queued jobs, groups them by sampling settings, one generate each."""

    def __init__(self, engine: Engine, window_s: float, max_batch: int):
        self.engine = engine
        self.window_s = window_s
        self.max_batch = max_batch
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="engine-batcher", daemon=True)
        self.thread.start()

    def submit(self, prompt: Prompt, sampling: SamplingParams) -> Future[str]:
        job = _Job(prompt, sampling, Future())
        self.jobs.put(job)
        return job.future

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            first = self.jobs.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch:
                try:
                    job = self.jobs.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    break
                if job is None:
                    self.jobs.put(None)
                    break
                batch.append(job)
            self._run(batch)

    def _run(self, batch: list[_Job]) -> None:
        groups: dict[tuple[Any, ...], list[_Job]] = {}
        for job in batch:
            key = tuple(tuple(v) if isinstance(v, list) else v for v in astuple(job.sampling))
            groups.setdefault(key, []).append(job)
        for jobs in groups.values():
            try:
                texts = self.engine.generate([j.prompt for j in jobs], jobs[0].sampling)
                if len(texts) != len(jobs):
                    raise RuntimeError(f"the engine returned {len(texts)} completions for {len(jobs)} prompts")
            except BaseException as exc:  # the error goes to each waiting request
                for j in jobs:
                    j.future.set_exception(exc)
                continue
            for j, text in zip(jobs, texts, strict=True):
                j.future.set_result(text)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave at once (no 40-200 ms delayed-ACK stalls)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): nothing to do
            pass

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._send(status, {"error": {"message": message, "type": kind, "code": status}}, headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": self.server.model_name, "object": "model", "created": 0, "owned_by": "agentflow-env"}
            self._send(200, {"object": "list", "data": [model]})
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}; try /v1/chat/completions, /v1/completions or /v1/models")

    def do_POST(self) -> None:
        path = self.path.rstrip("/")
        chat = path.endswith("/chat/completions")
        if not chat and not path.endswith("/completions"):
            self._error(404, f"no route {self.path}; POST /v1/chat/completions or /v1/completions")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            prompt = self._prompt(body, chat)
            sampling = _sampling(body)
        except (BadRequest, ValueError, TypeError) as exc:
            self._error(400, f"bad request: {exc}")
            return
        try:
            text = self.server.batcher.submit(prompt, sampling).result()
        except HTTPFault as fault:
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            self._error(fault.status, fault.message, headers)
            return
        except Exception as exc:
            logger.exception("the engine failed")
            self._error(500, f"the engine failed: {type(exc).__name__}: {exc}")
            return
        self._send(200, self._completion(body, text, chat))

    @staticmethod
    def _prompt(body: dict[str, Any], chat: bool) -> Prompt:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequest("'messages' must be a non-empty list")
            return [{"role": str(m.get("role", "user")), "content": _content_text(m.get("content"))} for m in messages]
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise BadRequest("'prompt' must be one string (send one request per prompt)")
        return prompt

    def _completion(self, body: dict[str, Any], text: str, chat: bool) -> dict[str, Any]:
        common = {
            "id": f"cmpl-{uuid.uuid4().hex[:24]}",
            "created": int(time.time()),
            "model": str(body.get("model") or self.server.model_name),
        }
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            return {**common, "object": "chat.completion", "choices": [choice]}
        choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
        return {**common, "object": "text_completion", "choices": [choice]}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    batcher: _Batcher
    model_name: str


class EngineServer:
    """Serves ``engine`` on ``http://HOST:PORT/v1`` from a background thread (``port=0``: any free port).

    Use as a context manager, or call :meth:`start` and :meth:`close`. ``url`` is the base URL to
    give an OpenAI client (``openai:MODEL@URL``).
    """

    def __init__(
        self,
        engine: Engine,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "agentflow-engine",
        batch_window_s: float = 0.005,
        max_batch: int = 64,
    ):
        self.engine = engine
        self.host = host
        self.port = port
        self.model_name = model_name
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> EngineServer:
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.batcher = _Batcher(self.engine, self.batch_window_s, self.max_batch)
        httpd.model_name = self.model_name
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="engine-server", daemon=True)
        self._thread.start()
        logger.info("serving %s on %s", type(self.engine).__name__, self.url)
        return self

    def close(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.batcher.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> EngineServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env serve`` (and of ``python -m agentflow_env.engines.server``)."""
    parser.add_argument("engine", help="engine spec, e.g. hf:runs/tiny-lm or scripted:replies.json")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port; default: 8000)")
    parser.add_argument("--model-name", default=None, help="the model id clients send (default: the spec target)")
    parser.add_argument(
        "--batch-window",
        type=float,
        default=0.005,
        help="seconds to gather concurrent requests into one batch (default: 0.005)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from agentflow_env.engines import make_engine, parse_spec

    engine = make_engine(args.engine)
    name = args.model_name or parse_spec(args.engine)[1]
    server = EngineServer(engine, args.host, args.port, model_name=name, batch_window_s=args.batch_window)
    server.start()
    from rich.console import Console

    Console(stderr=True).print(f"serving {args.engine} as model {name!r} at {server.url} (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentflow_env.engines.server ENGINE_SPEC [--host H] [--port P] [--model-name NAME]``."""
    parser = argparse.ArgumentParser(description="Serve an agentflow-env engine over the OpenAI HTTP API.")
    configure(parser)
    logging.basicConfig(level=logging.INFO)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
