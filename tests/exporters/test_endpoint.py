"""The HTTP endpoint, the live exporter handle, textfile output, and bad input."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporters.listen import parse_listen
from exporters.live import start_live_exporter
from exporters.textfile import write_textfile
from tuner.core.errors import UsageError
from tuner.core.measure import Measurement
from tuner.core.server import ConnectionSpec
from tuner.core.phases import SweepPhase
from waiting import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fetch(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _fetch_when_serving(url: str) -> dict[tuple[str, tuple], float] | None:
    """The samples at url, or None while nothing listens there yet."""
    try:
        return fetch(url)
    except OSError:
        return None


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- listen addresses ------------------------------------------------------------

@pytest.mark.parametrize("text", ["not-an-address", "nohost:9623", "127.0.0.1", "127.0.0.1:", ":9623",
                                  "127.0.0.1:99999", "127.0.0.1:http", "999.1.1.1:9623", ""])
def test_listen_address_that_is_not_an_address(text):
    with pytest.raises(UsageError, match="listen address"):
        parse_listen(text)


def test_listen_address_forms():
    assert str(parse_listen("127.0.0.1:9623")) == "127.0.0.1:9623"
    assert parse_listen("localhost:0").host == "127.0.0.1"
    assert str(parse_listen("[::1]:9623")) == "[::1]:9623"


def test_port_in_use_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UsageError, match="already in use"):
            start_live_exporter(Measurement(), f"127.0.0.1:{port}", {}, None)


def test_address_not_on_this_host():
    with pytest.raises(UsageError, match="not an address of this host"):
        start_live_exporter(Measurement(), "192.0.2.1:0", {}, None)  # TEST-NET-1, never local


# -- live exporter --------------------------------------------------------------

def test_live_exporter_serves_measurement_info_and_progress():
    m = Measurement()
    handle = start_live_exporter(m, "127.0.0.1:0", {"tier": "tmpfs", "clients": 4, "driver_id": "3"}, None)
    try:
        assert handle.url.startswith("http://127.0.0.1:") and handle.url.endswith("/metrics")
        m.record("new_order", 0.004)
        s = fetch(handle.url)
        assert value(s, "innotier_tpcc_new_orders_total", driver_id="3") == 1
        [info] = [dict(l) for (n, l) in s if n == "innotier_run_info"]
        assert info["tier"] == "tmpfs" and info["clients"] == "4" and info["driver_id"] == "3"
        handle.set_info({"tier": "zram", "clients": 8})
        handle.set_progress(2, 5, SweepPhase.MEASURE)
        s = fetch(handle.url)
        [info] = [dict(l) for (n, l) in s if n == "innotier_run_info"]
        assert info["tier"] == "zram"
        assert value(s, "innotier_sweep_cells_done", driver_id="3") == 2
        assert value(s, "innotier_sweep_cells_total", driver_id="3") == 5
        m2 = Measurement()
        handle.set_measurement(m2)
        assert value(fetch(handle.url), "innotier_tpcc_new_orders_total", driver_id="3") == 0
    finally:
        handle.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(handle.url, timeout=2)


def test_live_exporter_started_without_measurement_follows_one_later():
    handle = start_live_exporter(None, "127.0.0.1:0", {"sweep": "s1"}, None)
    try:
        assert ("innotier_tpcc_new_orders_total", (("driver_id", "0"),)) not in fetch(handle.url)
        m = Measurement()
        m.record("new_order", 0.01)
        handle.set_measurement(m)
        assert value(fetch(handle.url), "innotier_tpcc_new_orders_total", driver_id="0") == 1
    finally:
        handle.stop()


def test_live_exporter_never_uses_the_default_registry():
    from prometheus_client import REGISTRY

    before = set(REGISTRY._names_to_collectors)
    handle = start_live_exporter(Measurement(), "127.0.0.1:0", {}, None)
    handle.stop()
    assert set(REGISTRY._names_to_collectors) == before


def test_unreachable_server_reports_collector_failure_and_keeps_serving():
    spec = ConnectionSpec(host="127.0.0.1", port=closed_port(), password="s3cret-pw", database="tpcc")
    m = Measurement()
    m.record("payment", 0.002)
    handle = start_live_exporter(m, "127.0.0.1:0", {"tier": "ram"}, spec)
    try:
        with urllib.request.urlopen(handle.url, timeout=10) as resp:
            text = resp.read().decode()
        s = fetch(handle.url)
        assert value(s, "innotier_collector_success", collector="innodb") == 0
        assert value(s, "innotier_collector_success", collector="tpcc_schema") == 0
        assert value(s, "innotier_collector_success", collector="tpcc") == 1
        assert value(s, "innotier_tpcc_transactions_total", driver_id="0", txn="payment", outcome="commit") == 1
        assert "s3cret-pw" not in text
    finally:
        handle.stop()


def test_live_exporter_reads_real_server(shared_sandbox):
    handle = start_live_exporter(Measurement(), "127.0.0.1:0", {}, shared_sandbox.connection_spec())
    try:
        s = fetch(handle.url)
        assert value(s, "innotier_collector_success", collector="innodb") == 1
        assert value(s, "innotier_innodb_buffer_pool_read_requests_total", server="sandbox:shared") > 0
        assert not [k for k in s if "password" in repr(k).lower()]
    finally:
        handle.stop()


# -- textfile -------------------------------------------------------------------

def test_textfile_from_measurement(tmp_path):
    m = Measurement()
    m.record("new_order", 0.01)
    m.record("new_order", 0.02, "rollback")
    path = write_textfile(tmp_path / "innotier-0.prom", m, {"tier": "zram", "warehouses": 1})
    text = path.read_text()
    s = {(x.name, tuple(sorted(x.labels.items()))): x.value
         for fam in text_string_to_metric_families(text) for x in fam.samples}
    assert value(s, "innotier_tpcc_new_orders_total", driver_id="0") == 2  # committed + rolled back
    assert value(s, "innotier_tpcc_transactions_total", driver_id="0", txn="new_order", outcome="rollback") == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["innotier-0.prom"]  # no temp file left behind


def test_textfile_from_live_registry_replaces_atomically(tmp_path):
    m = Measurement()
    handle = start_live_exporter(m, "127.0.0.1:0", {"tier": "ram"}, None)
    try:
        target = tmp_path / "run.prom"
        target.write_text("old\n")
        inode = target.stat().st_ino
        m.record("delivery", 0.1)
        handle.write_textfile(target)
    finally:
        handle.stop()
    assert target.stat().st_ino != inode  # renamed over, not rewritten in place
    assert 'innotier_tpcc_transactions_total{driver_id="0",outcome="commit",txn="delivery"} 1.0' in target.read_text()


def test_textfile_refuses_a_name_node_exporter_ignores(tmp_path):
    with pytest.raises(UsageError, match=r"\.prom"):
        write_textfile(tmp_path / "metrics.txt", Measurement())
    assert list(tmp_path.iterdir()) == []


# -- the standalone command -------------------------------------------------------

def run_cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_cli_bad_listen_address():
    proc = run_cli("exporter", "--listen", "not-an-address", "--host", "127.0.0.1", "--port", "1")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("innotier: listen address 'not-an-address'")
    assert "Traceback" not in proc.stderr


def test_cli_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli("exporter", "--listen", f"127.0.0.1:{port}", "--host", "127.0.0.1", "--port", "1")
    assert proc.returncode == 2
    assert "already in use" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_unreachable_server_keeps_serving(tmp_path):
    port = closed_port()
    listen_port = closed_port()
    env = dict(os.environ, INNOTIER_PASSWORD="s3cret-pw")
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "exporter", "--listen", f"127.0.0.1:{listen_port}",
                             "--host", "127.0.0.1", "--port", str(port), "--info", "tier=zram"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        url = f"http://127.0.0.1:{listen_port}/metrics"
        s = wait_for(lambda: _fetch_when_serving(url), 30, f"the exporter to serve {url}", interval=0.2)
        assert value(s, "innotier_collector_success", collector="innodb") == 0
        assert value(s, "innotier_collector_success", collector="run_info") == 1
        assert proc.poll() is None  # still running
        s = fetch(url)  # and still serving on the next scrape
        assert value(s, "innotier_collector_success", collector="innodb") == 0
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "collector innodb failed" in err and "serving anyway" in err
    assert "s3cret-pw" not in err + out
    assert "s3cret-pw" not in " ".join(proc.args)


def test_cli_serves_sandbox(shared_sandbox):
    listen_port = closed_port()
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "exporter", "--listen", f"127.0.0.1:{listen_port}",
                             "--sandbox", shared_sandbox.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        url = f"http://127.0.0.1:{listen_port}/metrics"
        s = wait_for(lambda: _fetch_when_serving(url), 30, f"the exporter to serve {url}", interval=0.2)
        assert value(s, "innotier_collector_success", collector="innodb") == 1
        # present; 0 is right in the first second after the test's sandbox started (Uptime counts whole seconds)
        assert value(s, "innotier_server_uptime_seconds", server=f"sandbox:{shared_sandbox.name}") >= 0
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _serve(*args: str) -> tuple[subprocess.Popen, str, str]:
    """`innotier exporter` on a free port: the process, its URL and the "serving" line it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "exporter", "--listen", "127.0.0.1:0", *args],
                            cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stderr.readline()
    m = re.search(r"serving (http://\S+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"exporter did not start: {line}{proc.stderr.read()}")
    return proc, m.group(1), line


def test_exporter_finds_the_tpcc_schema_by_default(tpcc_w1, shared_sandbox):
    proc, url, line = _serve("--sandbox", shared_sandbox.name)
    try:
        assert "tpcc_schema" in line and "TPC-C New-Orders from database tpcc (found on the server)" in line, line

        def scraped() -> str:
            with urllib.request.urlopen(url, timeout=10) as resp:
                text = resp.read().decode()
            return text if "innotier_tpcc_district_orders_total" in text else ""

        text = wait_for(scraped, 30, "the exporter to serve innotier_tpcc_district_orders_total", interval=0.2)
        assert re.search(r'^innotier_tpcc_district_orders_total\{[^}]*\} \d', text, re.M), text[-2000:]
        assert 'innotier_collector_success{collector="tpcc_schema"} 1.0' in text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_exporter_on_an_unreachable_server_keeps_the_documented_default(tmp_path):
    proc, url, line = _serve("--socket", str(tmp_path / "no.sock"))
    try:
        assert "tpcc_schema" in line and "database tpcc (default; server not reachable yet)" in line, line
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
