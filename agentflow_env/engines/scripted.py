"""A scripted engine for tests and demos: replies from a list, a function or a regex table.

Every call is recorded (prompt and sampling), so tests can check what reached the engine.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from agentflow_env.engines.base import Prompt, SamplingParams
from agentflow_env.error import ConfigError

__all__ = ["Call", "Delayed", "ScriptedEngine"]


@dataclass(frozen=True)
class Delayed:
    """A reply given after ``seconds`` (to script slow servers)."""

    seconds: float
    reply: Any


@dataclass
class Call:
    """One prompt the engine received, with its sampling settings."""

    prompt: Prompt
    sampling: SamplingParams


# A reply: text, an exception to raise, a Delayed, or a callable of the prompt text returning one of those.
Reply = Union[str, BaseException, Delayed, Callable[[str], Any]]


class _Queue:
    """Replies used in order; the last one repeats once the others are used up."""

    def __init__(self, replies: Sequence[Reply]):
        if not replies:
            raise ConfigError("a scripted reply list is empty; give at least one reply")
        self.replies = list(replies)
        self.index = 0

    def next(self) -> Reply:
        reply = self.replies[min(self.index, len(self.replies) - 1)]
        self.index += 1
        return reply


class ScriptedEngine:
    """Replies without a model.

    ``replies`` is one of:

    - a list: replies in order, across all prompts (the last repeats, or all cycle with ``cycle=True``);
    - a callable ``f(prompt_text) -> reply``;
    - a mapping or list of ``(regex, reply)`` pairs: the first pattern found in the prompt text picks
      the reply; a reply there may itself be a list, used in order for that pattern (last repeats).
      A string reply may use ``\\1``/``\\g<name>`` from the match.

    A reply may also be an exception instance (raised: scripts engine failures) or a
    :class:`Delayed`. ``default`` answers prompts that match no pattern (``None``: raise).
    ``echo=True`` ignores ``replies`` and answers each prompt with its last message.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | Mapping[str, Any] | Callable[[str], Any],
        default: Reply | None = None,
        cycle: bool = False,
        delay: float = 0.0,
        echo: bool = False,
    ):
        self._lock = threading.Lock()
        self.calls: list[Call] = []
        self.default = default
        self.cycle = cycle
        self.delay = float(delay)
        self._func: Callable[[str], Any] | None = None
        self._queue: _Queue | None = None
        self._table: list[tuple[re.Pattern[str], Any]] = []
        self.echo = echo
        if echo:
            pass
        elif callable(replies) and not isinstance(replies, (str, Mapping, Sequence)):
            self._func = replies
        elif isinstance(replies, Mapping) or (
            isinstance(replies, Sequence)
            and replies
            and all(isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], str) for r in replies)
        ):
            pairs: Any = replies.items() if isinstance(replies, Mapping) else replies
            for pattern, reply in pairs:
                try:
                    compiled = re.compile(pattern, re.DOTALL)
                except re.error as exc:
                    raise ConfigError(f"scripted pattern {pattern!r} is not a valid regex: {exc}") from exc
                if isinstance(reply, (list, tuple)):
                    reply = _Queue(reply)
                self._table.append((compiled, reply))
        elif isinstance(replies, Sequence) and not isinstance(replies, str):
            self._queue = _Queue(replies)
        else:
            raise ConfigError("ScriptedEngine needs a list of replies, a {regex: reply} mapping or a callable")

    # ------------------------------------------------------------------ construction from a spec
    @classmethod
    def from_spec(cls, target: str, **options: Any) -> ScriptedEngine:
        """``scripted:FILE.json``, ``scripted:MODULE:ATTR`` or ``scripted:echo``."""
        if target == "echo":
            return cls([], echo=True, **options)
        path = Path(target)
        if target.endswith(".json") or path.is_file():
            if not path.is_file():
                raise ConfigError(f"scripted engine file {target} does not exist")
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ConfigError(f"scripted engine file {target} is not valid JSON: {exc}") from exc
            if not isinstance(data, (list, dict)):
                raise ConfigError(f"{target} must hold a JSON list of replies or a {{regex: reply}} object")
            return cls(data, **options)
        module_name, sep, attr = target.partition(":")
        if not sep:
            raise ConfigError(
                f"scripted:{target} is neither a .json file nor MODULE:ATTR; e.g. scripted:replies.json, "
                "scripted:mypkg.replies:reply_fn or scripted:echo"
            )
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"scripted:{target}: cannot import {attr!r} from {module_name!r}: {exc}") from exc
        if inspect.isclass(obj) or (callable(obj) and _takes_no_args(obj)):
            made = obj(**options)  # a factory of an Engine
            if hasattr(made, "generate"):
                return made
            raise ConfigError(f"scripted:{target} returned {type(made).__name__}, which has no generate()")
        return cls(obj, **options)  # a reply function, list or table

    # ------------------------------------------------------------------ Engine protocol
    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None) -> list[str]:
        sampling = sampling or SamplingParams()
        return [self._reply(prompt, sampling) for prompt in prompts]

    def _reply(self, prompt: Prompt, sampling: SamplingParams) -> str:
        from agentflow_env.engines.base import prompt_text

        text = prompt_text(prompt)
        with self._lock:
            self.calls.append(Call(prompt=prompt, sampling=sampling))
            reply, match = self._pick(text, prompt)
        if self.delay:
            time.sleep(self.delay)
        return _resolve(reply, text, match)

    def _pick(self, text: str, prompt: Prompt) -> tuple[Any, re.Match[str] | None]:
        if self.echo:
            return (prompt if isinstance(prompt, str) else str(prompt[-1].get("content") or "")), None
        if self._func is not None:
            return self._func, None
        if self._queue is not None:
            if self.cycle and self._queue.index >= len(self._queue.replies):
                self._queue.index = 0
            return self._queue.next(), None
        for pattern, reply in self._table:
            match = pattern.search(text)
            if match:
                return (reply.next() if isinstance(reply, _Queue) else reply), match
        if self.default is None:
            raise LookupError(f"no scripted pattern matches the prompt: {text[:200]!r}")
        return self.default, None


def _resolve(reply: Any, text: str, match: re.Match[str] | None) -> str:
    for _ in range(8):  # a callable may return a Delayed or an exception, and so on
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Delayed):
            time.sleep(reply.seconds)
            reply = reply.reply
            continue
        if isinstance(reply, str):
            return match.expand(reply) if match is not None and "\\" in reply else reply
        if callable(reply):
            reply = reply(text)
            continue
        return str(reply)
    raise ConfigError("a scripted reply nests callables/Delayed more than 8 deep")


def _takes_no_args(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_KEYWORD,) for p in params)
