"""The fair comparison (tuner/tpcc/compare.py): its protocol as a plan, and one small real run end to end."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tuner.core.errors import UsageError
from tuner.tpcc import compare


def test_rounds_rotate_so_no_driver_always_goes_first_or_follows_the_same_one():
    entries = compare.CompareSpec(peers={"go-tpc": "/x/go-tpc"}).entries()
    orders = [[e.key for e in compare.round_order(entries, r)] for r in range(3)]
    assert len({o[0] for o in orders}) == 3
    followers = {tuple(o[i:i + 2]) for o in orders for i in range(len(o) - 1)}
    assert len(followers) > len(entries) - 1  # the same pairs do not repeat every round


def test_plan_states_the_protocol_and_the_missing_peers(tmp_path):
    go_tpc = tmp_path / "go-tpc"  # the plan checks that a peer's path is the tool: an executable of its name
    go_tpc.write_text("#!/bin/sh\n")
    go_tpc.chmod(0o755)
    spec = compare.CompareSpec(clients=[8, 32], rounds=3, warmup=10, duration=30, peers={"go-tpc": str(go_tpc)})
    text = "\n".join(compare.plan(spec))
    assert "ANALYZE TABLE" in text and "priming run" in text and "fresh sandbox cmp-go-tpc" in text
    assert "Unix socket (a labelled row)" in text
    assert text.count("round ") == 3
    for peer in ("hammerdb", "tpcc-mysql", "sysbench-tpcc"):
        assert f"{peer}: not measured" in text
    assert compare.window(10, 30) == (18.0, 37.0)


@pytest.mark.parametrize("kw, message", [
    ({"rounds": 0}, "--rounds 0"), ({"clients": [0]}, "positive client counts"),
    ({"duration": 5}, "too short"), ({"peers": {"benchbase": "/x"}}, "unknown peer"),
])
def test_bad_specs_are_refused(kw, message):
    with pytest.raises(UsageError, match=message):
        compare.CompareSpec(**kw).validate()


def test_a_peer_path_that_is_not_the_tool_is_refused_before_any_server_is_made(tmp_path):
    from tuner.core.errors import ToolMissing

    with pytest.raises(ToolMissing, match="is not go-tpc nor a directory holding it"):
        compare.CompareSpec(peers={"go-tpc": str(tmp_path / "nope")}).validate()


def test_client_counts_that_are_not_numbers_are_a_usage_error():
    from tuner.tpcc.tpcc_compare_cli import parse_clients

    assert parse_clients("8, 32,") == [8, 32]
    with pytest.raises(UsageError, match="--clients 'abc' is not valid"):
        parse_clients("abc")


def test_render_says_why_a_check_failed():
    detail = "failed: 3.3.2.10 C_BALANCE ... (58062) (known: HammerDB's PAYMENT adds H_AMOUNT to C_BALANCE)"
    result = compare.CompareResult(spec={}, plan=[], server_options={}, prepared={}, runs=[], missing_peers=[],
                                   checks={"hammerdb": {"ok": False, "detail": detail, "by": "x's check"},
                                           "innotier-procedures": {"ok": True, "detail": ""}},
                                   loadavg_start="1 1 1")
    text = compare.render(result)
    assert "hammerdb FAILED, innotier-procedures ok" in text
    assert f"  hammerdb (x's check): {detail}" in text


def test_proc_readers_see_this_process():
    assert compare.proc_cpu_seconds(os.getpid()) > 0
    assert compare.proc_cpu_seconds(2 ** 22 + 12345) == 0.0  # gone: 0, not an error
    assert compare.tree_rss_bytes([os.getpid()]) > 0


def test_window_counter_reads_each_drivers_own_district_table():
    def entry(driver):
        return compare.Entry(driver, driver, "statements")
    assert compare.district_table_of(entry("builtin")) == "district"
    assert compare.district_table_of(entry("sysbench-tpcc")) == "district1"  # its table set is suffixed
    assert compare.district_table_of(entry("go-tpc")) == "district"


def test_client_cpu_keeps_the_cpu_of_a_process_that_ended():
    """A peer's warm-up process ends inside the bench's span: its CPU must not vanish from the client's sum
    (it did: HammerDB's client CPU per 1000 New-Orders came out negative)."""
    me = os.getpid()
    before = compare.client_cpu_seconds(me, set())
    subprocess.run([sys.executable, "-c", "sum(range(3 * 10 ** 7))"], check=True)  # a child that works, then ends
    assert compare.client_cpu_seconds(me, set()) > before


def test_a_peers_window_is_counted_from_the_measured_phase_it_announces(shared_sandbox, district_db):
    """Work before the peer's announcement (its warm-up, its pause between two processes) is outside the window:
    the counter takes no sample until anchor(), then counts its offsets from there; a second anchor is ignored."""
    counter = compare.WindowCounter(district_db.spec, district_db.database, shared_sandbox.running_pid(), (0.0, 0.0))
    counter.start(anchored=False)
    district_db.new_orders(30)  # the warm-up run
    assert counter.samples == []
    counter.anchor((0.0, 0.0))
    counter.anchor((600.0, 1200.0))
    r = counter.stop()
    assert [s.orders for s in counter.samples] == [3001 + 3031, 3001 + 3031]
    assert r is not None and r["nopm"] == 0 and counter.offsets == (0.0, 0.0)


def test_a_peer_that_never_announces_gets_no_window(shared_sandbox, district_db):
    counter = compare.WindowCounter(district_db.spec, district_db.database, shared_sandbox.running_pid(), (0.0, 0.0))
    counter.start(anchored=False)
    district_db.new_orders(3)
    assert counter.stop() is None and counter.samples == []


@pytest.mark.slow
def test_a_small_comparison_counts_from_the_server_and_checks_every_schema(innotier_home):
    """Two of our rows on their own fresh W=1 sandboxes, one round: counted, checked, rendered."""
    spec = compare.CompareSpec(clients=[2], rounds=1, warmup=1, duration=10, priming=1, priming_clients=1,
                               socket_row=False, warehouses=1, prefix="cmpt")
    lines: list[str] = []
    result = compare.run(spec, say=lines.append)
    assert set(result.prepared) == {"innotier-procedures", "innotier-statements"}
    assert all(p["load_seconds"] > 0 for p in result.prepared.values())
    assert [r.entry for r in result.runs] == ["innotier-procedures", "innotier-statements"]
    for r in result.runs:
        assert r.complete, r.note
        assert r.bench["nopm"] > 0 and r.bench["tpm"] > r.bench["nopm"]
        assert r.bench["client_cpu_per_kno"] > 0 and r.bench["server_cpu_per_kno"] > 0
        assert r.driver["deck"].startswith("23 cards") and "--host 127.0.0.1" in r.driver["command"]
    assert all(c["ok"] for c in result.checks.values()), result.checks
    text = compare.render(result)
    assert "innotier-statements" in text and "consistency after the runs" in text and "load average" in text
    for peer in compare.PEERS:
        assert f"{peer}: not measured" in text


def test_flush_between_runs_empties_the_pool_and_restores_every_setting(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    conn = spec.with_database(None).connect()
    cur = conn.cursor()

    def settings():
        cur.execute("SELECT @@innodb_max_dirty_pages_pct, @@innodb_io_capacity, @@innodb_io_capacity_max")
        return cur.fetchone()

    before = settings()
    try:
        cur.execute("CREATE DATABASE IF NOT EXISTS flushtest")
        cur.execute("CREATE TABLE flushtest.t (id INT PRIMARY KEY AUTO_INCREMENT, pad CHAR(200)) ENGINE=InnoDB")
        cur.execute("INSERT INTO flushtest.t (pad) SELECT REPEAT('x', 200) FROM flushtest.seq_1_to_20000")
        conn.commit()
        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
        assert int(cur.fetchone()[1]) > 10  # there is something to flush
        compare.flush_dirty_pages(spec, limit=10, timeout=120)
        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
        assert int(cur.fetchone()[1]) <= 10
        assert settings() == before
    finally:
        cur.execute("DROP DATABASE IF EXISTS flushtest")
        conn.close()
