"""One collector per source, and the scrape that runs them all.

A *source collector* reads one source (the run's Measurement, the server's SHOW GLOBAL
STATUS, the TPC-C schema, the run state) and returns metric families.  ``Scrape`` is the
one object registered in a ``CollectorRegistry``: at each scrape it runs every source
collector, and a collector that raises is reported as ``innotier_collector_success{collector}
0`` while the others are still served (mysqld_exporter's scraper pattern,
prometheus/mysqld_exporter collector/exporter.go).
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporters.naming import COLLECTOR_DURATION, COLLECTOR_SUCCESS

log = logging.getLogger("innotier.exporter")


@dataclass(frozen=True)
class Available:
    """What an exporter has to read from; a collector is built when all it ``needs`` is here."""

    measurement: Any = None        # the run's Measurement
    connection: Any = None         # a ServerConnection to the server under test
    database: str | None = None    # the TPC-C schema on that server
    run_state: Any = None          # RunState (run info, sweep progress)
    driver_id: str = "0"

    def has(self, need: str) -> bool:
        return getattr(self, need) not in (None, "")


class SourceCollector(abc.ABC):
    """Reads one source.

    Each collector declares, as class data, what the registry
    (``exporters.collectors.COLLECTORS``) needs to know: ``name`` (the ``collector``
    label), ``help`` (what it reads), ``needs`` (fields of ``Available`` it is built
    from) and ``min_version`` (oldest server, per flavor, whose SQL it relies on; None
    when it reads no server).
    """

    name: ClassVar[str]
    help: ClassVar[str]
    needs: ClassVar[tuple[str, ...]]
    min_version: ClassVar[dict[str, str] | None]

    @classmethod
    def from_available(cls, available: Available) -> "SourceCollector":
        """Build the collector from what ``needs`` names (all present); every registered collector has one."""
        raise NotImplementedError(f"{cls.__name__} is in the registry but cannot be built from Available")

    @abc.abstractmethod
    def collect_families(self) -> Iterable[Metric]:
        """The source's metric families; raise on failure (the scrape reports it)."""

    def close(self) -> None:
        """Release connections; called when the exporter stops."""


class Scrape(Collector):
    """Runs the source collectors; emits their families plus per-collector success and duration."""

    def __init__(self, sources: Iterable[SourceCollector], log_level: int = logging.WARNING) -> None:
        self.sources = list(sources)
        self.log_level = log_level  # a sweep restarting servers between cells logs at DEBUG
        self._errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterable[Metric]:
        success = GaugeMetricFamily(COLLECTOR_SUCCESS, "1 if the collector read its source in this scrape, else 0",
                                    labels=["collector"])
        duration = GaugeMetricFamily(COLLECTOR_DURATION, "Seconds the collector took in this scrape",
                                     labels=["collector"])
        families: list[Metric] = []
        for source in self.sources:
            t0 = time.perf_counter()
            try:
                got = list(source.collect_families())
            except Exception as exc:  # one failing source must not fail the scrape
                ok = 0.0
                self._note_failure(source.name, exc)
            else:
                ok = 1.0
                families.extend(got)
                self._note_success(source.name)
            success.add_metric([source.name], ok)
            duration.add_metric([source.name], time.perf_counter() - t0)
        yield from families
        yield success
        yield duration

    def last_error(self, name: str) -> str | None:
        with self._lock:
            return self._errors.get(name)

    def _note_failure(self, name: str, exc: Exception) -> None:
        msg = f"{exc.__class__.__name__}: {exc}"
        with self._lock:
            changed = self._errors.get(name) != msg
            self._errors[name] = msg
        if changed:  # log state changes, not every scrape
            log.log(self.log_level, "collector %s failed: %s", name, msg)

    def _note_success(self, name: str) -> None:
        with self._lock:
            had = self._errors.pop(name, None)
        if had:
            log.log(self.log_level, "collector %s recovered", name)

    def close(self) -> None:
        for source in self.sources:
            try:
                source.close()
            except Exception:
                pass
