"""A /metrics endpoint over a set of source collectors: the set-up the run exporter and `innotier exporter` share.

Each endpoint has its own ``CollectorRegistry`` (never the process-wide default, so two in one process never
collide) holding one ``Scrape`` over the sources.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from exporters.collectors import Scrape, SourceCollector
from exporters.listen import ListenAddress, MetricsServer, serve


@dataclass
class Endpoint:
    registry: CollectorRegistry
    scrape: Scrape
    server: MetricsServer


def open_endpoint(sources: list[SourceCollector], listen: str | ListenAddress,
                  log_level: int = logging.WARNING) -> Endpoint:
    """Serve ``sources`` on ``listen``; if the address cannot be bound the sources are closed again."""
    scrape = Scrape(sources, log_level=log_level)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(scrape)
    try:
        server = serve(registry, listen)
    except BaseException:
        scrape.close()
        raise
    return Endpoint(registry, scrape, server)
