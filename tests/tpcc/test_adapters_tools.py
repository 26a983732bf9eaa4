"""Peer adapters without the peers: the registry, ToolMissing, the temporary account, the server counters.

The peers are not installed in CI, so nothing here needs them, except the last
test, which runs each peer for real when its path is given (INNOTIER_PEER_<NAME>
or PATH) and is skipped, saying so, when the tool is absent.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tuner.core.errors import ToolMissing, UsageError, WorkloadError
from tuner.tpcc import adapters
from tuner.tpcc.adapters import _common as common
from tuner.tpcc.adapters import hammerdb, sysbench_tpcc, tpcc_mysql
from tuner.tpcc.config import RunConfig

NAMES = ("hammerdb", "tpcc-mysql", "sysbench-tpcc", "go-tpc")
HOW = {"hammerdb": "TPC-Council/HammerDB", "tpcc-mysql": "Percona-Lab/tpcc-mysql",
       "sysbench-tpcc": "Percona-Lab/sysbench-tpcc", "go-tpc": "pingcap/go-tpc"}


@pytest.fixture
def empty_path(tmp_path, monkeypatch):
    """A PATH with nothing on it, and no sysbench share directories: no peer can be found."""
    d = tmp_path / "empty-bin"
    d.mkdir()
    monkeypatch.setenv("PATH", str(d))
    monkeypatch.setattr(sysbench_tpcc, "SHARE_DIRS", ())
    return d


RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "recorded" / "peer-output"


def _executable(path, text="#!/bin/sh\nexit 0\n"):
    path.write_text(text)
    path.chmod(0o755)
    return path


def _databases(spec) -> set[str]:
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SHOW DATABASES")
    names = {r[0] for r in cur.fetchall()}
    conn.close()
    return names


def _accounts(spec) -> list[tuple[str, str]]:
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT user, host FROM mysql.user WHERE user LIKE 'innotier\\_peer\\_%'")
    rows = cur.fetchall()
    conn.close()
    return rows


# ---------------------------------------------------------------------------
# Registry


def test_registry_lists_every_adapter_with_the_contract():
    assert adapters.names() == NAMES
    for name in NAMES:
        a = adapters.get(name)
        assert a.name == name
        for attr in ("find_tool", "load", "run", "parse_output"):
            assert callable(getattr(a, attr)), (name, attr)


def test_unknown_driver_names_the_valid_ones():
    with pytest.raises(UsageError) as e:
        adapters.get("benchbase")
    msg = str(e.value)
    assert "benchbase" in msg
    for name in NAMES:
        assert name in msg


# ---------------------------------------------------------------------------
# Without the tool


@pytest.mark.parametrize("name", NAMES)
def test_missing_tool_says_which_and_how_to_get_it(name, empty_path):
    with pytest.raises(ToolMissing) as e:
        adapters.get(name).find_tool(None)
    msg = str(e.value)
    assert name.split("-")[0].lower() in msg.lower()
    assert HOW[name] in msg
    assert "--tool-path" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("name", NAMES)
def test_bad_tool_path_is_named(name, tmp_path, empty_path):
    bogus = tmp_path / "no-such-tool"
    with pytest.raises(ToolMissing) as e:
        adapters.get(name).find_tool(str(bogus))
    assert f"--tool-path {bogus}" in str(e.value)


@pytest.mark.parametrize("name", NAMES)
def test_load_and_run_without_the_tool_change_nothing(name, empty_path, shared_sandbox):
    spec = shared_sandbox.connection_spec()
    db = f"adapt_missing_{name.replace('-', '_')}"
    a = adapters.get(name)
    with pytest.raises(ToolMissing):
        a.load(spec, 1, database=db)
    with pytest.raises(ToolMissing):
        a.run(spec, RunConfig(clients=2, warmup=0, duration=6, database=db, driver=name))
    assert db not in _databases(spec)
    assert _accounts(spec) == []


def test_tpcc_mysql_needs_tpcc_load_and_the_schema_files(tmp_path, empty_path):
    start = _executable(tmp_path / "tpcc_start")
    with pytest.raises(ToolMissing, match="tpcc_load"):
        tpcc_mysql.find_tool(str(tmp_path))
    _executable(tmp_path / "tpcc_load")
    assert tpcc_mysql.find_tool(str(tmp_path)) == str(start)
    assert tpcc_mysql.find_tool(str(start)) == str(start)
    with pytest.raises(ToolMissing, match="create_table.sql"):
        tpcc_mysql.schema_files(str(start))


def test_hammerdb_needs_tclsh(tmp_path, empty_path):
    _executable(tmp_path / "hammerdbcli")
    with pytest.raises(ToolMissing, match="tclsh8.6.*apt-get install tcl8.6"):
        hammerdb.find_tool(str(tmp_path))


def test_sysbench_tpcc_needs_sysbench(tmp_path, empty_path):
    (tmp_path / "tpcc.lua").write_text("-- not run\n")
    with pytest.raises(ToolMissing, match="sysbench.*apt-get install sysbench"):
        sysbench_tpcc.find_tool(str(tmp_path))


# ---------------------------------------------------------------------------
# HammerDB script


def test_hammerdb_minutes_are_reachable_by_its_timed_driver():
    assert hammerdb.minutes_for(18) == "0.3"
    assert hammerdb.minutes_for(60) == "1"
    assert hammerdb.minutes_for(0) == "0"
    assert hammerdb.minutes_for(1, minimum_steps=1) == "0.1"
    assert hammerdb.minutes_for(246) != "4.1"  # 4.1 * 60000 = 245999.99999999997: the driver would never stop
    for seconds in range(0, 3600, 3):
        m = float(hammerdb.minutes_for(seconds))
        ms = m * 60000
        assert ms == int(ms) and int(ms) % 6000 == 0, seconds
        assert abs(m * 60 - seconds) <= 18


def test_hammerdb_tcl_words():
    assert hammerdb.tcl_word("tpcc_1") == "tpcc_1"
    assert hammerdb.tcl_word('a b$[x]"{}\\') == '"a b\\$\\[x\\]\\"\\{\\}\\\\"'
    with pytest.raises(UsageError):
        hammerdb.tcl_word("two\nlines")


def test_hammerdb_tcl_words_survive_tclsh():
    tclsh = common.shutil.which("tclsh8.6") or common.shutil.which("tclsh")
    if not tclsh:
        pytest.skip("tclsh is not installed; the quoting is checked without it above")
    value = 'p@ss w$rd[1]"{x}\\;'
    out = subprocess.run([tclsh], input=f"puts -nonewline {hammerdb.tcl_word(value)}\n", capture_output=True,
                         text=True, check=True).stdout
    assert out == value


def test_hammerdb_run_script_settings():
    from tuner.core.server import ConnectionSpec

    spec = ConnectionSpec(host="127.0.0.1", port=3307, user="bench", password="s3cr et$")
    cfg = RunConfig(clients=8, warmup=18, duration=60, database="tpcc_hdb")
    script = hammerdb.run_script(spec, cfg, hammerdb.minutes_for(cfg.warmup), hammerdb.minutes_for(60, 1))
    lines = script.splitlines()
    for expected in ("diset connection mysql_host 127.0.0.1", "diset connection mysql_port 3307",
                     "diset connection mysql_socket null", "diset tpcc mysql_user bench",
                     'diset tpcc mysql_pass "s3cr et\\$"', "diset tpcc mysql_dbase tpcc_hdb",
                     "diset tpcc mysql_driver timed", "diset tpcc mysql_rampup 0.3", "diset tpcc mysql_duration 1",
                     "diset tpcc mysql_timeprofile true", "vuset vu 8", "set runmsg [vurun]", "_waittocomplete"):
        assert expected in lines, expected


def test_hammerdb_script_file_is_private_and_removed():
    with hammerdb.private_tmp() as d:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        path = hammerdb.write_script(d, "diset tpcc mysql_pass x\n")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not os.path.exists(d)


# ---------------------------------------------------------------------------
# Running a tool


def test_run_tool_redacts_and_streams(tmp_path):
    seen = []
    out = common.run_tool(["sh", "-c", "echo 'option p with value hunter2'; echo done >&2", "hunter2"],
                          timeout=60, secrets_=("hunter2",), on_line=seen.append)
    assert out.returncode == 0 and not out.timed_out
    assert "hunter2" not in out.text and "hunter2" not in " ".join(out.argv)
    assert seen == ["option p with value ********", "done"]


def test_run_tool_kills_a_tool_past_its_limit():
    out = common.run_tool(["sh", "-c", "echo started; exec sleep 30"], timeout=0.5)
    assert out.timed_out and "started" in out.text
    with pytest.raises(WorkloadError, match="did not finish"):
        common.check_ran(out, "sleeper")


def test_failed_tool_reports_its_last_lines():
    out = common.run_tool(["sh", "-c", "echo connecting; echo 'Access denied for user' ; exit 3"], timeout=60)
    with pytest.raises(WorkloadError, match="exit code 3.*Access denied"):
        common.check_ran(out, "go-tpc prepare")


# ---------------------------------------------------------------------------
# Server side (real sandbox)


def test_bench_account_is_scoped_and_dropped(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    common.prepare_database(spec, "adapt_scope", drop=True, tool="test")
    with common.bench_account(spec, "adapt_scope") as acc:
        assert acc.user.startswith("innotier_peer_") and acc.host == "127.0.0.1"
        assert acc.endpoint.port == shared_sandbox.port
        assert acc.password != spec.password
        peer = common.tcp_spec(spec, acc.endpoint)
        peer.user, peer.password, peer.database = acc.user, acc.password, "adapt_scope"
        conn = peer.connect()
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (i INT PRIMARY KEY)")
        cur.execute("SHOW GRANTS")
        grants = " ".join(r[0] for r in cur.fetchall())
        assert "`adapt_scope`.*" in grants and "ON *.*" not in grants.replace("USAGE ON *.*", "")
        with pytest.raises(Exception):
            cur.execute("SELECT user FROM mysql.user")
        conn.close()
    assert _accounts(spec) == []


def test_bench_account_is_dropped_when_the_run_fails(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    with pytest.raises(RuntimeError):
        with common.bench_account(spec, "adapt_scope"):
            raise RuntimeError("tool crashed")
    assert _accounts(spec) == []


def test_prepare_database_refuses_a_loaded_database(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    common.prepare_database(spec, "adapt_loaded", drop=True, tool="test")
    conn = spec.with_database("adapt_loaded").connect()
    conn.cursor().execute("CREATE TABLE warehouse (w_id INT PRIMARY KEY)")
    conn.cursor().execute("INSERT INTO warehouse VALUES (1), (2)")
    conn.close()
    with pytest.raises(WorkloadError, match="already has 1 tables.*drop"):
        common.prepare_database(spec, "adapt_loaded", drop=False, tool="go-tpc")
    assert common.count_warehouses(spec, "adapt_loaded", "warehouse", "go-tpc") == 2  # untouched
    common.prepare_database(spec, "adapt_loaded", drop=True, tool="go-tpc")
    assert "adapt_loaded" in _databases(spec)
    with pytest.raises(WorkloadError, match="no go-tpc schema.*load it first"):
        common.count_warehouses(spec, "adapt_loaded", "warehouse", "go-tpc")


def test_bad_database_name_is_refused():
    with pytest.raises(UsageError, match="not valid"):
        common.check_database_name("tpcc`; DROP")


def test_clients_above_max_connections_are_refused(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    with pytest.raises(UsageError, match="max_connections"):
        common.check_clients(spec, 100000)
    common.check_clients(spec, 8)


def test_counter_window_uses_hammerdb_definitions(district_db):
    window = common.CounterWindow(district_db.spec, district_db.database, "district")
    try:
        window.start()
        district_db.new_orders(30)
        window.stop()
        r = window.result()
    finally:
        window.close()
    minutes = r["window_seconds"] / 60
    assert r["nopm"] * minutes == pytest.approx(30, rel=0.01)  # 30 new order ids in the window, per minute
    assert r["tpm"] * minutes >= 30 * 0.99  # Com_commit is server-wide: at least our 30 commits


# ---------------------------------------------------------------------------
# Optional: the real peers, when installed


def _peer_path(name: str) -> str | None:
    return os.environ.get(f"INNOTIER_PEER_{name.replace('-', '_').upper()}")


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_peer_loads_and_runs_for_real(name, shared_sandbox):
    a = adapters.get(name)
    tool = _peer_path(name)
    try:
        a.find_tool(tool)
    except ToolMissing as exc:
        pytest.skip(f"{name} is not installed here (set INNOTIER_PEER_{name.replace('-', '_').upper()}): {exc}")
    spec = shared_sandbox.connection_spec()
    db = f"peer_{name.replace('-', '_')}"
    seconds = a.load(spec, 1, database=db, tool_path=tool, drop=True)
    assert seconds > 0
    announced: list[float] = []
    r = a.run(spec, RunConfig(clients=2, warmup=6, duration=12, interval=6, database=db, driver=name,
                              tool_path=tool, warehouses=1), on_measuring=announced.append)
    assert r.driver == name and r.complete, r.failure
    assert announced == [12.0]  # once, when the measured phase starts, with the seconds the peer measures
    assert r.warehouses == 1
    assert (r.tpmc or 0) > 0 or (r.nopm or 0) > 0
    assert r.nopm is not None and r.nopm > 0  # every adapter reports HammerDB's NOPM (server side)
    own_check = getattr(a, "check", None)  # the peer's own consistency check, where the bench uses one
    if own_check is not None:
        ok, detail = own_check(spec, 1, db, tool)
        failed = set(re.findall(r"(?:^failed: |; )(\d+(?:\.\d+)+) ", detail))
        assert ok or (failed and failed <= set(getattr(a, "KNOWN_DEVIATIONS", {}))), detail  # only the peer's own
    assert _accounts(spec) == []


# ---------------------------------------------------------------------------
# tpcc-mysql's schema checked by innotier's conditions (it ships no check of its own)


@pytest.mark.slow
def test_tpcc_mysql_check_reads_new_orders_through_a_transient_view(w1_db):
    """A real W=1 schema renamed to tpcc-mysql's table name passes; a broken NEW-ORDER row fails; no view is left."""
    spec, db, cur = w1_db.spec, w1_db.database, w1_db.cur
    cur.execute("RENAME TABLE new_order TO new_orders")
    ok, detail = tpcc_mysql.check(spec, 1, db)
    assert ok, detail
    cur.execute("DELETE FROM new_orders WHERE no_w_id = 1 AND no_d_id = 1 ORDER BY no_o_id DESC LIMIT 1")
    w1_db.conn.commit()
    ok, detail = tpcc_mysql.check(spec, 1, db)
    assert not ok and detail.startswith("failed:"), detail
    cur.execute("SELECT COUNT(*) FROM information_schema.views WHERE table_schema = %s", (db,))
    assert cur.fetchone()[0] == 0


@pytest.mark.slow
def test_hammerdb_check_names_its_payment_deviation(w1_db):
    """A Payment applied as HammerDB 4.12's PAYMENT does (C_BALANCE + H_AMOUNT, C_YTD_PAYMENT untouched)
    breaks 3.3.2.10 and 3.3.2.12 only, and the check says they are HammerDB's known deviation."""
    spec, db, cur = w1_db.spec, w1_db.database, w1_db.cur
    ok, detail = hammerdb.check(spec, 1, db)
    assert ok, detail
    cur.execute("UPDATE customer SET c_balance = c_balance + 10 WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = 1")
    cur.execute("INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) "
                "VALUES (1, 1, 1, 1, 1, NOW(), 10, 'paid as HammerDB pays')")
    cur.execute("UPDATE warehouse SET w_ytd = w_ytd + 10 WHERE w_id = 1")
    cur.execute("UPDATE district SET d_ytd = d_ytd + 10 WHERE d_w_id = 1 AND d_id = 1")
    w1_db.conn.commit()
    ok, detail = hammerdb.check(spec, 1, db)
    failed = set(re.findall(r"(?:^failed: |; )(\d+(?:\.\d+)+) ", detail))
    assert not ok and failed == set(hammerdb.KNOWN_DEVIATIONS), detail
    assert "known: HammerDB's PAYMENT adds H_AMOUNT" in detail


def test_the_shared_run_skeleton_with_go_tpcs_recorded_output(shared_sandbox, tmp_path):
    """go-tpc is not on this machine: a stand-in prints go-tpc's recorded console output (peer-output/) and
    keeps its argv; everything else is real (schema, bench account, server counters, masking)."""
    from tuner.tpcc.adapters import go_tpc

    recorded = RECORDED / "go-tpc-run-c8.txt"
    calls = tmp_path / "argv"
    stand_in = _executable(tmp_path / "go-tpc",
                           f'#!/bin/sh\necho "$@" >> {calls}\ncat {recorded}\n')
    spec = shared_sandbox.connection_spec()
    db = "adapt_skeleton"
    common.prepare_database(spec, db, drop=True, tool="test")
    conn = spec.with_database(db).connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE warehouse (w_id INT PRIMARY KEY)")
    cur.execute("INSERT INTO warehouse VALUES (1)")
    cur.execute("CREATE TABLE district (d_w_id INT, d_id INT, d_next_o_id INT, PRIMARY KEY (d_w_id, d_id))")
    cur.execute("INSERT INTO district VALUES (1, 1, 3001)")
    conn.commit()
    conn.close()
    cfg = RunConfig(clients=2, warmup=1, duration=2, interval=1, database=db, driver="go-tpc", tool_path=str(stand_in),
                    mode="procedures")
    result = go_tpc.run(spec, cfg)
    expected = go_tpc.parse_output(recorded.read_text())
    assert result.tpmc == expected.tpmc and result.warehouses == 1 and result.clients == 2
    assert result.extra["warmup_tpmc"] == expected.tpmc  # the stand-in printed the same for the warm-up
    assert [c["phase"] for c in result.extra["commands"]] == ["warm-up", "measured"]
    argv = calls.read_text().splitlines()
    assert len(argv) == 2 and all("-p" in a.split() for a in argv)
    password = argv[1].split()[argv[1].split().index("-p") + 1]
    assert password not in " ".join(c["command"] for c in result.extra["commands"])  # masked in the record
    assert result.extra["tool"] == str(stand_in)
    assert result.extra["note"] == "go-tpc runs client-side prepared statements; --mode procedures does not apply"
    assert "server counters sampled from the measured process's start" in result.extra["nopm_tpm_source"]
    assert _accounts(spec) == []  # the bench account is gone
