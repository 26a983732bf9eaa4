"""The InnoDB collector against a recorded SHOW GLOBAL STATUS capture: exact values in the exposition."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporters.collectors.base import Scrape, SourceCollector
from exporters.collectors.innodb import STATUS_METRICS, STATUS_SQL, families_from_status

CAPTURE = Path(__file__).parent / "fixtures" / "mariadb-10.11-show-global-status.tsv"


def read_capture(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0] == "Variable_name\tValue"
    return dict(line.split("\t", 1) for line in lines[1:] if "\t" in line)


class CaptureCollector(SourceCollector):
    name = "innodb"
    help = "recorded capture"

    def __init__(self, status: dict[str, str]) -> None:
        self.status = status

    def collect_families(self):
        return families_from_status(self.status, "sandbox:recorded")


def exposition_samples(status: dict[str, str]) -> dict[str, float]:
    registry = CollectorRegistry(auto_describe=False)  # fresh registry per test
    registry.register(Scrape([CaptureCollector(status)]))
    text = generate_latest(registry).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("innotier_collector_"):
                continue
            assert s.labels == {"server": "sandbox:recorded"}
            out[s.name] = s.value
    return out


def test_capture_gives_exact_values():
    status = read_capture(CAPTURE)
    samples = exposition_samples(status)
    expected = {
        "innotier_innodb_pages_written_total": float(status["Innodb_pages_written"]),
        "innotier_innodb_doublewrite_pages_written_total": float(status["Innodb_dblwr_pages_written"]),
        "innotier_innodb_doublewrite_writes_total": float(status["Innodb_dblwr_writes"]),
        "innotier_innodb_data_fsyncs_total": float(status["Innodb_data_fsyncs"]),
        "innotier_innodb_log_written_bytes_total": float(status["Innodb_os_log_written"]),
        "innotier_innodb_log_writes_total": float(status["Innodb_log_writes"]),
        "innotier_innodb_buffer_pool_reads_total": float(status["Innodb_buffer_pool_reads"]),
        "innotier_innodb_buffer_pool_read_requests_total": float(status["Innodb_buffer_pool_read_requests"]),
        "innotier_server_uptime_seconds": float(status["Uptime"]),
    }
    for name, value in expected.items():
        assert samples[name] == value, name
    # the literal numbers of the recording, so a changed capture or mapping cannot pass silently
    assert samples["innotier_innodb_pages_written_total"] == 409.0
    assert samples["innotier_innodb_doublewrite_pages_written_total"] == 270.0
    assert samples["innotier_innodb_doublewrite_writes_total"] == 4.0
    assert samples["innotier_innodb_buffer_pool_reads_total"] == 165.0


def test_every_mapped_variable_present_in_capture_is_exported_once():
    status = read_capture(CAPTURE)
    samples = exposition_samples(status)
    for m in STATUS_METRICS:
        name = f"innotier_{m.name}" + ("_total" if m.kind == "counter" else "")
        if m.variable in status:
            assert samples[name] == float(status[m.variable])
        else:
            assert name not in samples


def test_mariadb_10_11_has_no_log_fsync_counter():
    """Recorded fact the dashboards depend on: they fall back to log writes."""
    status = read_capture(CAPTURE)
    assert "Innodb_os_log_fsyncs" not in status
    samples = exposition_samples(status)
    assert "innotier_innodb_log_fsyncs_total" not in samples
    assert "innotier_innodb_log_writes_total" in samples


def test_non_numeric_and_missing_values_are_skipped():
    samples = exposition_samples({"Innodb_pages_written": "12", "Innodb_data_fsyncs": "ON", "Other": "1"})
    assert samples == {"innotier_innodb_pages_written_total": 12.0}


def test_status_sql_names_only_constants():
    assert STATUS_SQL.startswith("SHOW GLOBAL STATUS WHERE Variable_name IN (")
    for m in STATUS_METRICS:
        assert f"'{m.variable}'" in STATUS_SQL


def test_live_collector_reads_real_server(shared_sandbox):
    from exporters.collectors.connection import ServerConnection
    from exporters.collectors.innodb import InnodbStatusCollector

    collector = InnodbStatusCollector(ServerConnection(shared_sandbox.connection_spec()))
    try:
        fams = {f.name: f for f in collector.collect_families()}
    finally:
        collector.close()
    assert fams["innotier_innodb_buffer_pool_read_requests"].samples[0].value > 0
    assert fams["innotier_server_uptime_seconds"].samples[0].labels == {"server": "sandbox:shared"}
