"""Per-turn signals of the env (``info["turn_signals"]``) and the opt-in penalties they can add to a step's reward.

Every step reports what happened on that planner turn, cheaply and always:

- ``invalid_action``: the action could not be run as a tool call (malformed, no tool name, an unknown
  tool, no usable command, over ``max_action_chars``). A final answer is never invalid here, and a
  turn refused only because the time budget ran out is not either (the planner did nothing wrong).
- ``tool_error``: the tool ran and reported an error (``ToolResult.error``, e.g. a Python exception
  or a tool timeout).
- ``repeated_call``: the tool ran with the same tool and the same command (whitespace runs collapsed)
  as an earlier turn of this episode.
- ``verifier``: the verifier's verdict on this turn, ``"STOP"`` or ``"CONTINUE"`` (``None`` when no
  verifier ran: a final answer, an exhausted time budget). With ``verifier="llm"`` it is the LLM's.

``turn_rewards={"invalid_action": -0.1, "tool_error": -0.05, "repeated_call": -0.05}`` (an env
constructor / ``gym.make`` kwarg) adds those amounts to the step's reward when the signal is set.
Without it the reward is the outcome only, as in the paper: 0 until the last step, then the score.

Shaping is an adversary's target, so the spec admits penalties only. Every amount must be in [-1, 0]
and the penalties of one episode add up to at most ``max_total`` (default 0.5, at most 0.99): an
episode's return is ``score - penalties`` with ``0 <= penalties <= max_total``. So no behaviour earns
more than its outcome (nothing can be farmed: a turn either costs nothing or costs a penalty), and
with the 0/1 scores of most ids a correct answer always returns more than any wrong one
(``1 - max_total > 0``). Penalties do push towards short episodes (a planner that answers at once
cannot make a bad tool call), which is why they are capped well below the outcome and off by default.
Measured on the tiny LM (experiments/turn_rewards_compare.py): with penalties its share of error turns fell
from 0.83 to 0.24 in 40 steps, mostly because its episodes got shorter (2.6 -> 1.3 turns).
``repeated_call`` compares commands after collapsing whitespace only; a rephrased command is not a
repeat (evading the penalty gains nothing beyond not paying it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.types import TurnRecord

__all__ = ["PENALTY_SIGNALS", "TurnRewardSpec", "TurnSignals"]

PENALTY_SIGNALS = ("invalid_action", "tool_error", "repeated_call")
INVALID_PREFIX = "Invalid action:"  # how the env's memory explains a turn it could not run (core._invalid_message)
_DEFAULT_MAX_TOTAL = 0.5


@dataclass(frozen=True)
class TurnRewardSpec:
    """Penalties (each in [-1, 0]) per signal and the cap ``max_total`` on their sum over one episode."""

    invalid_action: float = 0.0
    tool_error: float = 0.0
    repeated_call: float = 0.0
    max_total: float = _DEFAULT_MAX_TOTAL

    @classmethod
    def parse(cls, spec: Mapping[str, Any] | None) -> TurnRewardSpec | None:
        """``None`` (outcome-only rewards) or a validated spec; anything else is a :class:`ConfigError`."""
        if spec is None:
            return None
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"turn_rewards={spec!r} must be a dict such as {{'invalid_action': -0.1, 'tool_error': -0.05}}"
            )
        known = (*PENALTY_SIGNALS, "max_total")
        unknown = sorted(str(k) for k in spec if k not in known)
        if unknown:
            raise ConfigError(f"turn_rewards has unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(known)}")
        values: dict[str, float] = {}
        for key, value in spec.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"turn_rewards[{key!r}]={value!r} must be a finite number")
            values[str(key)] = float(value)
        for key in PENALTY_SIGNALS:
            if not -1.0 <= values.get(key, 0.0) <= 0.0:
                raise ConfigError(
                    f"turn_rewards[{key!r}]={values[key]} must be in [-1, 0]: per-turn rewards are penalties only, "
                    "a positive one would be farmed instead of solving the task"
                )
        max_total = values.get("max_total", _DEFAULT_MAX_TOTAL)
        if not 0.0 < max_total < 1.0:
            raise ConfigError(
                f"turn_rewards['max_total']={max_total} must be in (0, 1): the penalties of an episode may never "
                "outweigh a correct answer"
            )
        return cls(**values)

    def penalty(self, signals: Mapping[str, Any]) -> float:
        """The (uncapped, <= 0) sum of the penalties of the signals set on one turn."""
        return sum(getattr(self, key) for key in PENALTY_SIGNALS if signals.get(key))


class TurnSignals:
    """Tracks one episode: ``observe`` classifies each turn, ``shaping`` gives its (capped) penalty."""

    def __init__(self, spec: Mapping[str, Any] | None = None):
        self.spec = TurnRewardSpec.parse(spec)
        # the (tool, command with whitespace runs collapsed) pairs run this episode (the env's fast turn adds to it)
        self.calls: set[tuple[str, str]] = set()
        self._spent = 0.0

    def reset(self) -> None:
        self.calls.clear()
        self._spent = 0.0

    def observe(self, record: TurnRecord, is_final: bool) -> dict[str, Any]:
        """The signals of a turn whose tool (if any) has run and whose verifier (if any) has spoken."""
        return self.observe_turn(record.tool, record.command, record.result, record.error, record.verifier, is_final)

    def observe_turn(
        self,
        tool: str | None,
        command: str | None,
        result: str | None,
        error: str | None,
        verifier: str | None,
        is_final: bool,
    ) -> dict[str, Any]:
        """:meth:`observe` from the record's fields (the env's turn loop builds no record)."""
        if tool is not None:
            calls = self.calls
            seen = len(calls)
            calls.add((tool, " ".join((command if type(command) is str else str(command or "")).split())))
            return {
                "invalid_action": False,
                "tool_error": error is not None,
                "repeated_call": len(calls) == seen,  # the call was there already (one hash, not a lookup and an add)
                "verifier": verifier,
            }
        invalid = not is_final and result is not None and result.startswith(INVALID_PREFIX)
        return {"invalid_action": invalid, "tool_error": False, "repeated_call": False, "verifier": verifier}

    def shaping(self, signals: Mapping[str, Any]) -> float:
        """This turn's penalty under the spec (0.0 without one), so the episode's total stays within max_total."""
        if self.spec is None:
            return 0.0
        room = self.spec.max_total - self._spent
        penalty = max(self.spec.penalty(signals), -room)
        self._spent -= penalty
        return penalty
