"""Clause 2.7.4.2: a Delivery skips a district with no undelivered order, and the skips are counted and reported."""

from __future__ import annotations

import pytest

from tuner.core.measure import RunResult
from tuner.tpcc import delivery, procedures, schema
from tuner.tpcc.delivery import DeliveryInput
from tuner.tpcc.session import Session
from tuner.tpcc.tpcc_run_cli import print_result


def one(cur, sql, *args):
    cur.execute(sql, args)
    return cur.fetchall()


@pytest.mark.parametrize("mode", ["procedures", "statements"])
def test_a_district_without_new_orders_is_skipped_and_counted(w1_db, mode):
    db, cur = w1_db.database, w1_db.cur
    cur.execute("DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id IN (2, 5)")
    w1_db.conn.commit()
    if mode == "procedures":
        procedures.install(w1_db.conn, db)
    before = one(cur, "SELECT no_d_id, MIN(no_o_id) FROM new_order GROUP BY no_d_id")
    s = Session(w1_db.spec.with_database(db), autocommit=mode == "procedures")
    try:
        for _ in range(2):
            if mode == "procedures":
                s.call_rows(delivery.call_sql(DeliveryInput(1, 3)))
            else:
                delivery.run_statements(s, DeliveryInput(1, 3))
    finally:
        s.close()
    w1_db.conn.commit()
    assert one(cur, "SELECT w_id, d_id, skipped FROM tpcc_delivery_skips ORDER BY d_id") == [(1, 2, 2), (1, 5, 2)]
    assert schema.delivery_skips(w1_db.conn, db) == 4
    after = dict(one(cur, "SELECT no_d_id, MIN(no_o_id) FROM new_order GROUP BY no_d_id"))
    assert {d: o + 2 for d, o in before} == after  # the other eight districts delivered two orders each


def test_a_schema_loaded_before_the_counter_gets_it(w1_db):
    cur = w1_db.cur
    cur.execute(f"DROP TABLE {schema.DELIVERY_SKIPS_TABLE}")
    assert schema.delivery_skips(w1_db.conn, w1_db.database) == 0
    procedures.install(w1_db.conn, w1_db.database)
    assert schema.DELIVERY_SKIPS_TABLE in schema.present_tables(w1_db.conn, w1_db.database)


def test_the_result_reports_skipped_districts(capsys):
    r = RunResult(driver="builtin", mode="procedures", warehouses=1, clients=2, warmup_seconds=0.0,
                  measured_seconds=60.0, tpmc=1000.0)
    r.extra["delivery_skipped_districts"] = 17
    print_result(r)
    assert "Delivery skipped 17 district(s)" in capsys.readouterr().out
