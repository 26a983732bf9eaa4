"""node_exporter textfile-collector output, written at the end of a run.

node_exporter's textfile collector reads ``*.prom`` files from its
``--collector.textfile.directory`` at each scrape; a file must be replaced atomically so
a scrape never reads half of it (node_exporter docs, "Textfile Collector").  We write it
with tuner.core.durable.write_atomic: temp file beside the target, fsync, rename, fsync dir.
Several drivers on one host write distinct files (``innotier-<driver_id>.prom``), and
their series differ by ``driver_id``.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from exporters.collectors import Scrape, build_sources
from exporters.naming import driver_id_from
from exporters.state import RunState
from tuner.core.durable import write_atomic
from tuner.core.errors import UsageError
from tuner.core.measure import Measurement


def _registry_for_measurement(measurement: Measurement, run_info: dict | None, driver_id: str | None,
                              spec) -> tuple[CollectorRegistry, Scrape]:
    """A fresh registry with a finished run's metrics (and the server's counters if ``spec``)."""
    driver = driver_id or driver_id_from(run_info)
    scrape = Scrape(build_sources(measurement=measurement, spec=spec, state=RunState(run_info), driver_id=driver))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(scrape)
    return registry, scrape


def render(registry_or_measurement, run_info: dict | None = None, driver_id: str | None = None,
           spec=None) -> bytes:
    """The exposition text of a registry, or of a Measurement's metrics."""
    if not isinstance(registry_or_measurement, Measurement):
        return generate_latest(registry_or_measurement)
    registry, scrape = _registry_for_measurement(registry_or_measurement, run_info, driver_id, spec)
    try:
        return generate_latest(registry)
    finally:
        scrape.close()


def write_textfile(path: str | Path, registry_or_measurement, run_info: dict | None = None, *,
                   driver_id: str | None = None, spec=None) -> Path:
    """Write the metrics of a registry (or of a Measurement) to ``path`` (must end in .prom), durably."""
    target = Path(path)
    if target.suffix != ".prom":
        raise UsageError(f"textfile {target} does not end in .prom; node_exporter's textfile collector "
                         "reads only *.prom files")
    if target.exists() and target.is_dir():
        raise UsageError(f"textfile {target} is a directory; give a file path ending in .prom")
    payload = render(registry_or_measurement, run_info, driver_id, spec)
    return write_atomic(target, payload, mode=0o644)
