"""``EpisodeClock``: the time an episode has spent on its own work, for its ``time_budget_s``.

An env starts its clock at ``reset`` and reads it before each module, tool or verifier call. Played by hand,
the clock simply runs (wall time since the start). A runner that keeps many episodes in flight pauses an
episode's clock while the episode waits its turn (for a free worker, for a planner batch to fill) and
charges it the planner's own call time instead, so an episode's budget does not depend on how many other
episodes run beside it (see :mod:`agentflow_env.scheduler`).
"""

from __future__ import annotations

import threading
import time

__all__ = ["EpisodeClock"]


class EpisodeClock:
    """Seconds of an episode's own work: runs from :meth:`start`, stops while paused, takes explicit charges."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spent = 0.0
        self._since: float | None = None

    def start(self) -> None:
        """Zero the clock and run it (an env calls this when its episode starts)."""
        with self._lock:
            self._spent, self._since = 0.0, time.monotonic()

    def pause(self) -> None:
        """Stop counting (the episode waits for something that is not its own work)."""
        with self._lock:
            if self._since is not None:
                self._spent += time.monotonic() - self._since
                self._since = None

    def resume(self) -> None:
        """Count again."""
        with self._lock:
            if self._since is None:
                self._since = time.monotonic()

    def charge(self, seconds: float) -> None:
        """Add work done elsewhere for this episode (its planner call, measured by the runner)."""
        with self._lock:
            self._spent += max(float(seconds), 0.0)

    @property
    def running(self) -> bool:
        return self._since is not None

    def elapsed(self) -> float:
        with self._lock:
            return self._spent + (time.monotonic() - self._since if self._since is not None else 0.0)
