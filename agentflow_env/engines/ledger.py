"""The call ledger: LLM calls, prompt and completion tokens and seconds by role, tagged where an engine is called.

The caller carries the role: a module, tool or judge calls its engine through :func:`generate_as`, naming its
role (``modules``, ``tools``, ``judge``; the planner's calls are counted by whoever calls the policy) and, for
modules and tools, which one. The call lands in the :class:`Ledger` the current context holds, under the
benchmark it names (:func:`enter_benchmark`, set by an evaluation for each episode in the thread that plays
it); with no ledger active nothing is recorded and the call costs one context lookup.

Tokens are what the engine reported for the call (``last_usage``, one entry per prompt, as the HTTP engine
keeps it); an engine that reports none (scripted, in-process) gets an estimate of four characters per token,
and the tally says how many calls were estimated (``estimated_calls``), so a reader never takes a guess for a
count. Seconds are the wall time the caller waited for the reply. The same tokens charge the episode's token
clock, when its env runs on one (``agentflow_env.clock.TokenClock``).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agentflow_env.clock import bound_clock

__all__ = [
    "NAMED_ROLES",
    "ROLES",
    "Ledger",
    "Tally",
    "call_tokens",
    "current_ledger",
    "enter_benchmark",
    "estimate_tokens",
    "generate_as",
    "record_call",
]

ROLES = ("planner", "modules", "tools", "judge")
NAMED_ROLES = ("modules", "tools")  # these roles are kept per module / per tool
CHARS_PER_TOKEN = 4  # the estimate for engines that report no usage


@dataclass
class Tally:
    """What one role (or one module, one tool) spent: calls, tokens, seconds; ``estimated_calls`` of the calls
    had their tokens estimated from characters (the engine reported none)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    estimated_calls: int = 0

    def add(self, other: Tally) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds += other.seconds
        self.estimated_calls += other.estimated_calls

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 4)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tally:
        return cls(
            calls=int(d.get("calls", 0)),
            prompt_tokens=int(d.get("prompt_tokens", 0)),
            completion_tokens=int(d.get("completion_tokens", 0)),
            seconds=float(d.get("seconds", 0.0)),
            estimated_calls=int(d.get("estimated_calls", 0)),
        )


class Ledger:
    """Tallies per benchmark and role (per name for modules and tools); thread-safe.

    As JSON (:meth:`to_dict`)::

        {"<benchmark>": {"planner": TALLY, "modules": {"executor": TALLY, ...}, "tools": {NAME: TALLY}, "judge": TALLY}}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tallies: dict[tuple[str, str, str], Tally] = {}

    def add(self, benchmark: str, role: str, name: str | None, tally: Tally) -> None:
        if role not in ROLES:
            raise ValueError(f"role {role!r}; choose one of {', '.join(ROLES)}")
        key = (benchmark, role, (name or "?") if role in NAMED_ROLES else "")
        with self._lock:
            self._tallies.setdefault(key, Tally()).add(tally)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            items = sorted(self._tallies.items())
        for (benchmark, role, name), tally in items:
            roles = out.setdefault(benchmark, {})
            if role in NAMED_ROLES:
                roles.setdefault(role, {})[name] = tally.to_dict()
            else:
                roles[role] = tally.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Ledger:
        """A ledger from its JSON (``None`` or ``{}``: an empty one); a resumed run adds to what it stored."""
        ledger = cls()
        for benchmark, roles in (data or {}).items():
            for role, value in roles.items():
                if role in NAMED_ROLES:
                    for name, tally in value.items():
                        ledger.add(benchmark, role, name, Tally.from_dict(tally))
                elif role in ROLES:
                    ledger.add(benchmark, role, None, Tally.from_dict(value))
        return ledger

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._tallies)


_CURRENT: contextvars.ContextVar[tuple[Ledger, str] | None] = contextvars.ContextVar("agentflow_ledger", default=None)


def enter_benchmark(ledger: Ledger | None, benchmark: str) -> None:
    """From now on, in this thread (context), engine calls tagged by their callers land in ``ledger`` under
    ``benchmark`` (``None``: stop recording). An evaluation calls it where each episode starts and steps."""
    _CURRENT.set(None if ledger is None else (ledger, benchmark))


def current_ledger() -> tuple[Ledger, str] | None:
    """The ledger and benchmark this context records into, or ``None``."""
    return _CURRENT.get()


def estimate_tokens(value: Any) -> int:
    """A token estimate of a prompt or reply (a string, a chat, a tool-call message): characters / 4."""
    if value is None:
        return 0
    if isinstance(value, str):
        return (len(value) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    if isinstance(value, dict):
        return sum(estimate_tokens(v) for v in value.values() if isinstance(v, (str, list, dict)))
    if isinstance(value, (list, tuple)):
        return sum(estimate_tokens(v) for v in value)
    return estimate_tokens(str(value))


def call_tokens(prompts: Sequence[Any], replies: Sequence[Any] | None, usage: Any = None) -> Tally:
    """The tokens of one engine call (``len(prompts)`` requests): as ``usage`` (the engine's ``last_usage``,
    one ``{"prompt_tokens", "completion_tokens"}`` or ``None`` per prompt) reports them, else estimated."""
    reported = list(usage) if isinstance(usage, (list, tuple)) and len(usage) == len(prompts) else []
    tally = Tally(calls=len(prompts))
    for i, prompt in enumerate(prompts):
        counts = reported[i] if reported else None
        if isinstance(counts, dict) and "prompt_tokens" in counts:
            tally.prompt_tokens += int(counts.get("prompt_tokens") or 0)
            tally.completion_tokens += int(counts.get("completion_tokens") or 0)
            continue
        tally.estimated_calls += 1
        tally.prompt_tokens += estimate_tokens(prompt)
        if replies is not None and i < len(replies):
            tally.completion_tokens += estimate_tokens(replies[i])
    return tally


def record_call(
    role: str,
    name: str | None,
    prompts: Sequence[Any],
    replies: Sequence[Any] | None,
    seconds: float,
    usage: Any = None,
) -> None:
    """Add one engine call (``len(prompts)`` requests) to the active ledger, if any. ``usage``: the engine's
    ``last_usage`` (one ``{"prompt_tokens", "completion_tokens"}`` or ``None`` per prompt)."""
    sink = _CURRENT.get()
    if sink is None:
        return
    ledger, benchmark = sink
    tally = call_tokens(prompts, replies, usage)
    tally.seconds = float(seconds)
    ledger.add(benchmark, role, name, tally)


def generate_as(engine: Any, prompts: Sequence[Any], sampling: Any, *, role: str, name: str | None = None) -> list[Any]:
    """``engine.generate(prompts, sampling)``, recorded in the active ledger as ``role`` (and ``name``), and
    charged to the token clock bound to this context (``agentflow_env.clock.bind_clock``), if any.

    A call that raises is recorded and charged too (its prompts' tokens estimated, no completion), then re-raised.
    """
    clock = bound_clock()
    if _CURRENT.get() is None and clock is None:
        return engine.generate(prompts, sampling)  # type: ignore[no-any-return]
    prompts = list(prompts)
    started = time.perf_counter()
    replies: list[Any] | None = None
    try:
        replies = engine.generate(prompts, sampling)
        return replies  # type: ignore[return-value]
    finally:
        usage = getattr(engine, "last_usage", None) if replies is not None else None
        record_call(role, name, prompts, replies, time.perf_counter() - started, usage)
        if clock is not None:
            tally = call_tokens(prompts, replies, usage)
            for _ in range(max(tally.calls - 1, 0)):  # a batch: every request pays its own call charge
                clock.charge_call(0, 0)
            clock.charge_call(tally.prompt_tokens, tally.completion_tokens)
