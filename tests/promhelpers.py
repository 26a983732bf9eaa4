"""Real Prometheus (and exporters) for tests: Debian's binaries on a free port, state in a temporary directory.

Shared by tests/exporters and tests/fleet.  Each service is stopped by its own pid.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

PROMETHEUS = "/usr/bin/prometheus"
MYSQLD_EXPORTER = "/usr/bin/prometheus-mysqld-exporter"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


@dataclass
class Service:
    name: str
    url: str
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start_service(name: str, cmd: list[str], ready_url: str, log: Path, timeout: float = 30) -> Service:
    fh = open(log, "wb")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    fh.close()
    svc = Service(name, ready_url, proc, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            http_get(ready_url, timeout=2)
            return svc
        except OSError:
            time.sleep(0.2)
    svc.stop()
    raise AssertionError(f"{name} did not answer {ready_url} within {timeout:.0f} s: {log.read_text()[-2000:]}")


@dataclass
class Prometheus:
    """A running Prometheus and its HTTP API (https://prometheus.io/docs/prometheus/latest/querying/api/)."""

    base: str
    service: Service
    jobs: dict[str, str] = field(default_factory=dict)

    def api(self, path: str, **params) -> dict:
        url = f"{self.base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            body = http_get(url, timeout=30)
        except urllib.error.HTTPError as exc:  # 400 for a bad expression: show Prometheus's message
            body = exc.read().decode()
        doc = json.loads(body)
        if doc.get("status") != "success":
            raise AssertionError(f"Prometheus rejected {params}: {doc.get('errorType')}: {doc.get('error')}")
        return doc["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
        return self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=str(step))["result"]

    def wait_up(self, jobs: list[str], timeout: float = 60) -> None:
        """Until every job's target has been scraped successfully (up == 1)."""
        deadline = time.monotonic() + timeout
        up: dict[str, float] = {}
        while time.monotonic() < deadline:
            up = {r["metric"]["job"]: float(r["value"][1]) for r in self.query("up")}
            if all(up.get(j) == 1.0 for j in jobs):
                return
            time.sleep(0.5)
        targets = self.api("targets")["activeTargets"]
        raise AssertionError(f"targets not up within {timeout:.0f} s: {up}; "
                             f"{[(t['labels'].get('job'), t.get('lastError')) for t in targets]}")


def prometheus_config(jobs: dict[str, str], interval: str = "1s") -> str:
    """A scrape config: job name -> host:port, all scraped every ``interval``."""
    lines = ["global:", f"  scrape_interval: {interval}", f"  evaluation_interval: {interval}", "scrape_configs:"]
    for job, target in jobs.items():
        lines += [f"  - job_name: {job}", f"    scrape_interval: {interval}", "    static_configs:",
                  f"      - targets: ['{target}']"]
    return "\n".join(lines) + "\n"


def launch_prometheus(d: Path, jobs: dict[str, str], log: Path, interval: str = "1s") -> Prometheus:
    """Start Prometheus on 127.0.0.1 scraping ``jobs`` (name -> host:port) every ``interval``; state in ``d``."""
    if not os.access(PROMETHEUS, os.X_OK):
        raise AssertionError(f"{PROMETHEUS} is missing; install Debian's prometheus package (CI installs it)")
    d.mkdir(parents=True, exist_ok=True)
    (d / "prometheus.yml").write_text(prometheus_config(jobs, interval))
    port = free_port()
    cmd = [PROMETHEUS, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
           # Debian's unit serves the console templates from /etc; we need none of them
           f"--web.console.templates={d}", f"--web.console.libraries={d}"]
    svc = start_service("prometheus", cmd, f"http://127.0.0.1:{port}/-/ready", log)
    return Prometheus(base=f"http://127.0.0.1:{port}", service=svc, jobs=jobs)
