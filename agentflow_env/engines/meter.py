"""``METER``: requests in flight and tokens, counted across every HTTP engine of the process (for progress bars)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["METER", "RequestMeter"]


class RequestMeter:
    """Counts requests in flight (now and peak), finished requests and completion tokens; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.requests = 0
        self.completion_tokens = 0
        self._area = 0.0  # integral of in_flight over time, for the mean
        self._since = time.monotonic()
        self._last = self._since

    def _advance(self) -> None:
        now = time.monotonic()
        self._area += self.in_flight * (now - self._last)
        self._last = now

    @contextmanager
    def request(self) -> Iterator[None]:
        with self._lock:
            self._advance()
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._advance()
                self.in_flight -= 1
                self.requests += 1

    def add_tokens(self, completion: int) -> None:
        with self._lock:
            self.completion_tokens += int(completion)

    def snapshot(self) -> dict[str, float]:
        """Counters now, with the mean in flight since the meter was made."""
        with self._lock:
            self._advance()
            span = max(self._last - self._since, 1e-9)
            return {
                "in_flight": self.in_flight,
                "peak_in_flight": self.peak,
                "mean_in_flight": self._area / span,
                "requests": self.requests,
                "completion_tokens": self.completion_tokens,
                "seconds": span,
            }


METER = RequestMeter()
