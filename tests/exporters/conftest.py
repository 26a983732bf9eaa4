"""Real services for the exporter tests: Prometheus, mysqld_exporter, node_exporter.

Each is the Debian package's binary, started here on a free 127.0.0.1 port with its
state in a temporary directory, and stopped (by its own pid) when the test ends.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import pytest

from promhelpers import (MYSQLD_EXPORTER, NODE_EXPORTER, PROMETHEUS, Prometheus, Service,  # noqa: F401
                         free_port, http_get, launch_prometheus, prometheus_config, start_service)


@pytest.fixture
def start_prometheus(tmp_path):
    """Factory: start Prometheus scraping ``jobs`` (name -> host:port) every second."""
    started: list[Service] = []

    def start(jobs: dict[str, str]) -> Prometheus:
        prom = launch_prometheus(tmp_path / "prometheus", jobs, tmp_path / "prometheus.log")
        started.append(prom.service)
        return prom

    yield start
    for svc in started:
        svc.stop()


@pytest.fixture
def mysqld_exporter(tmp_path):
    """Factory: Debian's mysqld_exporter against a server (credentials in a 0600 option file), or None."""
    started: list[tuple[Service, object]] = []

    def start(spec) -> Service | None:
        if not os.access(MYSQLD_EXPORTER, os.X_OK):
            return None
        port = free_port()
        ctx = spec.client_option_file()
        cnf = ctx.__enter__()
        cmd = [MYSQLD_EXPORTER, f"--config.my-cnf={cnf}", f"--web.listen-address=127.0.0.1:{port}"]
        svc = start_service("mysqld_exporter", cmd, f"http://127.0.0.1:{port}/metrics", tmp_path / "mysqld_exporter.log")
        started.append((svc, ctx))
        return svc

    yield start
    for svc, ctx in started:
        svc.stop()
        ctx.__exit__(None, None, None)


@pytest.fixture
def node_exporter(tmp_path):
    """Factory: Debian's node_exporter with diskstats and a textfile directory, or None."""
    started: list[Service] = []

    def start(textfile_dir: Path) -> Service | None:
        if not os.access(NODE_EXPORTER, os.X_OK):
            return None
        port = free_port()
        cmd = [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
               "--collector.diskstats", "--collector.textfile", f"--collector.textfile.directory={textfile_dir}"]
        svc = start_service("node_exporter", cmd, f"http://127.0.0.1:{port}/metrics", tmp_path / "node_exporter.log")
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.stop()


def host_port(url: str) -> str:
    return urllib.parse.urlparse(url).netloc

