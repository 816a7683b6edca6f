"""The clocks an episode's ``time_budget_s`` is read from: ``EpisodeClock`` (wall) and ``TokenClock`` (tokens).

An env starts its clock at ``reset`` and reads it before each module, tool or verifier call. Played by hand,
the clock simply runs (wall time since the start). A runner that keeps many episodes in flight pauses an
episode's clock while the episode waits its turn (for a free worker, for a planner batch to fill) and
charges it the planner's own call time instead, so an episode's budget does not depend on how many other
episodes run beside it (see :mod:`agentflow_env.vector.scheduler`).
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from agentflow_env.error import ConfigError

__all__ = ["BUDGET_CLOCKS", "EpisodeClock", "TokenClock", "TokenRates", "bind_clock", "bound_clock", "make_clock"]

BUDGET_CLOCKS = ("wall", "tokens")


class EpisodeClock:
    """Seconds of an episode's own work: runs from :meth:`start`, stops while paused, takes explicit charges.

    The state is one ``(spent, since)`` tuple, replaced whole under a lock by the writers, so :meth:`elapsed`
    (read before every module and tool call) reads a consistent pair without taking the lock. ``state`` is
    read-only outside this class: ``spent + time.monotonic() - since`` (``spent`` when ``since`` is None) is
    :meth:`elapsed`, which an env's turn loop may write out.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.state: tuple[float, float | None] = (0.0, None)  # (seconds spent before ``since``, running since)

    def start(self) -> None:
        """Zero the clock and run it (an env calls this when its episode starts)."""
        with self._lock:
            self.state = (0.0, time.monotonic())

    def pause(self) -> None:
        """Stop counting (the episode waits for something that is not its own work)."""
        with self._lock:
            spent, since = self.state
            if since is not None:
                self.state = (spent + time.monotonic() - since, None)

    def resume(self) -> None:
        """Count again."""
        with self._lock:
            spent, since = self.state
            if since is None:
                self.state = (spent, time.monotonic())

    def charge(self, seconds: float) -> None:
        """Add work done elsewhere for this episode (its planner call, measured by the runner)."""
        with self._lock:
            spent, since = self.state
            self.state = (spent + max(float(seconds), 0.0), since)

    @property
    def running(self) -> bool:
        return self.state[1] is not None

    def elapsed(self) -> float:
        spent, since = self.state
        return spent + time.monotonic() - since if since is not None else spent

    # the token clock's charges: the wall clock has measured these calls already
    counts_tokens = False

    def charge_call(self, prompt_tokens: int, completion_tokens: int) -> None:
        """An LLM call of this episode (the wall clock timed it while it ran: nothing to add)."""

    def charge_tool(self, name: str) -> None:
        """A tool call of this episode (the wall clock timed it while it ran: nothing to add)."""


@dataclass(frozen=True)
class TokenRates:
    """What :class:`TokenClock` charges, in seconds of budget: per LLM call ``call_s`` plus ``prompt_s_per_1k``
    per 1,000 prompt tokens plus ``completion_s_per_1k`` per 1,000 completion tokens; per tool call
    ``tool_call_s``, or ``tool_s[name]`` for the tools named there (a tool's own LLM calls are charged as LLM
    calls besides).

    The defaults are round figures for a 7B model served alone on one GPU (prefill about 5,000 tokens/s,
    decoding about 50 tokens/s, 0.2 s of overhead a call) and a second per tool call; a protocol that runs
    on the token clock states its own.
    """

    prompt_s_per_1k: float = 0.2
    completion_s_per_1k: float = 20.0
    call_s: float = 0.2
    tool_call_s: float = 1.0
    tool_s: tuple[tuple[str, float], ...] = ()  # (tool name, seconds per call), from a table

    def __post_init__(self) -> None:
        given: Any = self.tool_s
        tool_s: dict[Any, Any] = dict(given) if isinstance(given, Mapping) else {k: v for k, v in given}
        object.__setattr__(self, "tool_s", tuple(sorted((str(k), float(v)) for k, v in tool_s.items())))
        for name in ("prompt_s_per_1k", "completion_s_per_1k", "call_s", "tool_call_s"):
            object.__setattr__(self, name, float(getattr(self, name)))
        for name, value in (*((f.name, getattr(self, f.name)) for f in fields(self) if f.name != "tool_s"),
                            *((f"tool_s[{k}]", v) for k, v in self.tool_s)):  # fmt: skip
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"clock_rates {name}={value!r}; give a finite number of seconds >= 0")

    @classmethod
    def of(cls, value: TokenRates | Mapping[str, Any] | None) -> TokenRates:
        """``value`` as rates: rates as they are, a table of fields (``tool_s`` a table of tool names), or
        ``None`` (the defaults); an unknown field is a ConfigError."""
        if value is None:
            return cls()
        if isinstance(value, TokenRates):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"clock_rates={value!r}; give a table of {', '.join(f.name for f in fields(cls))}")
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(
                f"clock_rates has no field {', '.join(unknown)}; it takes {', '.join(f.name for f in fields(cls))}"
            )
        try:
            return cls(**value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"clock_rates={dict(value)!r} is not valid: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """As a protocol's ``[env.clock_rates]`` table states it."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "tool_s"}
        out["tool_s"] = dict(self.tool_s)
        return out

    def call_seconds(self, prompt_tokens: int, completion_tokens: int) -> float:
        tokens_s = prompt_tokens * self.prompt_s_per_1k + completion_tokens * self.completion_s_per_1k
        return self.call_s + tokens_s / 1000

    def tool_seconds(self, name: str) -> float:
        for tool, seconds in self.tool_s:
            if tool == name:
                return seconds
        return self.tool_call_s


class TokenClock(EpisodeClock):
    """A clock that never runs: it holds the charges of the episode's LLM and tool calls at fixed ``rates``.

    ``start`` zeroes it; ``pause``/``resume`` change nothing, and ``charge(seconds)`` (a runner's measured
    planner time) is ignored: the env charges its planner's call by its tokens itself. ``state`` keeps the
    wall clock's shape (``since`` always None), so readers of ``state`` need no change.
    """

    counts_tokens = True

    def __init__(self, rates: TokenRates | None = None) -> None:
        super().__init__()
        self.rates = rates or TokenRates()
        self.calls = 0  # LLM calls charged since ``start``
        self.tool_calls = 0

    def start(self) -> None:
        with self._lock:
            self.state = (0.0, None)
            self.calls = self.tool_calls = 0

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def charge(self, seconds: float) -> None:
        """Wall seconds measured elsewhere do not count on this clock."""

    def _add(self, seconds: float) -> None:
        with self._lock:
            self.state = (self.state[0] + seconds, None)

    def charge_call(self, prompt_tokens: int, completion_tokens: int) -> None:
        """An LLM call of this episode: ``call_s`` plus its tokens at the rates."""
        self._add(self.rates.call_seconds(max(int(prompt_tokens), 0), max(int(completion_tokens), 0)))
        self.calls += 1

    def charge_tool(self, name: str) -> None:
        """A tool call of this episode: the fixed charge of its tool (its LLM calls are charged as calls)."""
        self._add(self.rates.tool_seconds(name))
        self.tool_calls += 1

    @property
    def running(self) -> bool:
        return False

    def elapsed(self) -> float:
        return self.state[0]


def make_clock(kind: str, rates: TokenRates | Mapping[str, Any] | None = None) -> EpisodeClock:
    """The clock of ``budget_clock=kind``: ``"wall"`` (:class:`EpisodeClock`) or ``"tokens"`` (:class:`TokenClock`)."""
    if kind == "wall":
        return EpisodeClock()
    if kind == "tokens":
        return TokenClock(TokenRates.of(rates))
    raise ConfigError(f"budget_clock={kind!r}; choose one of {', '.join(BUDGET_CLOCKS)}")


_BOUND: contextvars.ContextVar[EpisodeClock | None] = contextvars.ContextVar("agentflow_clock", default=None)
# whether any context has bound a token clock yet: until then every context's binding is None, so a wall-clock
# env's turn need not bind (``AgentFlowEnv._play`` reads it, once per turn)
token_clock_bound = False


def bind_clock(clock: EpisodeClock | None) -> None:
    """From now on, in this context (thread), LLM calls made through ``generate_as`` charge ``clock`` when it
    counts tokens (any other clock binds nothing: it times the calls as they run)."""
    global token_clock_bound
    if clock is not None and clock.counts_tokens:
        token_clock_bound = True
        _BOUND.set(clock)
    else:
        _BOUND.set(None)


def bound_clock() -> EpisodeClock | None:
    """The token-counting clock this context's LLM calls charge, or ``None``."""
    return _BOUND.get()
