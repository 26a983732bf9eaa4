"""Consistency checks: pass on a loaded schema, and name the clause and rows of planted inconsistencies."""

from __future__ import annotations

import json

import pytest


from tuner.core.errors import WorkloadError
from sqlhelpers import execute
from tuner.tpcc import schema
from tuner.tpcc.check import run_checks

COPY = "tpcc_corrupt"
PLANTED: dict[str, int] = {}  # the new_order row the fixture deleted


@pytest.fixture(scope="module")
def corrupt(tpcc_w1):
    """A copy of the loaded `tpcc` with one planted inconsistency per condition."""
    admin = tpcc_w1.with_database(None)
    execute(admin, f"DROP DATABASE IF EXISTS {COPY}", f"CREATE DATABASE {COPY} CHARACTER SET latin1")
    copy_tables = []
    for t in list(schema.TABLES) + [schema.META_TABLE]:
        copy_tables += [f"CREATE TABLE {COPY}.{t} LIKE tpcc.{t}", f"INSERT INTO {COPY}.{t} SELECT * FROM tpcc.{t}"]
    execute(admin, *copy_tables)
    spec = tpcc_w1.with_database(COPY)
    baseline = run_checks(spec, database=COPY)
    # an undelivered order between the oldest and newest of district 4 (other tests' runs may have
    # delivered or added orders in the shared schema, so it is looked up, not assumed)
    (victim,), = execute(spec, "SELECT MIN(no_o_id) + 1 FROM new_order WHERE no_w_id = 1 AND no_d_id = 4")
    PLANTED["no_o_id"] = victim
    execute(spec,
            "UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 1",                                  # 1, 8
            "UPDATE district SET d_next_o_id = d_next_o_id + 5 WHERE d_w_id = 1 AND d_id = 3",          # 2
            f"DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id = 4 AND no_o_id = {victim}",          # 3, 5
            "DELETE FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 5 AND ol_o_id = 17 AND ol_number = 1",  # 4, 6
            "UPDATE order_line SET ol_delivery_d = NULL "
            "WHERE ol_w_id = 1 AND ol_d_id = 6 AND ol_o_id = 18 AND ol_number = 1",                     # 7
            "UPDATE customer SET c_balance = c_balance + 1 WHERE c_w_id = 1 AND c_d_id = 7 AND c_id = 42",  # 10, 12
            "UPDATE history SET h_amount = h_amount + 10 "
            "WHERE h_c_w_id = 1 AND h_c_d_id = 8 AND h_c_id = 99",                                      # 8, 9, 10
            )
    yield spec, baseline
    execute(admin, f"DROP DATABASE IF EXISTS {COPY}")


def test_check_passes_right_after_load(tpcc_w1):
    report = run_checks(tpcc_w1, database="tpcc")
    assert report.ok, [r.to_dict() for r in report.failed()]
    assert [r.clause for r in report.results] == [f"3.3.2.{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12)]


def keys(result, *cols):
    return {tuple(row[c] for c in cols) for row in result.offending}


def test_planted_inconsistencies_are_reported_by_clause_with_rows(corrupt):
    spec, baseline = corrupt
    assert baseline.ok, [r.to_dict() for r in baseline.failed()]
    report = run_checks(spec, database=COPY, limit=10)
    failed = {r.clause for r in report.failed()}
    assert failed == {f"3.3.2.{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12)}
    assert not report.ok
    r = report.result
    assert keys(r("3.3.2.1"), "w_id") == {(1,)}
    assert keys(r("3.3.2.2"), "d_w_id", "d_id") == {(1, 3)}
    assert keys(r("3.3.2.3"), "no_w_id", "no_d_id") == {(1, 4)}
    assert keys(r("3.3.2.4"), "w_id", "d_id") == {(1, 5)}
    assert keys(r("3.3.2.5"), "o_w_id", "o_d_id", "o_id") == {(1, 4, PLANTED["no_o_id"])}
    assert keys(r("3.3.2.6"), "o_w_id", "o_d_id", "o_id") == {(1, 5, 17)}
    assert keys(r("3.3.2.7"), "ol_w_id", "ol_d_id", "ol_o_id", "ol_number") == {(1, 6, 18, 1)}
    assert keys(r("3.3.2.8"), "w_id") == {(1,)}
    assert keys(r("3.3.2.9"), "d_w_id", "d_id") == {(1, 8)}
    assert keys(r("3.3.2.10"), "c_w_id", "c_d_id", "c_id") == {(1, 7, 42), (1, 8, 99)}
    assert keys(r("3.3.2.12"), "c_w_id", "c_d_id", "c_id") == {(1, 7, 42)}
    assert r("3.3.2.10").offending_count == 2
    six = r("3.3.2.6").offending[0]
    assert six["order_lines"] == six["o_ol_cnt"] - 1


def test_cli_check_exit_status_and_json(corrupt, tpcc_w1, shared_sandbox, cli):
    p = cli("tpcc", "check", "--json", "--sandbox", shared_sandbox.name, "--database", COPY)
    assert p.returncode == WorkloadError.exit_code, p.stderr
    doc = json.loads(p.stdout)
    assert doc["ok"] is False
    by_clause = {r["clause"]: r for r in doc["results"]}
    assert by_clause["3.3.2.2"]["passed"] is False and by_clause["3.3.2.2"]["offending"][0]["d_id"] == 3
    assert by_clause["3.3.2.3"]["offending"][0]["no_d_id"] == 4
    p = cli("tpcc", "check", "--sandbox", shared_sandbox.name)  # default database tpcc
    assert p.returncode == 0 and "all checks passed" in p.stdout, p.stdout + p.stderr


def test_an_unfinished_load_counts_no_warehouses(corrupt):
    spec, _ = corrupt
    conn = spec.connect()
    try:
        assert schema.warehouse_count(conn, COPY) == 1
        cur = conn.cursor()
        cur.execute("USE " + COPY)
        schema.write_meta(conn, {"state": "loading"})
        assert schema.warehouse_count(conn, COPY) == 0
        schema.write_meta(conn, {"state": "loaded"})
    finally:
        conn.close()


def test_check_on_a_missing_schema_says_how_to_load(shared_sandbox):
    with pytest.raises(WorkloadError, match="tpcc load"):
        run_checks(shared_sandbox.connection_spec(), database="tpcc_nothing_here")


def test_the_movers_tpcc_check_applies_only_to_schemas_innotier_loaded(tpcc_w1):
    """An ERP with tables named like TPC-C's, and a copy of the nine tables without the loader's record, are not
    checked as TPC-C after a move; the schema the loader loaded (and recorded in tpcc_meta) is."""
    from datadir_mover.move.server_check import schema_checks
    from tuner.tpcc import move_check

    admin = tpcc_w1.with_database(None)
    execute(admin, "DROP DATABASE IF EXISTS erp", "CREATE DATABASE erp", "DROP DATABASE IF EXISTS tpcc_lookalike",
            "CREATE DATABASE tpcc_lookalike",
            "CREATE TABLE erp.warehouse (id INT PRIMARY KEY, city VARCHAR(40))",
            "CREATE TABLE erp.district (id INT PRIMARY KEY, warehouse_id INT)",
            "CREATE TABLE erp.order_line (id INT PRIMARY KEY, sku VARCHAR(20), qty INT)",
            "INSERT INTO erp.warehouse VALUES (1, 'Lyon')", "INSERT INTO erp.order_line VALUES (1, 'X-1', -3)",
            *[f"CREATE TABLE tpcc_lookalike.{t} LIKE tpcc.{t}" for t in list(schema.TABLES) + [schema.META_TABLE]])
    try:
        found = move_check.tpcc_schemas(admin)
        assert "tpcc" in found and "erp" not in found and "tpcc_lookalike" not in found, found
        move_check.register()
        results = schema_checks.run_schema_checks(admin)[move_check.NAME]
        assert results["tpcc"] == "ok" and "erp" not in results and "tpcc_lookalike" not in results, results
        # the loader's record makes it innotier's; an unfinished load does not count
        execute(admin.with_database("tpcc_lookalike"), "INSERT INTO tpcc_meta (name, value) VALUES ('loader', '1')",
                "INSERT INTO tpcc_meta (name, value) VALUES ('state', 'loading')")
        assert "tpcc_lookalike" not in move_check.tpcc_schemas(admin)
        execute(admin.with_database("tpcc_lookalike"), "UPDATE tpcc_meta SET value = 'loaded' WHERE name = 'state'")
        assert "tpcc_lookalike" in move_check.tpcc_schemas(admin)
    finally:
        execute(admin, "DROP DATABASE IF EXISTS erp", "DROP DATABASE IF EXISTS tpcc_lookalike")
