"""``innotier exporter``: serve a server's InnoDB counters (and any run info) until stopped.

For watching a server outside a driver run, e.g. beside mysqld_exporter on a tier
experiment.  An unreachable server does not stop the exporter: it keeps serving and
reports ``innotier_collector_success{collector="innodb"} 0`` until the server answers.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from tuner.core.errors import ServerError

from exporters.collectors import Scrape, build_sources, check_names
from exporters.endpoint import open_endpoint
from exporters.listen import MetricsServer, parse_listen
from exporters.naming import DEFAULT_DRIVER_ID
from exporters.state import RunState


@dataclass
class StandaloneExporter:
    registry: CollectorRegistry
    scrape: Scrape
    server: MetricsServer

    def probe(self) -> dict[str, str | None]:
        """Run one scrape now; the error of each collector that failed (None when it worked)."""
        list(self.scrape.collect())
        return {s.name: self.scrape.last_error(s.name) for s in self.scrape.sources}

    def stop(self) -> None:
        self.server.stop()
        self.scrape.close()


DEFAULT_TPCC_DATABASE = "tpcc"  # the workload commands' default schema
TPCC_SCHEMA_SQL = ("SELECT COUNT(*) FROM information_schema.tables "
                   "WHERE table_schema = %s AND table_name = 'district'")


def with_tpcc_default(spec):
    """``spec`` naming the TPC-C schema to count New-Orders in: the one given, else ``tpcc`` when the server
    has it (or cannot be asked yet: the collector then reports failure until the server answers), else none.

    Returns (spec, how) where ``how`` says where the schema came from, for the start-up line."""
    if spec.database:
        return spec, f"database {spec.database} (--database)"
    try:
        conn = spec.connect(connection_timeout=5)
    except ServerError:
        return spec.with_database(DEFAULT_TPCC_DATABASE), f"database {DEFAULT_TPCC_DATABASE} (default; server not reachable yet)"
    try:
        cur = conn.cursor()
        cur.execute(TPCC_SCHEMA_SQL, (DEFAULT_TPCC_DATABASE,))
        found = cur.fetchone()[0] > 0
    finally:
        conn.close()
    if found:
        return spec.with_database(DEFAULT_TPCC_DATABASE), f"database {DEFAULT_TPCC_DATABASE} (found on the server)"
    return spec, f"no {DEFAULT_TPCC_DATABASE} schema on the server (name one with --database)"


def check_input(listen: str, disabled: list[str] | tuple[str, ...]) -> None:
    """The address and the collector names, before anything connects or listens."""
    parse_listen(listen)
    check_names(disabled)


def start_standalone(listen: str, spec, info: dict | None = None, disabled: tuple[str, ...] = (),
                     driver_id: str = DEFAULT_DRIVER_ID) -> StandaloneExporter:
    addr = parse_listen(listen)  # validate before connecting anywhere
    state = RunState(info)
    sources = [s for s in build_sources(spec=spec, state=state, driver_id=driver_id, disabled=disabled)
               if s.name != "sweep"]
    ep = open_endpoint(sources, addr)
    return StandaloneExporter(registry=ep.registry, scrape=ep.scrape, server=ep.server)


def serve_forever(exporter: StandaloneExporter, describe: str) -> int:
    """Print where we serve, warn about failing collectors, block until SIGINT/SIGTERM."""
    logging.basicConfig(format="innotier exporter: %(message)s", level=logging.WARNING)
    print(f"innotier exporter: serving {exporter.server.url} for {describe} "
          f"(collectors: {', '.join(s.name for s in exporter.scrape.sources)})", file=sys.stderr, flush=True)
    for name, error in exporter.probe().items():
        if error:
            print(f'innotier exporter: serving anyway; innotier_collector_success{{collector="{name}"}} '
                  "is 0 until it works", file=sys.stderr, flush=True)
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        done.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        exporter.stop()
    print("innotier exporter: stopped", file=sys.stderr, flush=True)
    return 0
