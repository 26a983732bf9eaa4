"""What the sweep runner and the driver tell the exporter while they run: run info and sweep progress.

One small thread-safe holder, written by ``LiveExporter.set_info`` / ``set_progress`` and
read by the run-info and sweep collectors at each scrape.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tuner.core.phases import SweepPhase

from exporters.naming import sanitize_info


@dataclass(frozen=True)
class SweepProgress:
    done: int
    total: int
    phase: SweepPhase


class RunState:
    def __init__(self, info: dict | None = None) -> None:
        self._lock = threading.Lock()
        self._info = sanitize_info(info)
        self._progress: SweepProgress | None = None

    def set_info(self, info: dict | None) -> None:
        """Replace the run info (the previous label set disappears from the next scrape)."""
        clean = sanitize_info(info)
        with self._lock:
            self._info = clean

    def set_progress(self, done: int, total: int, phase: SweepPhase) -> None:
        if total < 0 or done < 0:
            raise ValueError(f"sweep progress {done}/{total} is negative")
        phase = SweepPhase(phase)  # ValueError for a phase the sweep does not have
        with self._lock:
            self._progress = SweepProgress(int(done), int(total), phase)

    @property
    def info(self) -> dict[str, str]:
        with self._lock:
            return dict(self._info)

    @property
    def progress(self) -> SweepProgress | None:
        with self._lock:
            return self._progress
