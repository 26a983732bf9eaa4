"""The explicit registry of collectors: one per source, one module each.

``COLLECTOR_CLASSES`` is the one list of collector classes; each class declares its
``name`` (the ``collector`` label), ``needs`` and ``min_version``.  ``COLLECTORS`` maps
names to classes, and ``build_sources`` builds every collector whose needs are available.
"""

from __future__ import annotations

from exporters.collectors.base import Available, Scrape, SourceCollector
from exporters.collectors.connection import ServerConnection
from exporters.collectors.innodb import InnodbStatusCollector
from exporters.collectors.run_info import RunInfoCollector
from exporters.collectors.sweep import SweepCollector
from exporters.collectors.tpcc import TpccCollector
from exporters.collectors.tpcc_schema import TpccSchemaCollector
from tuner.core.errors import UsageError


# The one list of collector classes; everything else (names, what each needs, the oldest server
# it supports, its help) is read from the classes.  Order is the order of /metrics.
COLLECTOR_CLASSES: tuple[type[SourceCollector], ...] = (
    TpccCollector, RunInfoCollector, SweepCollector, InnodbStatusCollector, TpccSchemaCollector,
)
COLLECTORS: dict[str, type[SourceCollector]] = {cls.name: cls for cls in COLLECTOR_CLASSES}


def check_names(names: tuple[str, ...] | list[str], option: str = "--no-collector") -> None:
    """Refuse collector names the registry does not have, naming the ones it has."""
    unknown = sorted(set(names) - set(COLLECTORS))
    if unknown:
        raise UsageError(f"{option}: unknown collector(s) {', '.join(unknown)}; known: {', '.join(COLLECTORS)}")


def build_sources(*, measurement=None, spec=None, state=None, driver_id: str = "0",
                  disabled: tuple[str, ...] = ()) -> list[SourceCollector]:
    """The source collectors for what is available (a Measurement, a server, run state)."""
    check_names(disabled)
    available = Available(measurement=measurement, connection=ServerConnection(spec) if spec is not None else None,
                          database=spec.database if spec is not None else None, run_state=state,
                          driver_id=driver_id)
    return [cls.from_available(available) for name, cls in COLLECTORS.items()
            if name not in disabled and all(available.has(need) for need in cls.needs)]


__all__ = ["COLLECTORS", "COLLECTOR_CLASSES", "Available", "Scrape", "SourceCollector", "build_sources",
           "check_names"]
