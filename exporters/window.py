"""Sliding-window rates of cumulative counters, for the tpmC / NOPM / TPM gauges.

PromQL's ``rate()`` over the ``_total`` counters is the real measure; these gauges
serve simple displays (a stat panel, a textfile) that cannot compute rates.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class SlidingRate:
    """Per-minute rate of a monotonic counter over the last ``window`` seconds of samples."""

    def __init__(self, window: float = 60.0, min_span: float = 1.0) -> None:
        self.window = window
        self.min_span = min_span
        self._samples: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def observe(self, value: float, now: float | None = None) -> None:
        t = time.monotonic() if now is None else now
        with self._lock:
            if self._samples and value < self._samples[-1][1]:
                self._samples.clear()  # the counter was reset (a new run): start over
            self._samples.append((t, value))
            # keep one sample at or before the window's start, so the rate spans the whole window
            while len(self._samples) > 2 and self._samples[1][0] <= t - self.window:
                self._samples.popleft()

    def per_minute(self) -> float | None:
        """The rate, or None until the samples span ``min_span`` seconds."""
        with self._lock:
            if len(self._samples) < 2:
                return None
            (t0, v0), (t1, v1) = self._samples[0], self._samples[-1]
        span = t1 - t0
        if span < self.min_span:
            return None
        return (v1 - v0) * 60.0 / span
