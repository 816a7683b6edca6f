"""``EpisodeClock``: the time an episode has spent on its own work, for its ``time_budget_s``.

An env starts its clock at ``reset`` and reads it before each module, tool or verifier call. Played by hand,
the clock simply runs (wall time since the start). A runner that keeps many episodes in flight pauses an
episode's clock while the episode waits its turn (for a free worker, for a planner batch to fill) and
charges it the planner's own call time instead, so an episode's budget does not depend on how many other
episodes run beside it (see :mod:`agentflow_env.vector.scheduler`).
"""

from __future__ import annotations

import threading
import time

__all__ = ["EpisodeClock"]


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
