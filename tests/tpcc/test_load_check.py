"""The loader's verification (tuner.tpcc.load_check) on a real W=1 load: it passes a fresh load, and each
clause fails, naming its warehouse and district, when a copy of the load is corrupted in the way it checks."""

from __future__ import annotations

import pytest

from sqlhelpers import execute
from tuner.tpcc import schema
from tuner.tpcc.check import CHECKS, IMPLIED_AT_LOAD
from tuner.tpcc.load_check import verify_load
from tuner.tpcc.loader import load

DB, BAD = "tpcc_lcheck", "tpcc_lcheck_bad"

# (statement, clauses it must fail): one planted fault a check shape, each in its own district where it can be
PLANTED = [
    ("UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 1", {"4.3.3.1/totals", "3.3.2.1", "3.3.2.8"}),
    ("UPDATE district SET d_next_o_id = d_next_o_id + 5 WHERE d_w_id = 1 AND d_id = 3",
     {"4.3.3.1/totals", "3.3.2.2"}),
    ("DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id = 4 AND no_o_id = 2500", {"3.3.2.3", "3.3.2.5", "3.3.2.11"}),
    ("DELETE FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 5 AND ol_o_id = 17 AND ol_number = 1",
     {"3.3.2.4", "3.3.2.6"}),
    ("UPDATE orders SET o_all_local = 0 WHERE o_w_id = 1 AND o_d_id = 2 AND o_id = 5", {"4.3.3.1/orders"}),
    ("UPDATE orders SET o_c_id = IF(o_c_id = 1, 2, 1) WHERE o_w_id = 1 AND o_d_id = 6 AND o_c_id IN (1, 2) "
     "ORDER BY o_c_id LIMIT 1", {"4.3.3.1/o_c_id"}),
    ("INSERT INTO new_order VALUES (2000, 7, 1)",
     {"4.3.3.1/new_order", "3.3.2.3", "3.3.2.5", "3.3.2.11"}),
    ("UPDATE order_line SET ol_quantity = 6 WHERE ol_w_id = 1 AND ol_d_id = 9 AND ol_o_id = 20 AND ol_number = 1",
     {"4.3.3.1/order_line"}),
    ("UPDATE order_line SET ol_delivery_d = ol_delivery_d + INTERVAL 1 DAY "
     "WHERE ol_w_id = 1 AND ol_d_id = 8 AND ol_o_id = 21 AND ol_number = 2", {"4.3.3.1/order_line"}),
    ("UPDATE customer SET c_middle = 'XX' WHERE c_w_id = 1 AND c_d_id = 10 AND c_id = 5", {"4.3.3.1/customer"}),
    ("UPDATE customer SET c_last = 'BARBARBAR' WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = 500", {"4.3.2.3"}),
    ("UPDATE customer SET c_last = 'BARBARBAX' WHERE c_w_id = 1 AND c_d_id = 2 AND c_id = 2000", {"4.3.2.3"}),
    ("UPDATE history SET h_amount = h_amount + 10 WHERE h_c_w_id = 1 AND h_c_d_id = 8 AND h_c_id = 99",
     {"3.3.2.8", "3.3.2.9", "4.3.3.1/history"}),
    ("UPDATE stock SET s_quantity = 5 WHERE s_w_id = 1 AND s_i_id = 7", {"4.3.3.1/fractions"}),
]


@pytest.fixture(scope="module")
def loaded(shared_sandbox):
    spec = shared_sandbox.connection_spec()
    load(spec, 1, database=DB, drop=True, progress=False)
    yield spec
    execute(spec, f"DROP DATABASE IF EXISTS {DB}", f"DROP DATABASE IF EXISTS {BAD}")


def copy_of_load(spec, *statements):
    """A copy of the load with ``statements`` applied to it; its connection spec."""
    execute(spec, f"DROP DATABASE IF EXISTS {BAD}", f"CREATE DATABASE {BAD} CHARACTER SET latin1")
    copy = []
    for t in schema.TABLES:
        copy += [f"CREATE TABLE {BAD}.{t} LIKE {DB}.{t}", f"INSERT INTO {BAD}.{t} SELECT * FROM {DB}.{t}"]
    execute(spec, *copy)
    bad = spec.with_database(BAD)
    execute(bad, *statements)
    return bad


def verify(spec, database):
    return verify_load(lambda: spec.with_database(database).connect(), database, 1, 2)


def test_a_fresh_load_passes_every_clause_with_exact_counts(loaded):
    report, counts, problems = verify(loaded, DB)
    assert report.ok and not problems, [r.to_dict() for r in report.failed()]
    assert [r.clause for r in report.results] == [c.clause for c in CHECKS if c.clause not in IMPLIED_AT_LOAD]
    expected = schema.expected_rows(1)
    lines = execute(loaded.with_database(DB), "SELECT SUM(o_ol_cnt) FROM orders")[0][0]
    assert counts == {**expected, "order_line": lines}
    bc = execute(loaded.with_database(DB), "SELECT COUNT(*) FROM customer WHERE c_credit = 'BC' GROUP BY c_d_id")
    assert {n for (n,) in bc} == {300}  # exactly 10% a district


def test_every_planted_fault_fails_its_clauses(loaded):
    copy_of_load(loaded, *[sql for sql, _ in PLANTED])
    report, _, _ = verify(loaded, BAD)
    failed = {r.clause for r in report.failed()}
    assert failed == set().union(*[clauses for _, clauses in PLANTED])
    assert failed == {c.clause for c in CHECKS if c.clause not in IMPLIED_AT_LOAD}

    def where(clause):
        return {(r["w_id"], r.get("d_id")) for r in report.result(clause).offending}

    r = report.result
    assert where("3.3.2.2") == {(1, 3)}
    assert where("3.3.2.4") == {(1, 5)} and where("3.3.2.6") == {(1, 5)}
    assert where("3.3.2.9") == {(1, 8)}
    assert where("4.3.3.1/orders") == {(1, 2)}
    assert where("4.3.3.1/o_c_id") == {(1, 6)}
    assert where("4.3.3.1/new_order") == {(1, 7)} and where("3.3.2.3") == {(1, 4), (1, 7)}
    assert where("4.3.3.1/order_line") == {(1, 8), (1, 9)}
    assert where("4.3.3.1/customer") == {(1, 10)}
    assert where("4.3.2.3") == {(1, 1), (1, 2)}
    assert where("4.3.3.1/history") == {(1, 8)}
    assert r("4.3.3.1/fractions").offending[0]["tbl"] == "stock"


@pytest.mark.parametrize("sql,problem", [
    ("INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number) VALUES (3001, 1, 1, 1)", "3.3.2.6"),
    ("UPDATE customer SET c_credit = 'BC' WHERE c_w_id = 1 AND c_d_id = 3 AND c_id <= 600", "4.3.3.1/fractions"),
])
def test_orphan_lines_and_a_skewed_fraction_fail(loaded, sql, problem):
    copy_of_load(loaded, sql)
    report, _, _ = verify(loaded, BAD)
    assert {r.clause for r in report.failed()} >= {problem}


def test_rows_of_a_warehouse_that_was_not_loaded_are_a_count_problem(loaded):
    copy_of_load(loaded, "INSERT INTO stock (s_i_id, s_w_id) VALUES (1, 2)")
    _, counts, problems = verify(loaded, BAD)
    assert "stock has rows of warehouses 1..2, loaded 1..1" in problems
    assert counts["stock"] == schema.STOCK_PER_W  # the stray row is outside every warehouse pass
