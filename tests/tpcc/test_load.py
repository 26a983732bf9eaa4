"""The TPC-C loader against a real MariaDB sandbox: counts, population rules, refusals, bad input.

The module loads its own W=1 database (``tpcc_loadtest``) so that the initial-state
assertions do not depend on what other tests' runs did to the shared ``tpcc``.
"""

from __future__ import annotations

import json
import re
import socket

import pytest

from tuner.core.errors import ServerError, UsageError, WorkloadError
from tuner.core.server import ConnectionSpec
from tuner.tpcc import rand, schema
from tuner.tpcc.check import CHECKS, IMPLIED_AT_LOAD, run_checks
from tuner.tpcc.loader import load

DB = "tpcc_loadtest"


def q(spec, sql, params=()):
    conn = spec.connect()
    try:
        cur = conn.cursor()
        cur.execute(sql, params)
        return cur.fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def loaded(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    result = load(spec, warehouses=1, database=DB, jobs=2, drop=True, progress=False)
    yield spec.with_database(DB), result
    q(spec, f"DROP DATABASE IF EXISTS {DB}")


def test_every_table_has_its_row_count(loaded):
    spec, result = loaded
    assert result.verified and result.warehouses == 1
    expected = schema.expected_rows(1)
    assert expected == {"warehouse": 1, "district": 10, "customer": 30000, "history": 30000, "new_order": 9000,
                        "orders": 30000, "item": 100000, "stock": 100000}
    for table, n in expected.items():
        assert q(spec, f"SELECT COUNT(*) FROM {table}")[0][0] == n == result.row_counts[table], table
    lines = q(spec, "SELECT SUM(o_ol_cnt), MIN(o_ol_cnt), MAX(o_ol_cnt) FROM orders")[0]
    assert q(spec, "SELECT COUNT(*) FROM order_line")[0][0] == lines[0] == result.row_counts["order_line"]
    assert (lines[1], lines[2]) == (5, 15)
    assert 30000 * 9 < lines[0] < 30000 * 11  # mean 10 lines an order


def test_initial_state_follows_the_population_rules(loaded):
    spec, result = loaded
    # the loader ran every check, initial-state ones included, and they all passed
    assert result.checks.ok
    assert {r.clause for r in result.checks.results} == {c.clause for c in CHECKS} - set(IMPLIED_AT_LOAD)
    # ... and the conditions it skipped as implied hold too
    assert run_checks(spec, database=DB, clauses=list(IMPLIED_AT_LOAD)).ok
    # independent spot checks with our own SQL
    assert q(spec, "SELECT COUNT(*), MIN(no_o_id), MAX(no_o_id) FROM new_order WHERE no_d_id = 3")[0] == (900, 2101, 3000)
    assert q(spec, "SELECT COUNT(*) FROM orders WHERE o_carrier_id IS NULL")[0][0] == 9000
    assert q(spec, "SELECT COUNT(*) FROM orders WHERE o_id < 2101 AND o_carrier_id BETWEEN 1 AND 10")[0][0] == 21000
    assert q(spec, "SELECT COUNT(*) FROM order_line WHERE ol_o_id >= 2101 AND ol_delivery_d IS NOT NULL")[0][0] == 0
    assert q(spec, "SELECT SUM(w_ytd) FROM warehouse")[0][0] == 300000
    assert q(spec, "SELECT MIN(d_next_o_id), MAX(d_next_o_id) FROM district")[0] == (3001, 3001)
    for table, col in (("item", "i_data"), ("stock", "s_data")):
        frac = float(q(spec, f"SELECT AVG({col} LIKE '%ORIGINAL%') FROM {table}")[0][0])
        assert 0.09 < frac < 0.11, (table, frac)
        lo, hi = q(spec, f"SELECT MIN(LENGTH({col})), MAX(LENGTH({col})) FROM {table}")[0]
        assert (lo, hi) == (26, 50)
    # O_C_ID is a permutation in every district
    assert q(spec, "SELECT MIN(c), MAX(c) FROM (SELECT COUNT(DISTINCT o_c_id) c FROM orders GROUP BY o_d_id) t")[0] == (3000, 3000)


def test_customers_are_inserted_in_key_order_so_their_pages_are_full(loaded):
    """Loader version 3: CUSTOMER rows go in in primary-key order.  Inserted in the BC pick's window order
    (version 2) the clustered index split its pages at random: about 860 bytes of leaf page a row instead of
    about 650 at W=1."""
    spec, _ = loaded
    q(spec, "ANALYZE TABLE customer")
    leaves = q(spec, "SELECT stat_value FROM mysql.innodb_index_stats WHERE database_name = %s AND "
                     "table_name = 'customer' AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'", (DB,))[0][0]
    page = q(spec, "SELECT @@innodb_page_size")[0][0]
    assert leaves * page / 30000 < 750


def test_last_names_match_the_python_helpers(loaded):
    spec, _ = loaded
    first = q(spec, "SELECT c_id, c_last FROM customer WHERE c_w_id = 1 AND c_d_id = 2 AND c_id <= 1000 ORDER BY c_id")
    assert [name.decode() if isinstance(name, bytes) else name for _, name in first] == \
        [rand.last_name(c_id - 1) for c_id, _ in first]
    names = {rand.last_name(i) for i in range(1000)}
    rest = q(spec, "SELECT DISTINCT c_last FROM customer WHERE c_id > 1000")
    assert rest and {r[0].decode() if isinstance(r[0], bytes) else r[0] for r in rest} <= names
    # NURand(255, 0, 999): the OR with a number <= 255 skews the draws: not uniform
    top = q(spec, "SELECT COUNT(*) c FROM customer WHERE c_id > 1000 GROUP BY c_last ORDER BY c DESC LIMIT 1")[0][0]
    assert top > 3 * 27000 / 1000


def test_meta_records_the_load_and_a_valid_run_constant(loaded):
    spec, result = loaded
    conn = spec.connect()
    try:
        meta = schema.read_meta(conn, DB)
        assert meta["state"] == "loaded" and meta["warehouses"] == "1"
        assert int(meta["c_load_c_last"]) == result.c_load["c_last"]
        assert schema.warehouse_count(conn, DB) == 1
        run = schema.run_constants(conn, DB, seed=7)
        assert rand.valid_c_run(result.c_load["c_last"], run.c_last)
    finally:
        conn.close()


def test_an_existing_schema_is_refused_without_drop_and_left_alone(loaded):
    spec, _ = loaded
    before = q(spec, "SELECT value FROM tpcc_meta WHERE name = 'loaded_at'")
    with pytest.raises(WorkloadError, match="--drop"):
        load(spec.with_database(None), warehouses=1, database=DB, progress=False)
    assert q(spec, "SELECT value FROM tpcc_meta WHERE name = 'loaded_at'") == before
    assert q(spec, "SELECT COUNT(*) FROM stock")[0][0] == 100000


def test_cli_refuses_reload_and_reports_bad_input(loaded, shared_sandbox, cli):
    p = cli("tpcc", "load", "--warehouses", "1", "--sandbox", shared_sandbox.name, "--database", DB)
    assert p.returncode == WorkloadError.exit_code and "--drop" in p.stderr
    p = cli("tpcc", "load", "--warehouses", "0", "--sandbox", shared_sandbox.name, "--database", "tpcc_never")
    assert p.returncode == UsageError.exit_code and "--warehouses 0 is not valid" in p.stderr
    p = cli("tpcc", "load", "--warehouses", "1", "--jobs", "-2", "--sandbox", shared_sandbox.name,
            "--database", "tpcc_never")
    assert p.returncode == UsageError.exit_code and "--jobs -2" in p.stderr
    p = cli("tpcc", "load", "--warehouses", "3", "--dry-run", "--sandbox", shared_sandbox.name,
            "--database", "tpcc_never")
    assert p.returncode == 0 and "stock: ~300000 rows" in p.stdout
    assert not q(shared_sandbox.connection_spec(), "SHOW DATABASES LIKE 'tpcc_never'")


@pytest.mark.parametrize("warehouses,jobs", [(0, None), (-3, None), (1, 0), (1, -1), ("4", None), (True, None)])
def test_bad_arguments_change_nothing(shared_sandbox, warehouses, jobs):
    with pytest.raises(UsageError):
        load(shared_sandbox.connection_spec(), warehouses=warehouses, database="tpcc_bad", jobs=jobs,
             progress=False)
    assert not q(shared_sandbox.connection_spec(), "SHOW DATABASES LIKE 'tpcc_bad'")


def test_unreachable_server_is_a_clear_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerError, match=f"cannot connect to 127.0.0.1:{port}"):
        load(ConnectionSpec(host="127.0.0.1", port=port), warehouses=1, progress=False)


def test_drop_schema_removes_only_tpcc_tables(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    q(spec, "DROP DATABASE IF EXISTS tpcc_droptest")
    q(spec, "CREATE DATABASE tpcc_droptest")
    conn = spec.connect()
    try:
        cur = conn.cursor()
        cur.execute("USE tpcc_droptest")
        cur.execute(schema.CREATE_WAREHOUSE)
        cur.execute(schema.CREATE_META)
        cur.execute("CREATE TABLE keep_me (x INT)")
        assert schema.schema_present(conn, "tpcc_droptest")
        assert schema.warehouse_count(conn, "tpcc_droptest") == 0  # tpcc_meta without state=loaded
        assert sorted(schema.drop_schema(conn, "tpcc_droptest")) == ["tpcc_meta", "warehouse"]
        assert not schema.schema_present(conn, "tpcc_droptest")
        cur.execute("SHOW TABLES FROM tpcc_droptest")
        assert [r[0] for r in cur.fetchall()] == ["keep_me"]
    finally:
        conn.close()
        q(spec, "DROP DATABASE IF EXISTS tpcc_droptest")


def test_result_is_json_serialisable(loaded):
    _, result = loaded
    d = json.loads(json.dumps(result.to_dict()))
    assert d["verified"] is True and d["row_counts"]["stock"] == 100000
    assert {r["clause"] for r in d["checks"]["results"]} >= {"3.3.2.1", "3.3.2.4", "4.3.2.3"}


def test_tpcc_load_progress_never_passes_100_percent_and_bars_come_first(shared_sandbox, cli):
    """Piped, as in a CI log: every bar at done/total with done <= total, then the "loaded in" line."""
    db = "nc_progress"
    try:
        r = cli("tpcc", "load", "--sandbox", shared_sandbox.name, "-w", "1", "--database", db, check=True)
        lines = r.stdout.splitlines()
        bars = [(i, m) for i, ln in enumerate(lines) if (m := re.search(r"(\d+)/(\d+)\s+\d+:\d\d:\d\d", ln))]
        assert len(bars) == 9, r.stdout  # one per TPC-C table
        for _, m in bars:
            assert int(m.group(1)) == int(m.group(2)), m.group(0)  # finished tables: exactly 100%
        loaded = next(i for i, ln in enumerate(lines) if ln.startswith("loaded in "))
        assert loaded > max(i for i, _ in bars), r.stdout
    finally:
        conn = shared_sandbox.connection_spec().connect()
        conn.cursor().execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()
