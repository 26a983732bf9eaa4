"""Sweep progress as the sweep runner reports it: cells done of total, and the current phase."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from exporters.collectors.base import Available, SourceCollector
from exporters.naming import SWEEP_CELLS_DONE, SWEEP_CELLS_TOTAL, SWEEP_PHASE
from exporters.state import RunState


class SweepCollector(SourceCollector):
    name = "sweep"
    help = "Sweep progress (cells done of total, current phase) from the sweep runner"
    needs = ("run_state",)
    min_version = None

    @classmethod
    def from_available(cls, available: Available) -> "SweepCollector":
        return cls(available.run_state, available.driver_id)

    def __init__(self, state: RunState, driver_id: str) -> None:
        self.state = state
        self.driver_id = driver_id

    def collect_families(self) -> Iterable[Metric]:
        p = self.state.progress
        if p is None:
            return []
        d = self.driver_id
        total = GaugeMetricFamily(SWEEP_CELLS_TOTAL, "Cells in the sweep", labels=["driver_id"])
        total.add_metric([d], p.total)
        done = GaugeMetricFamily(SWEEP_CELLS_DONE, "Cells of the sweep finished", labels=["driver_id"])
        done.add_metric([d], p.done)
        phase = GaugeMetricFamily(SWEEP_PHASE, "1 for the sweep's current phase", labels=["driver_id", "phase"])
        phase.add_metric([d, p.phase], 1.0)
        return [total, done, phase]
