"""The placement commands against real things: the shared MariaDB sandbox under the built-in TPC-C, fio on a
real tmpfs, and a sandbox whose performance_schema is off."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import mvhelpers
from sqlhelpers import stored_rows

from tuner.core import sandbox as sbx
from tuner.core.errors import ServerError, UsageError
from tuner.placement import measure, tiercost
from tuner.placement.model import IoProfile

MIB = 1 << 20


@pytest.fixture(scope="module")
def results(innotier_home):
    return os.path.join(innotier_home, "placeadv-results.db")


@pytest.fixture(scope="module")
def fast_tier(innotier_home):
    """A real 64 MiB tmpfs, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root; CI runs the suite as root")
    path = mvhelpers.mount_tmpfs(os.path.join(innotier_home, "placeadv-tier"), "64M")
    try:
        yield path
    finally:
        subprocess.run(["umount", path], check=False)


def _one_line(r, code: int, *words: str) -> None:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("innotier: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_tier_is_priced_by_fio_and_bad_mounts_are_refused(cli, fast_tier, results, innotier_home):
    r = cli("placement", "tier", "--mount", fast_tier, "--size", "8M", "--runtime", "1", "--json",
            "--results", results)
    assert r.returncode == 0, r.stderr
    cost = json.loads(r.stdout)
    assert cost["kind"] == "tmpfs" and cost["volatile"] and cost["page_size"] == 16384
    assert cost["mountpoint"] == os.path.realpath(fast_tier)
    for k in ("randread_s", "write_s", "fsync_s", "seqread_bps", "seqwrite_bps"):
        assert cost[k] > 0, k
    assert 0 < cost["free_bytes"] <= 64 * MIB
    assert stored_rows(results, "tier_costs") == 1
    # bad input: not a mount point; more than the tier holds; each one line, nothing stored
    _one_line(cli("placement", "tier", "--mount", str(innotier_home), "--results", results), 2, "not a mount point")
    with pytest.raises(UsageError, match="does not fit: .* free") as err:
        tiercost.characterize(fast_tier, size_bytes=128 * MIB, runtime_s=1)
    assert "\n" not in str(err.value)
    assert stored_rows(results, "tier_costs") == 1 and os.listdir(fast_tier) == []


def test_a_tpcc_window_is_measured_stored_advised_and_shown(cli, tpcc_w1, shared_sandbox, fast_tier, results,
                                                             tmp_path):
    r = cli("placement", "measure", "--sandbox", "shared", "--during-tpcc", "--clients", "2", "--warmup", "1",
            "--duration", "4", "--interval", "1", "--results", results, "--json")
    assert r.returncode == 0, r.stderr
    p = IoProfile.from_dict(json.loads(r.stdout))
    assert stored_rows(results, "io_profiles") == 1
    assert len(p.intervals) >= 3
    by_key = {c.key: c for c in p.candidates}
    for table in ("tpcc.new_order", "tpcc.order_line", "tpcc.stock"):
        c = by_key[table]
        assert c.kind == "table" and c.files == (os.path.join(shared_sandbox.datadir, "tpcc",
                                                              table.split(".")[1] + ".ibd"),)
        assert c.size_bytes == os.stat(c.files[0]).st_size
    # MariaDB's redo is not in performance_schema: counted from status, without wait times
    redo = by_key["redo"]
    assert redo.files == (os.path.join(shared_sandbox.datadir, "ib_logfile0"),)
    totals = p.file_totals()
    assert not totals[redo.files[0]].timed and totals[redo.files[0]].writes > 0
    assert any("not in performance_schema" in n for n in p.notes)
    # the rows inserted into new_order during the window are the New-Orders the driver counted in it: the
    # window holds deltas, not the counters since start (which include the load's 9,000 rows)
    counted = p.workload["result"]["counts"]["new_order"]
    done = counted["commit"] + counted["rollback"]
    assert done > 20
    assert 0.8 * done <= p.tables["tpcc.new_order"].insert <= 1.2 * done + 5
    assert p.tables["tpcc.order_line"].insert > 5 * p.tables["tpcc.new_order"].insert

    if stored_rows(results, "tier_costs") == 0:   # this test run alone
        assert cli("placement", "tier", "--mount", fast_tier, "--size", "8M", "--runtime", "1",
                   "--results", results).returncode == 0
    png = tmp_path / "curve.png"
    r = cli("placement", "advise", "--budget", "32M", "--tier", fast_tier, "--results", results, "--json",
            "--png", str(png))
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["profile_id"] == p.profile_id
    assert a["pick"]["size_bytes"] <= 32 * MIB and "redo" not in a["pick"]["keys"]
    assert any("not priced: redo" in n for n in a["notes"])       # counted, and no --here tier to price it on
    gains = [g for _, g in a["curve"]]
    assert gains == sorted(gains) and a["pick"]["saving"] <= gains[-1] + 1e-12
    assert {p["name"] for p in a["naive"]} == {"largest tables", "everything"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pic = tmp_path / "io.png"
    r = cli("placement", "show", p.profile_id, "--png", str(pic), "--results", results)
    assert r.returncode == 0 and "where the I/O time goes" in r.stdout and pic.read_bytes()[:4] == b"\x89PNG"


def test_the_servers_own_traffic_is_observed_in_a_window(shared_sandbox):
    """--seconds mode: the traffic here is a table written and flushed to its file inside the window."""
    spec = shared_sandbox.connection_spec()
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("DROP DATABASE IF EXISTS placeadv_obs")
    cur.execute("CREATE DATABASE placeadv_obs")
    cur.execute("USE placeadv_obs")   # for the Sequence engine's seq_1_to_N
    cur.execute("CREATE TABLE placeadv_obs.t (id INT PRIMARY KEY, v VARCHAR(500)) ENGINE=InnoDB")

    def traffic(seconds: float) -> None:
        """Stands in for the window's pause: the traffic happens instead of the wait (no sleep here)."""
        cur.execute("INSERT INTO placeadv_obs.t SELECT seq, REPEAT('x', 500) FROM seq_1_to_2000 "
                    "ON DUPLICATE KEY UPDATE v = REPEAT('y', 500)")
        cur.execute("FLUSH TABLES placeadv_obs.t FOR EXPORT")   # its dirty pages written to t.ibd, now
        cur.execute("UNLOCK TABLES")

    try:
        p = measure.measure(spec, seconds=2, interval=1, sleep=traffic)
    finally:
        cur.execute("DROP DATABASE placeadv_obs")
        conn.close()
    assert p.workload["kind"] == "observed" and len(p.intervals) == 2
    t = p.candidate("placeadv_obs.t")
    io = p.file_totals()[t.files[0]]
    assert io.timed and io.writes > 0 and io.write_bytes >= 16384 and io.wait_s > 0
    # two intervals, two passes: 2000 rows inserted, then 2000 insert attempts that became updates (the
    # handler counts each write_row call, the duplicate ones too)
    assert p.tables["placeadv_obs.t"].insert == 4000 and p.tables["placeadv_obs.t"].update == 2000


def test_a_server_without_performance_schema_gets_one_line_and_nothing_is_stored(cli, results):
    sb = sbx.create("placeadv-nops", page_size="16k",
                    options={"performance_schema": "OFF", "innodb_buffer_pool_size": "32M"})
    try:
        sb.start()
        before = stored_rows(results, "io_profiles")
        r = cli("placement", "measure", "--sandbox", sb.name, "--seconds", "1", "--interval", "1",
                "--results", results)
        _one_line(r, 3, "performance_schema is OFF", "restart it")
        assert stored_rows(results, "io_profiles") == before
        # the same server reached as a live one (no sandbox name): the fix names its option file and the restart
        conn = sb.connection_spec().connect()
        try:
            with pytest.raises(ServerError, match="in the server's option file and restart the server$") as err:
                measure.check_source(conn, "socket " + sb.socket)
        finally:
            conn.close()
        assert "\n" not in str(err.value)
    finally:
        sb.destroy(force=True)
