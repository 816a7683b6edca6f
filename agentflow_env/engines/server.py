"""``agentflow-env serve``: any Engine behind an OpenAI-compatible HTTP server (chat and text completions).

The wire format (requests, replies, stream chunks, tool calls) is :mod:`agentflow_env.engines.openai_wire`;
this module is the batcher and the HTTP server. Concurrent requests with the same sampling settings are
batched into one engine call (transformers: one left-padded ``generate`` per batch). Every reply carries
``usage`` (exact where the engine reports tokens, else an estimate flagged ``"estimated": true``) and
``finish_reason`` ``"length"`` when cut at ``max_tokens``; ``n`` and ``stream`` work (a streamed reply is
generated whole, then sent in token pieces). An unknown model is a 404; a field the server cannot honour
(``logit_bias``, JSON mode...) is a 400 that names it. ``max_tokens`` is capped to the model's context minus
the prompt (:func:`fit_to_context`); a prompt that fills the context alone is a 400.
``tools`` work: see ``openai_wire``.

Under load: at most ``max_queue`` requests wait or run; one more is answered 503 with ``Retry-After``. A
request whose client disconnects (a client-side timeout closes the connection) is cancelled while it waits,
and its queue slot freed, so a client's retries do not pile up behind its abandoned requests; one already
generating on a transformers engine has its rows stopped at the next token.

Token-exact mode, for trainers in another process: send ``prompt_token_ids`` (or a completions ``prompt``
that is a list of token ids, or ``return_token_ids: true``) and the reply has ``prompt_token_ids``, each
choice's ``token_ids`` and per-token raw log-probs, so nothing is re-tokenised.

Run it: ``agentflow-env serve hf:runs/tiny-lm --port 8000`` (or ``python -m agentflow_env.engines.server``).
"""

from __future__ import annotations

import functools
import json
import logging
import queue
import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import astuple, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentflow_env.engines.base import Engine, SamplingParams
from agentflow_env.engines.completions import Completion, TokenPrompt, complete, reports_tokens
from agentflow_env.engines.openai_wire import (
    BadRequest,
    HTTPFault,
    UnknownModel,
    parse_request,
    reply,
    stream_events,
    tool_prompt,
    uses_tools,
)
from agentflow_env.error import ConfigError

__all__ = ["EngineServer", "HTTPFault"]

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    prompt: TokenPrompt
    sampling: SamplingParams
    future: Future[list[Completion]]
    abandoned: threading.Event = field(default_factory=threading.Event)  # its client left while it ran


class _Batcher:
    """One worker thread: takes the queued jobs, groups them by sampling settings, one engine call each.

    ``max_queue`` bounds the jobs waiting or running (a full queue raises ``HTTPFault(503)``); a job
    cancelled while it waits is skipped and its slot freed at once.
    """

    def __init__(self, engine: Engine, window_s: float, max_batch: int, max_queue: int = 256):
        self.engine = engine
        self.window_s = window_s
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self.pending = 0  # jobs submitted and not yet finished or cancelled
        self.cancelled = 0
        self.prompts_run = 0
        self.thread = threading.Thread(target=self._loop, name="engine-batcher", daemon=True)
        self.thread.start()

    def submit(self, prompt: TokenPrompt, sampling: SamplingParams) -> _Job:
        with self._lock:
            if self.pending >= self.max_queue:
                raise HTTPFault(503, f"the server is busy: {self.pending} requests are queued", retry_after=1.0)
            self.pending += 1
        job = _Job(prompt, sampling, Future())
        job.future.add_done_callback(self._done)
        self.jobs.put(job)
        return job

    def _done(self, future: Future[list[Completion]]) -> None:
        with self._lock:
            self.pending -= 1
            if future.cancelled():
                self.cancelled += 1

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
            # a job whose client went away was cancelled: it is not run
            self._run([j for j in batch if j.future.set_running_or_notify_cancel()])

    def _run(self, batch: list[_Job]) -> None:
        groups: dict[tuple[Any, ...], list[_Job]] = {}
        for job in batch:
            key = tuple(tuple(v) if isinstance(v, list) else v for v in astuple(job.sampling))
            groups.setdefault(key, []).append(job)
        for jobs in groups.values():
            try:
                self.prompts_run += len(jobs)
                results = complete(
                    self.engine,
                    [j.prompt for j in jobs],
                    jobs[0].sampling,
                    abandoned=functools.partial(_abandoned, jobs),
                )
                if len(results) != len(jobs):
                    raise RuntimeError(f"the engine returned {len(results)} results for {len(jobs)} prompts")
            except BaseException as exc:  # the error goes to each waiting request
                for j in jobs:
                    j.future.set_exception(exc)
                continue
            for j, result in zip(jobs, results, strict=True):
                j.future.set_result(result)


def _abandoned(jobs: list[_Job]) -> list[bool]:
    return [j.abandoned.is_set() for j in jobs]


def _gone(sock: socket.socket) -> bool:
    """Whether the client closed its end (a readable socket with nothing to read; a request body was read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


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

    def _stream(self, events: Iterator[dict[str, Any]]) -> None:
        """Server-sent events, ended by ``data: [DONE]``; the connection closes after the stream."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for event in events:
                self.wfile.write(b"data: " + json.dumps(event).encode("utf-8") + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None, code: Any = None) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        error = {"message": message, "type": kind, "param": None, "code": code if code is not None else status}
        self._send(status, {"error": error}, headers)

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
            req = parse_request(body, chat, self.server.model_name)
            if req.token_ids and not reports_tokens(self.server.batcher.engine):
                raise BadRequest("this server's engine reports no tokens: token ids cannot be sent or returned")
        except UnknownModel as exc:
            self._error(404, str(exc), code="model_not_found")
            return
        except (BadRequest, ValueError, TypeError) as exc:
            self._error(400, f"bad request: {exc}")
            return
        prompt = req.prompt
        try:
            if req.chat and uses_tools(req) and not req.token_ids:
                prompt = tool_prompt(req, self.server.batcher.engine)
            sampling = fit_to_context(self.server.batcher.engine, prompt, req.sampling)
            choices = self._wait(self.server.batcher.submit(prompt, sampling))
            if choices is None:
                return  # the client went away; its request was cancelled
        except HTTPFault as fault:
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            self._error(fault.status, fault.message, headers)
            return
        except (ConfigError, BadRequest) as exc:  # token ids outside the vocabulary, a prompt over the context
            self._error(400, f"bad request: {exc}")
            return
        except Exception as exc:
            logger.exception("the engine failed")
            self._error(500, f"the engine failed: {type(exc).__name__}: {exc}")
            return
        if req.stream:
            self._stream(stream_events(req, choices))
        else:
            self._send(200, reply(req, choices))

    def _wait(self, job: _Job) -> list[Completion] | None:
        """The job's result; ``None`` when the client disconnected first (the job is cancelled if it has not
        started, and a started one's reply is dropped)."""
        while True:
            try:
                return job.future.result(timeout=self.server.poll_s)
            except FutureTimeout:
                if _gone(self.connection):
                    if not job.future.cancel():  # already generating: a transformers batch drops its rows
                        job.abandoned.set()
                    self.close_connection = True
                    return None
            except CancelledError:
                return None


def fit_to_context(engine: Any, prompt: TokenPrompt, sampling: SamplingParams) -> SamplingParams:
    """``sampling`` with ``max_tokens`` capped to the engine's context minus the prompt's tokens; ``BadRequest``
    when the prompt alone fills the context. Engines whose context or tokenizer is unknown are left as asked."""
    config = getattr(getattr(engine, "model", None), "config", None)
    context = getattr(config, "max_position_embeddings", None)
    if not isinstance(context, int) or context <= 0:
        return sampling
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        used = len(prompt)
    elif callable(getattr(engine, "tokenizer", None)) and callable(getattr(engine, "render", None)):
        used = len(engine.tokenizer(engine.render(prompt), add_special_tokens=False)["input_ids"])
    else:
        return sampling
    room = context - used
    if room < 1:
        raise BadRequest(
            f"the prompt is {used:,} tokens, and this model's context is {context:,}: no room for a reply; "
            "shorten the prompt"
        )
    if sampling.max_tokens <= room:
        return sampling
    from dataclasses import replace

    return replace(sampling, max_tokens=room)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: bursts of clients connect before they are answered
    batcher: _Batcher
    model_name: str
    poll_s: float

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):  # a client that gave up
            logger.debug("client %s went away", client_address)
            return
        super().handle_error(request, client_address)


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
        max_queue: int = 256,
        poll_s: float = 0.05,
    ):
        self.engine = engine
        self.host = host
        self.port = port
        self.model_name = model_name
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.poll_s = poll_s
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Requests queued or running now (0 when idle)."""
        return self._httpd.batcher.pending if self._httpd is not None else 0

    @property
    def stats(self) -> dict[str, int]:
        """``pending``, ``cancelled`` (requests dropped before they ran) and ``prompts_run`` so far."""
        b = self._httpd.batcher if self._httpd is not None else None
        return {"pending": b.pending, "cancelled": b.cancelled, "prompts_run": b.prompts_run} if b else {}

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> EngineServer:
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.batcher = _Batcher(self.engine, self.batch_window_s, self.max_batch, self.max_queue)
        httpd.model_name = self.model_name
        httpd.poll_s = self.poll_s
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
