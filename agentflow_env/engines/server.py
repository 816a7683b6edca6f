"""A small OpenAI-compatible HTTP server backed by any Engine (chat and text completions).

Concurrent requests with the same sampling settings are batched into one engine call. Every reply carries
``usage`` (exact where the engine reports tokens, else an estimate flagged ``"estimated": true``) and
``finish_reason`` ``"length"`` when cut at ``max_tokens``; ``n`` and ``stream`` work (a streamed reply is
generated whole, then sent in token pieces). An unknown model is a 404; a field the server cannot honour
(``tools``, ``logit_bias``, JSON mode...) is a 400 that names it.

Token-exact mode, for trainers in another process: send ``prompt_token_ids`` (or a completions ``prompt``
that is a list of token ids, or ``return_token_ids: true``) and the reply has ``prompt_token_ids``, each
choice's ``token_ids`` and per-token raw log-probs, so nothing is re-tokenised.

Run it: ``agentflow-env serve hf:runs/tiny-lm --port 8000`` (or ``python -m agentflow_env.engines.server``).
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import astuple, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentflow_env.engines.base import Engine, SamplingParams
from agentflow_env.engines.completions import Completion, TokenPrompt, complete, reports_tokens
from agentflow_env.error import ConfigError

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


class UnknownModel(LookupError):
    """The request names a model this server does not serve (HTTP 404)."""


# OpenAI request fields this server cannot honour: a request that sets one (to anything but a no-op) is
# refused with a 400 naming it, rather than answered as if it had not been sent
_UNSUPPORTED = {
    "tools": "tool calling",
    "tool_choice": "tool calling",
    "functions": "function calling",
    "function_call": "function calling",
    "logit_bias": "logit_bias",
    "best_of": "best_of",
    "echo": "echo",
    "suffix": "suffix",
    "audio": "audio output",
    "modalities": "modalities other than text",
    "prediction": "predicted outputs",
}
_NO_OPS: dict[str, tuple[Any, ...]] = {
    "tool_choice": (None, "none"),
    "tools": (None, []),
    "functions": (None, []),
    "function_call": (None, "none"),
    "logit_bias": (None, {}),
    "best_of": (None, 1),
    "echo": (None, False),
    "suffix": (None, ""),
    "modalities": (None, ["text"]),
}
MAX_N = 16


@dataclass
class _Request:
    """A parsed request: what to generate, how, and how to answer."""

    prompt: TokenPrompt
    sampling: SamplingParams
    chat: bool
    model: str
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    token_ids: bool = False  # token-exact mode: the reply carries prompt and response token ids


@dataclass
class _Job:
    prompt: TokenPrompt
    sampling: SamplingParams
    future: Future[list[Completion]]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        if any(isinstance(p, dict) and p.get("type", "text") != "text" for p in content):
            raise BadRequest("only text content parts are supported (no images, audio or files)")
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise BadRequest("message content must be a string or a list of text parts")


def _check_supported(body: dict[str, Any]) -> None:
    for key, what in _UNSUPPORTED.items():
        if key in body and body[key] not in _NO_OPS.get(key, (None,)):
            raise BadRequest(f"{what} is not supported by this server; remove '{key}' from the request")
    fmt = body.get("response_format")
    if fmt not in (None, {"type": "text"}):
        raise BadRequest("response_format other than text (JSON mode, schemas) is not supported")
    for key in ("presence_penalty", "frequency_penalty"):
        if body.get(key) not in (None, 0, 0.0):
            raise BadRequest(f"{key} is not supported; send 0 or leave it out")


def _sampling(body: dict[str, Any]) -> SamplingParams:
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
        raise BadRequest("'stop' must be a string or a list of strings")
    n = body.get("n")
    n = 1 if n is None else n
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
        raise BadRequest(f"'n' must be an integer from 1 to {MAX_N}")
    defaults = SamplingParams()

    def number(key: str, default: float) -> float:
        value = body.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"'{key}' must be a number")
        return float(value)

    max_tokens = number("max_tokens", number("max_completion_tokens", defaults.max_tokens))
    temperature, top_p = number("temperature", defaults.temperature), number("top_p", defaults.top_p)
    if max_tokens < 1 or temperature < 0 or not 0 < top_p <= 1:
        raise BadRequest("max_tokens must be >= 1, temperature >= 0 and top_p in (0, 1]")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest("'seed' must be an integer")
    return SamplingParams(
        temperature=temperature, top_p=top_p, max_tokens=int(max_tokens), stop=list(stop), seed=seed, n=n
    )


def _token_list(value: Any, what: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        raise BadRequest(f"{what} must be a non-empty list of token ids (integers)")
    return list(value)


def _parse(body: dict[str, Any], chat: bool, model_name: str) -> _Request:
    model = body.get("model")
    if model is not None and model != model_name:
        raise UnknownModel(f"the model {model!r} does not exist here; this server serves {model_name!r}")
    _check_supported(body)
    sampling = _sampling(body)
    token_ids = bool(body.get("return_token_ids"))
    prompt: TokenPrompt
    if body.get("prompt_token_ids") is not None:  # token-exact mode (messages / prompt are then not used)
        prompt, token_ids = _token_list(body["prompt_token_ids"], "'prompt_token_ids'"), True
    elif chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
        prompt = [{"role": str(m.get("role", "user")), "content": _content_text(m.get("content"))} for m in messages]
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and not isinstance(raw[0], int):
            raw = raw[0]  # a batch of one
        if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            prompt, token_ids = _token_list(raw, "'prompt'"), True  # the OpenAI form of a token prompt
        elif isinstance(raw, str):
            prompt = raw
        else:
            raise BadRequest("'prompt' must be one string or one list of token ids (send one request per prompt)")
    if chat:
        logprobs = bool(body.get("logprobs"))
        if body.get("top_logprobs") not in (None, 0):
            raise BadRequest("top_logprobs > 0 is not supported: only the sampled token's log-prob is reported")
    else:
        lp = body.get("logprobs")
        if lp not in (None, 0) and not (isinstance(lp, bool) and not lp):
            raise BadRequest("completions logprobs > 0 is not supported; send logprobs=0 for the sampled tokens")
        logprobs = lp is not None
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object")
    return _Request(
        prompt=prompt,
        sampling=sampling,
        chat=chat,
        model=model_name,
        stream=bool(body.get("stream")),
        include_usage=bool(options.get("include_usage")),
        logprobs=logprobs or token_ids,
        token_ids=token_ids,
    )


class _Batcher:
    """One worker thread: takes the queued jobs, groups them by sampling settings, one engine call each."""

    def __init__(self, engine: Engine, window_s: float, max_batch: int):
        self.engine = engine
        self.window_s = window_s
        self.max_batch = max_batch
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="engine-batcher", daemon=True)
        self.thread.start()

    def submit(self, prompt: TokenPrompt, sampling: SamplingParams) -> Future[list[Completion]]:
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
                results = complete(self.engine, [j.prompt for j in jobs], jobs[0].sampling)
                if len(results) != len(jobs):
                    raise RuntimeError(f"the engine returned {len(results)} results for {len(jobs)} prompts")
            except BaseException as exc:  # the error goes to each waiting request
                for j in jobs:
                    j.future.set_exception(exc)
                continue
            for j, result in zip(jobs, results, strict=True):
                j.future.set_result(result)


_WORD = re.compile(r"\w+|[^\w\s]")


def _usage(prompt: TokenPrompt, choices: list[Completion]) -> dict[str, Any]:
    """Token counts of a reply; engines that report no tokens get an estimate (words and marks), flagged."""
    first = choices[0]
    if first.prompt_tokens is not None and all(c.completion_tokens is not None for c in choices):
        p, c = int(first.prompt_tokens), sum(int(x.completion_tokens or 0) for x in choices)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    text = prompt if isinstance(prompt, str) else " ".join(str(m.get("content", "")) for m in prompt)  # type: ignore[union-attr]
    p = len(_WORD.findall(text))
    c = sum(len(_WORD.findall(x.text)) for x in choices)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c, "estimated": True}


def _logprobs_entry(c: Completion, chat: bool) -> dict[str, Any] | None:
    if c.logprobs is None or c.token_ids is None:
        return None
    tokens = c.tokens or [f"token_id:{t}" for t in c.token_ids]
    if chat:
        return {
            "content": [
                {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")), "top_logprobs": []}
                for t, lp in zip(tokens, c.logprobs)
            ]
        }
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {"tokens": tokens, "token_logprobs": list(c.logprobs), "top_logprobs": None, "text_offset": offsets}


def _choice(req: _Request, index: int, c: Completion) -> dict[str, Any]:
    if req.chat:
        choice: dict[str, Any] = {
            "index": index,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": c.finish_reason,
            "logprobs": _logprobs_entry(c, True) if req.logprobs else None,
        }
    else:
        choice = {
            "index": index,
            "text": c.text,
            "finish_reason": c.finish_reason,
            "logprobs": _logprobs_entry(c, False) if req.logprobs else None,
        }
    if req.token_ids:
        choice["token_ids"] = c.token_ids
    return choice


def _reply(req: _Request, choices: list[Completion]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"{'chatcmpl' if req.chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [_choice(req, i, c) for i, c in enumerate(choices)],
        "usage": _usage(req.prompt, choices),
    }
    if req.token_ids:
        out["prompt_token_ids"] = choices[0].prompt_token_ids
    return out


def _pieces(c: Completion) -> list[str]:
    """The reply's text in streamed pieces: one per token where the tokens spell the text, else one."""
    if c.tokens and "".join(c.tokens) == c.text:
        return [t for t in c.tokens if t]
    return [c.text] if c.text else []


def _stream_events(req: _Request, choices: list[Completion]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed reply, in OpenAI's order: role, text pieces, finish reason, then usage."""
    common = {
        "id": f"{'chatcmpl' if req.chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
    }
    extra = {"usage": None} if req.include_usage else {}

    def chunk(index: int, text: str | None, finish: str | None, first: bool = False) -> dict[str, Any]:
        if req.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
            if text is not None:
                delta["content"] = text
            item: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}
        else:
            item = {"index": index, "text": text or "", "finish_reason": finish, "logprobs": None}
        return {**common, "choices": [item], **extra}

    for i, c in enumerate(choices):
        if req.chat:
            yield chunk(i, None, None, first=True)
        for piece in _pieces(c):
            yield chunk(i, piece, None)
        last = chunk(i, None, c.finish_reason)
        if req.logprobs:
            last["choices"][0]["logprobs"] = _logprobs_entry(c, req.chat)
        if req.token_ids:
            last["choices"][0]["token_ids"] = c.token_ids
            last["prompt_token_ids"] = c.prompt_token_ids
        yield last
    if req.include_usage:
        yield {**common, "choices": [], "usage": _usage(req.prompt, choices)}


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
            req = _parse(body, chat, self.server.model_name)
            if req.token_ids and not reports_tokens(self.server.batcher.engine):
                raise BadRequest("this server's engine reports no tokens: token ids cannot be sent or returned")
        except UnknownModel as exc:
            self._error(404, str(exc), code="model_not_found")
            return
        except (BadRequest, ValueError, TypeError) as exc:
            self._error(400, f"bad request: {exc}")
            return
        try:
            choices = self.server.batcher.submit(req.prompt, req.sampling).result()
        except HTTPFault as fault:
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            self._error(fault.status, fault.message, headers)
            return
        except ConfigError as exc:  # e.g. token ids outside the vocabulary
            self._error(400, f"bad request: {exc}")
            return
        except Exception as exc:
            logger.exception("the engine failed")
            self._error(500, f"the engine failed: {type(exc).__name__}: {exc}")
            return
        if req.stream:
            self._stream(_stream_events(req, choices))
        else:
            self._send(200, _reply(req, choices))


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
