"""The explicit registry of collectors: one per source, one module each.

``COLLECTORS`` maps a collector's name (its ``collector`` label) to what it needs; the
standalone exporter's ``--no-collector`` choices come from it, and ``build_sources``
makes the ones whose source is available.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporters.collectors.base import Scrape, SourceCollector
from exporters.collectors.connection import ServerConnection
from exporters.collectors.innodb import InnodbStatusCollector
from exporters.collectors.run_info import RunInfoCollector
from exporters.collectors.sweep import SweepCollector
from exporters.collectors.tpcc import TpccCollector
from exporters.collectors.tpcc_schema import TpccSchemaCollector
from exporters.naming import COLLECTOR_NAMES


@dataclass(frozen=True)
class CollectorEntry:
    cls: type[SourceCollector]
    needs: str  # measurement, server, tpcc_database, run_state

    @property
    def help(self) -> str:
        return self.cls.help


COLLECTORS: dict[str, CollectorEntry] = {
    "tpcc": CollectorEntry(TpccCollector, "measurement"),
    "run_info": CollectorEntry(RunInfoCollector, "run_state"),
    "sweep": CollectorEntry(SweepCollector, "run_state"),
    "innodb": CollectorEntry(InnodbStatusCollector, "server"),
    "tpcc_schema": CollectorEntry(TpccSchemaCollector, "tpcc_database"),
}

assert tuple(COLLECTORS) == COLLECTOR_NAMES, "keep exporters.naming.COLLECTOR_NAMES in step with COLLECTORS"


def build_sources(*, measurement=None, spec=None, state=None, driver_id: str = "0",
                  disabled: tuple[str, ...] = ()) -> list[SourceCollector]:
    """The source collectors for what is available (a Measurement, a server, run state)."""
    unknown = set(disabled) - set(COLLECTORS)
    if unknown:
        from tuner.core.errors import UsageError

        raise UsageError(f"unknown collector(s) {', '.join(sorted(unknown))}; known: {', '.join(COLLECTORS)}")
    connection = ServerConnection(spec) if spec is not None else None
    out: list[SourceCollector] = []
    for name, entry in COLLECTORS.items():
        if name in disabled:
            continue
        if entry.needs == "measurement" and measurement is not None:
            out.append(TpccCollector(measurement, driver_id))
        elif entry.needs == "run_state" and state is not None:
            out.append(entry.cls(state, driver_id))
        elif entry.needs == "server" and connection is not None:
            out.append(InnodbStatusCollector(connection))
        elif entry.needs == "tpcc_database" and connection is not None and spec.database:
            out.append(TpccSchemaCollector(connection, spec.database))
    return out


__all__ = ["COLLECTORS", "CollectorEntry", "Scrape", "SourceCollector", "build_sources"]
