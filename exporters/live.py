"""The exporter a TPC-C run or a sweep serves while it runs.

``start_live_exporter(measurement, listen, run_info, spec)`` serves, on its own
``CollectorRegistry`` (never the process-wide default), the run's TPC-C metrics read
from the Measurement, the run info, sweep progress, and -- when ``spec`` names the
server under test -- its InnoDB counters (and, when ``spec.database`` is the TPC-C
schema, the server-side New-Order count behind NOPM).  See exporters/naming.py for
the metric names and the labels that keep several drivers apart (``driver_id``,
``server``, plus Prometheus's ``instance``).

Called by ``tpcc run --metrics-listen ADDR`` and ``sweep run``::

    handle = start_live_exporter(m, "127.0.0.1:9623", {"tier": "zram", "clients": 8}, spec)
    try:
        run(...)
        handle.set_progress(3, 12, SweepPhase.MEASURE)   # sweep runner
        handle.set_info({...})              # next cell
    finally:
        handle.write_textfile("/var/lib/node_exporter/textfile/innotier.prom")  # optional
        handle.stop()
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from tuner.core.phases import SweepPhase

from exporters.collectors import Scrape, build_sources
from exporters.collectors.tpcc import TpccCollector
from exporters.endpoint import open_endpoint
from exporters.listen import MetricsServer
from exporters.naming import driver_id_from
from exporters.state import RunState
from tuner.core.measure import Measurement
from exporters.textfile import write_textfile

SAMPLE_EVERY_SECONDS = 1.0
SERVER_SAMPLE_EVERY_TICKS = 5  # the NOPM window is 60 s: a sample every 5 s is plenty


@dataclass
class LiveExporter:
    """Handle of a running exporter: ``url``, ``set_info``, ``set_progress``, ``stop``."""

    registry: CollectorRegistry
    scrape: Scrape
    state: RunState
    server: MetricsServer
    driver_id: str
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.server.url

    def set_info(self, info: dict) -> None:
        """Replace the run info (a new sweep cell); unknown or secret-looking keys are dropped."""
        self.state.set_info(info)

    def set_progress(self, done: int, total: int, phase: SweepPhase) -> None:
        self.state.set_progress(done, total, phase)

    def set_measurement(self, measurement: Measurement) -> None:
        """Follow the next run's Measurement (a sweep keeping one endpoint across cells)."""
        tpcc = [s for s in self.scrape.sources if isinstance(s, TpccCollector)]
        if tpcc:
            tpcc[0].set_measurement(measurement)
        else:  # started without a Measurement: serve one from now on
            self.scrape.sources.insert(0, TpccCollector(measurement, self.driver_id))
        measurement.subscribe(self._on_interval)

    def write_textfile(self, path: str | Path) -> Path:
        """Write the current metrics for node_exporter's textfile collector (durably)."""
        return write_textfile(path, self.registry)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self.server.stop()
        if self._sampler is not None:
            self._sampler.join(timeout=5)
        self.scrape.close()

    def __enter__(self) -> "LiveExporter":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- sliding windows ------------------------------------------------------

    def _on_interval(self, _measurement: Measurement) -> None:
        # runs in the driver's merge loop: only the in-memory sources, never a server round trip
        if not self._stop.is_set():
            self._sample(only=(TpccCollector,))

    def _sample(self, only: tuple[type, ...] | None = None) -> None:
        for source in self.scrape.sources:
            if only is not None and not isinstance(source, only):
                continue
            sample = getattr(source, "sample", None)
            if sample is not None:
                try:
                    sample()
                except Exception:
                    pass

    def _run_sampler(self) -> None:
        tick = 0
        while not self._stop.wait(SAMPLE_EVERY_SECONDS):
            tick += 1
            # in-memory sources each second; a server round trip (NOPM) only every few seconds
            self._sample(only=None if tick % SERVER_SAMPLE_EVERY_TICKS == 0 else (TpccCollector,))


def start_live_exporter(measurement: Measurement | None, listen: str, run_info: dict | None,
                        spec=None, *, driver_id: str | None = None) -> LiveExporter:
    """Serve the run's metrics on ``listen`` (``HOST:PORT``; port 0 picks a free one) until ``stop()``.

    ``run_info`` may carry ``driver_id`` (default "0"); its other keys become labels of
    ``innotier_run_info`` if they are among ``RUN_INFO_LABELS``.  ``spec`` is the server
    under test (a ConnectionSpec) or None.  Raises UsageError for a bad or busy address.
    """
    driver = driver_id or driver_id_from(run_info)
    state = RunState(run_info)
    sources = build_sources(measurement=measurement, spec=spec, state=state, driver_id=driver)
    ep = open_endpoint(sources, listen, log_level=logging.DEBUG)  # failures show as innotier_collector_success 0
    handle = LiveExporter(registry=ep.registry, scrape=ep.scrape, state=state, server=ep.server, driver_id=driver)
    if measurement is not None:
        measurement.subscribe(handle._on_interval)
    handle._sample()
    handle._sampler = threading.Thread(target=handle._run_sampler, name="innotier-exporter-sampler", daemon=True)
    handle._sampler.start()
    return handle
