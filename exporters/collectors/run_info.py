"""The run (or sweep cell) as one ``innotier_run_info`` series with bounded labels.

Every label in ``RUN_INFO_LABELS`` is always present (empty when unknown), so the
series has one label set a run and Grafana can use its appearance as a run annotation.
"""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import InfoMetricFamily, Metric

from exporters.collectors.base import Available, SourceCollector
from exporters.naming import RUN_INFO, RUN_INFO_LABELS
from exporters.state import RunState


class RunInfoCollector(SourceCollector):
    name = "run_info"
    help = "What is being run: tier, placement, page size, flush method, doublewrite, clients, warehouses"
    needs = ("run_state",)
    min_version = None

    @classmethod
    def from_available(cls, available: Available) -> "RunInfoCollector":
        return cls(available.run_state, available.driver_id)

    def __init__(self, state: RunState, driver_id: str) -> None:
        self.state = state
        self.driver_id = driver_id

    def collect_families(self) -> Iterable[Metric]:
        info = self.state.info
        if not info:
            return []
        fam = InfoMetricFamily(RUN_INFO, "The current run or sweep cell (value 1); join on (instance, driver_id)",
                               labels=["driver_id"])
        fam.add_metric([self.driver_id], {k: info.get(k, "") for k in RUN_INFO_LABELS})
        return [fam]
