"""The OpenAI-compatible HTTP engine (vLLM serve, SGLang, OpenAI, Ollama).

Requests go out as coroutines on the process's one HTTP event loop (:mod:`agentflow_env.engines.event_loop`:
aiohttp, keep-alive pooled, no thread per request); ``generate`` is synchronous and waits for them, and
``agenerate`` is the same call for code already on that loop. An engine given an ``openai`` client object
(``client=``) sends through it instead, a thread per request of a batch, as before.

Batched prompts run concurrently under a limit; 429, 5xx, timeouts and dropped connections are retried with backoff,
and so is a reply that cannot be read (a 200 whose body is not JSON, is empty or cut short, or has no choices):
after the retries that one is a :class:`~agentflow_env.error.MalformedReplyError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentflow_env.engines.base import Prompt, SamplingParams, as_chat
from agentflow_env.engines.event_loop import EventLoopThread, shared_loop
from agentflow_env.engines.meter import METER
from agentflow_env.error import ConfigError, DependencyNotInstalled, EngineError, MalformedReplyError

__all__ = ["OpenAIEngine"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://localhost:8000/v1"
_RETRY_STATUS = {408, 409, 425, 429}  # and every 5xx


class OpenAIEngine:
    """Calls ``/chat/completions`` (``mode="chat"``) or ``/completions`` (``mode="completion"``).

    - ``base_url``: defaults to ``$OPENAI_BASE_URL``, else ``http://localhost:8000/v1``;
      ``api_key``: defaults to ``$OPENAI_API_KEY``, else ``"EMPTY"`` (local servers ignore it).
    - ``timeout``: seconds per request; ``max_retries`` retries after the first try, waiting
      ``backoff * 2**k`` seconds (with jitter, at most ``max_backoff``; a server's Retry-After wins
      when it is shorter than ``max_backoff``).
    - ``concurrency``: most requests in flight from this engine, across threads.
    - ``extra_body``: extra JSON fields for every request (e.g. vLLM's ``{"top_k": 20}``).

    After each ``generate``, ``last_usage`` holds one ``{"prompt_tokens", "completion_tokens"}`` per prompt
    as the server reported it (``None`` where it reported none, or only an estimate), and ``usage_total``
    adds them up over the engine's life.
    """

    thread_safe = True  # generate may be called from many threads at once (a runner's episodes share it)

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        mode: str = "chat",
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 16.0,
        concurrency: int = 16,
        extra_body: dict[str, Any] | None = None,
        client: Any = None,
    ):
        if mode not in ("chat", "completion"):
            raise ConfigError(f"mode={mode!r}; choose 'chat' (chat/completions) or 'completion' (completions)")
        if concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise ConfigError("concurrency must be >= 1, max_retries >= 0 and timeout > 0")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.mode = mode
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.concurrency = int(concurrency)
        self.extra_body = dict(extra_body or {})
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._local = threading.local()  # last_usage per calling thread: many episodes share an engine
        self.usage_total = {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0, "requests_with_usage": 0}
        self._usage_lock = threading.Lock()
        self._rng = random.Random(0)
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        # client given: requests go through it, a thread each; else through aiohttp on the shared event loop
        self._client = client
        self._via_client = client is not None
        self._loop: EventLoopThread | None = None
        self._aslots: asyncio.Semaphore | None = None  # made on the loop (set_concurrency makes a new one)
        self._headers = {"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"}
        self._url = f"{self.base_url}/{'chat/completions' if mode == 'chat' else 'completions'}"
        if not self._via_client:
            try:
                import aiohttp  # noqa: F401
            except ImportError:  # without aiohttp: the openai client, a thread per request
                self._via_client = True

    @property
    def client(self) -> Any:
        """The ``openai`` client (made on first use when none was given; ``generate`` does not use it then)."""
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise DependencyNotInstalled("openai", "engines") from exc
            # retries are ours (the client's own would multiply with them)
            self._client = openai.OpenAI(
                base_url=self.base_url, timeout=self.timeout, max_retries=0, api_key=self.api_key
            )
        return self._client

    @classmethod
    def from_spec(cls, target: str, **options: Any) -> OpenAIEngine:
        """``MODEL[@BASE_URL]``; the URL starts at the last ``@http``."""
        model, base_url = target, options.pop("base_url", None)
        at = target.rfind("@http")
        if at > 0:
            model, base_url = target[:at], target[at + 1 :]
        return cls(model, base_url=base_url, **options)

    @property
    def last_usage(self) -> list[dict[str, int] | None]:
        """Token counts of this thread's last ``generate`` (one entry per prompt)."""
        return getattr(self._local, "usage", [])

    @last_usage.setter
    def last_usage(self, value: list[dict[str, int] | None]) -> None:
        self._local.usage = value

    def set_concurrency(self, n: int) -> None:
        """Allow ``n`` requests in flight (a runner with ``n`` episodes in flight raises the limit to match)."""
        if n < 1:
            raise ConfigError(f"concurrency must be >= 1, got {n}")
        self.concurrency = int(n)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._aslots = None  # the next request on the loop makes it with the new limit

    def __repr__(self) -> str:
        return f"OpenAIEngine(model={self.model!r}, base_url={self.base_url!r}, mode={self.mode!r})"

    def close(self) -> None:
        """Close the ``openai`` client's connections, if it has one (the shared event loop's pool stays)."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()

    # ------------------------------------------------------------------ Engine protocol
    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]:
        """One completion per prompt, requests in parallel; raises ``EngineError`` after the retries."""
        sampling = sampling or SamplingParams()
        if sampling.n != 1:
            raise ConfigError("engines return one completion per prompt; repeat the prompt instead of n > 1")
        prompts = list(prompts)
        if not self._via_client:
            results = self._event_loop().run(self._many(prompts, sampling, None))
        elif len(prompts) <= 1:
            results = [self._one(p, sampling) for p in prompts]
        else:
            workers = min(self.concurrency, len(prompts))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai") as pool:
                results = list(pool.map(lambda p: self._one(p, sampling), prompts))
        self.last_usage = [usage for _, usage in results]
        return [text for text, _ in results]

    def _record(self, out: Any) -> dict[str, int] | None:
        """The reply's token counts, when the server reported real ones (not an estimate)."""
        usage = getattr(out, "usage", None)
        extra = getattr(usage, "model_extra", None) or {}
        return self._count(getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None), extra)

    def _count(self, prompt: Any, completion: Any, extra: dict[str, Any]) -> dict[str, int] | None:
        with self._usage_lock:
            self.usage_total["requests"] += 1
            if (
                not isinstance(prompt, int)
                or not isinstance(completion, int)
                or isinstance(prompt, bool)
                or isinstance(completion, bool)
                or extra.get("estimated")
            ):
                return None
            self.usage_total["requests_with_usage"] += 1
            self.usage_total["prompt_tokens"] += prompt
            self.usage_total["completion_tokens"] += completion
        METER.add_tokens(completion)
        return {"prompt_tokens": prompt, "completion_tokens": completion}

    def chat_with_tools(
        self, chats: Sequence[list[dict[str, Any]]], tools: list[dict[str, Any]], sampling: SamplingParams | None = None
    ) -> list[dict[str, Any]]:
        """One assistant message per chat, with ``tools=`` sent: ``{"role", "content", "tool_calls"?}`` as the
        server returned it (a vLLM server needs ``--enable-auto-tool-choice --tool-call-parser hermes``)."""
        sampling = sampling or SamplingParams()
        chats = list(chats)
        if self.mode != "chat":
            raise ConfigError("tool calling needs mode='chat' (chat/completions)")
        if not self._via_client:
            results = self._event_loop().run(self._many(chats, sampling, tools))
            self.last_usage = [usage for _, usage in results]
            return [message for message, _ in results]
        workers = max(min(self.concurrency, len(chats)), 1)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai") as pool:
            results = list(pool.map(lambda c: self._one(c, sampling, tools), chats))
        self.last_usage = [usage for _, usage in results]
        return [message for message, _ in results]

    def _request(
        self, prompt: Prompt, sampling: SamplingParams, tools: list[dict[str, Any]] | None = None
    ) -> tuple[Any, dict[str, int] | None]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
        }
        if sampling.stop:
            kwargs["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        if sampling.response_format is not None and self.mode == "chat":
            kwargs["response_format"] = sampling.response_format
        if tools is not None:
            out = _readable(
                lambda: self.client.chat.completions.create(messages=as_chat(prompt), tools=tools, **kwargs)
            )
            message = out.choices[0].message
            reply: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                reply["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ]
            return reply, self._record(out)
        if self.mode == "chat":
            out = _readable(lambda: self.client.chat.completions.create(messages=as_chat(prompt), **kwargs))
            return out.choices[0].message.content or "", self._record(out)
        from agentflow_env.engines.base import prompt_text

        out = _readable(lambda: self.client.completions.create(prompt=prompt_text(prompt), **kwargs), chat=False)
        return out.choices[0].text or "", self._record(out)

    def _one(
        self, prompt: Prompt, sampling: SamplingParams, tools: list[dict[str, Any]] | None = None
    ) -> tuple[Any, dict[str, int] | None]:
        attempt = 0
        while True:
            with self._slots, METER.request():
                try:
                    return self._request(prompt, sampling, tools)
                except Exception as exc:
                    delay = self._after_failure(exc, attempt)
            time.sleep(delay)
            attempt += 1

    def _after_failure(self, exc: Exception, attempt: int) -> float:
        """Seconds to wait before retrying after ``exc`` on try ``attempt`` (from 0); raises the engine's error
        (``MalformedReplyError`` for an unreadable reply) when ``exc`` is not retried or no try is left."""
        retry, wait_hint = _retryable(exc)
        reason = _short(exc)
        if not retry or attempt >= self.max_retries:
            tries = f" after {attempt + 1} tries" if retry else ""
            kind = MalformedReplyError if isinstance(exc, _Malformed) else EngineError
            raise kind(f"{self.base_url} ({self.model}) failed{tries}: {type(exc).__name__}: {reason}") from exc
        delay = min(self.backoff * 2**attempt, self.max_backoff) * (0.75 + 0.5 * self._rng.random())
        if wait_hint is not None and wait_hint <= self.max_backoff:
            delay = max(wait_hint, 0.0)
        logger.warning("%s: %s; retry %d/%d in %.2fs", self.base_url, reason, attempt + 1, self.max_retries, delay)
        return delay

    # ------------------------------------------------------------------ on the event loop
    async def agenerate(
        self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None
    ) -> tuple[list[str], list[dict[str, int] | None]]:
        """``generate`` for code on the engine's event loop: the completions and their token counts."""
        sampling = sampling or SamplingParams()
        if sampling.n != 1:
            raise ConfigError("engines return one completion per prompt; repeat the prompt instead of n > 1")
        results = await self._many(list(prompts), sampling, None)
        return [text for text, _ in results], [usage for _, usage in results]

    def _event_loop(self) -> EventLoopThread:
        loop = self._loop
        if loop is None or not loop.alive:
            loop = self._loop = shared_loop()
            self._aslots = None
        return loop

    async def _many(
        self, prompts: list[Any], sampling: SamplingParams, tools: list[dict[str, Any]] | None
    ) -> list[tuple[Any, dict[str, int] | None]]:
        if len(prompts) == 1:
            return [await self._one_async(prompts[0], sampling, tools)]
        # every request runs to its end (as a thread pool's map did); the first failure, in prompt order, is raised
        out = await asyncio.gather(*(self._one_async(p, sampling, tools) for p in prompts), return_exceptions=True)
        for item in out:
            if isinstance(item, BaseException):
                raise item
        return out  # type: ignore[return-value]

    def _body(self, prompt: Any, sampling: SamplingParams, tools: list[dict[str, Any]] | None) -> bytes:
        """The request's JSON body, as the ``openai`` client would send it (``extra_body`` merged at the top)."""
        body: dict[str, Any] = {"model": self.model}
        if self.mode == "chat":
            body["messages"] = as_chat(prompt)
        else:
            from agentflow_env.engines.base import prompt_text

            body["prompt"] = prompt_text(prompt)
        body.update(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens)
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.response_format is not None and self.mode == "chat":
            body["response_format"] = sampling.response_format
        if tools is not None:
            body["tools"] = tools
        body.update(self.extra_body)
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    async def _one_async(
        self, prompt: Any, sampling: SamplingParams, tools: list[dict[str, Any]] | None
    ) -> tuple[Any, dict[str, int] | None]:
        """One request with the retries of ``_one``, as a coroutine on the loop."""
        if self._aslots is None:
            self._aslots = asyncio.Semaphore(self.concurrency)
        slots, data, attempt = self._aslots, self._body(prompt, sampling, tools), 0
        while True:
            async with slots:
                with METER.request():
                    try:
                        return await self._post(data, tools is not None)
                    except Exception as exc:
                        delay = self._after_failure(exc, attempt)
            await asyncio.sleep(delay)
            attempt += 1

    async def _post(self, data: bytes, with_tools: bool) -> tuple[Any, dict[str, int] | None]:
        import aiohttp

        loop = self._event_loop()
        session = await loop.session()
        options = loop.request_options(self._url)  # the environment's proxy, if any
        # as the openai client (httpx) reads ``timeout``: for the connection (a free one from the pool included)
        # and for each read, not for the whole reply
        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_read=self.timeout)
        try:
            async with session.post(self._url, data=data, headers=self._headers, timeout=timeout, **options) as resp:
                raw = await resp.read()
                status, retry_after = resp.status, resp.headers.get("retry-after")
        except asyncio.TimeoutError:
            raise _Timeout(f"no connection or no data within {self.timeout:g} s") from None
        if status >= 300:
            raise _StatusError(status, _error_message(raw), retry_after)
        out = _readable_json(raw, self.mode == "chat")
        usage = out.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        counts = self._count(usage.get("prompt_tokens"), usage.get("completion_tokens"), usage)
        first = out["choices"][0]
        if self.mode != "chat":
            return first.get("text") or "", counts
        message = first["message"]
        if not with_tools:
            return message.get("content") or "", counts
        reply: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            reply["tool_calls"] = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
                }
                for c in message["tool_calls"]
            ]
        return reply, counts


class _Timeout(Exception):
    """No reply within the engine's timeout (retried)."""


class _StatusError(Exception):
    """An HTTP error status (retried when it is 408, 409, 425, 429 or a 5xx)."""

    def __init__(self, status: int, message: str, retry_after: str | None):
        super().__init__(f"Error code: {status} - {message}")
        self.status, self.retry_after = status, retry_after


def _error_message(raw: bytes) -> str:
    """An error reply's message (OpenAI's ``{"error": {"message"}}``), else its body, shortened."""
    text = raw.decode("utf-8", "replace")
    try:
        found = json.loads(text)
        if isinstance(found, dict):
            error = found.get("error", found)
            text = str(error.get("message", error) if isinstance(error, dict) else error)
    except ValueError:
        pass
    return text[:500]


def _readable_json(raw: bytes, chat: bool) -> dict[str, Any]:
    """A reply body as a completion with a first choice; else :class:`_Malformed` saying why (as ``_readable``)."""
    try:
        out = json.loads(raw)
    except ValueError as exc:  # the body is empty, not JSON, or cut short
        raise _Malformed(f"the reply body is not JSON ({exc})") from exc
    choices = out.get("choices") if isinstance(out, dict) else None
    if not isinstance(choices, list):
        shown = _short(ValueError(str(out)), 120) if isinstance(out, str) else type(out).__name__
        raise _Malformed(f"the reply is not a completion: {shown}")
    if not choices:
        raise _Malformed("the reply has no choices")
    first = choices[0]
    if not isinstance(first, dict) or (chat and not isinstance(first.get("message"), dict)):
        raise _Malformed("the reply's first choice has no message")
    return out


class _Malformed(ValueError):
    """A reply that came back but cannot be read (retried like a dropped connection)."""


def _readable(create: Callable[[], Any], chat: bool = True) -> Any:
    """``create()``'s reply, once it is a completion with a first choice; else :class:`_Malformed` saying why."""
    try:
        out = create()
    except ValueError as exc:  # json.JSONDecodeError: the body is empty, not JSON, or cut short
        raise _Malformed(f"the reply body is not JSON ({exc})") from exc
    choices = getattr(out, "choices", None)
    if not isinstance(choices, list):
        shown = _short(ValueError(str(out)), 120) if isinstance(out, (str, bytes)) else type(out).__name__
        raise _Malformed(f"the reply is not a completion: {shown}")
    if not choices:
        raise _Malformed("the reply has no choices")
    first = choices[0]
    if chat and getattr(first, "message", None) is None:
        raise _Malformed("the reply's first choice has no message")
    return out


def _retryable(exc: Exception) -> tuple[bool, float | None]:
    """Whether ``exc`` is worth another try, and the server's Retry-After in seconds if it sent one."""
    if isinstance(exc, (_Malformed, _Timeout)):
        return True, None
    if isinstance(exc, _StatusError):
        if exc.status in _RETRY_STATUS or exc.status >= 500:
            try:
                return True, float(exc.retry_after or "")
            except ValueError:
                return True, None
        return False, None
    if _is_connection_error(exc):
        return True, None
    try:
        import openai
    except ImportError:
        return False, None
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True, None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in _RETRY_STATUS or status >= 500:
            hint = None
            try:
                hint = float(exc.response.headers.get("retry-after") or "")
            except (ValueError, AttributeError):
                pass
            return True, hint
    return False, None


def _is_connection_error(exc: Exception) -> bool:
    """A dropped or refused connection, or a body cut off mid-read (aiohttp's client errors)."""
    try:
        import aiohttp
    except ImportError:
        return False
    return isinstance(exc, (aiohttp.ClientError, ConnectionError))


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"
