"""Clause 2.7.4.2: a Delivery skips a district with no undelivered order, and the skips are reported.

The transaction returns how many districts it skipped and the driver counts them; nothing is written for it
(a counter row inside every Delivery was a hot row, issue 34)."""

from __future__ import annotations

from tuner.core.measure import RunResult
from tuner.tpcc import delivery, driver, procedures, schema
from tuner.tpcc.config import RunConfig
from tuner.tpcc.delivery import DeliveryInput
from tuner.tpcc.session import Session
from tuner.tpcc.transaction import execute
from tuner.tpcc.tpcc_run_cli import print_result


def one(cur, sql, *args):
    cur.execute(sql, args)
    return cur.fetchall()


def test_a_district_without_new_orders_is_skipped_and_returned_in_both_modes(w1_db):
    db, cur = w1_db.database, w1_db.cur
    cur.execute("DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id IN (2, 5)")
    w1_db.conn.commit()
    procedures.install(w1_db.conn, db)
    before = one(cur, "SELECT no_d_id, MIN(no_o_id) FROM new_order GROUP BY no_d_id")
    returned = []
    for mode in ("procedures", "statements"):
        s = Session(w1_db.spec.with_database(db), autocommit=mode == "procedures")
        try:
            returned.append(execute(s, delivery, DeliveryInput(1, 3), procedures=mode == "procedures"))
        finally:
            s.close()
    w1_db.conn.commit()
    assert returned == [2, 2]
    after = dict(one(cur, "SELECT no_d_id, MIN(no_o_id) FROM new_order GROUP BY no_d_id"))
    assert {d: o + 2 for d, o in before} == after  # the other eight districts delivered two orders each
    assert "tpcc_delivery_skips" not in schema.present_tables(w1_db.conn, db)  # nothing written for the count
    assert "tpcc_delivery_skips" not in delivery.CREATE_PROCEDURE


def test_the_run_result_counts_the_skips_the_database_shows(w1_db):
    """Skipped districts = 10 x committed Deliveries - orders delivered, both read from the server's rows."""
    db, cur = w1_db.database, w1_db.cur
    cur.execute("DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id > 3")  # seven districts with nothing to deliver
    w1_db.conn.commit()
    pending = one(cur, "SELECT COUNT(*) FROM new_order")[0][0]
    next_ids = one(cur, "SELECT SUM(d_next_o_id) FROM district")[0][0]
    r = driver.run(w1_db.spec, RunConfig(clients=2, warmup=0, duration=3, interval=1, database=db))
    w1_db.conn.commit()  # a fresh snapshot for the reads below
    created = one(cur, "SELECT SUM(d_next_o_id) FROM district")[0][0] - next_ids
    delivered = pending + created - one(cur, "SELECT COUNT(*) FROM new_order")[0][0]
    deliveries = r.extra["all_counts"]["delivery"]["commit"]
    assert deliveries > 0 and r.complete
    assert r.extra["delivery_skipped_districts"] == 10 * deliveries - delivered > 0


def test_a_schema_loaded_with_the_old_counter_table_keeps_it_until_dropped(district_db):
    """Loader version 2 made tpcc_delivery_skips: installing the procedures leaves it alone, a reload with
    --drop (drop_schema) removes it with the rest."""
    conn, db = district_db.conn, district_db.database
    cur = conn.cursor()
    cur.execute("CREATE TABLE tpcc_delivery_skips (w_id INT NOT NULL, d_id INT NOT NULL, skipped BIGINT NOT NULL, "
                "PRIMARY KEY (w_id, d_id)) ENGINE=InnoDB")
    cur.close()
    procedures.install(conn, db)
    assert schema.present_tables(conn, db) == ["district", "tpcc_delivery_skips"]
    assert schema.drop_schema(conn, db) == ["district", "tpcc_delivery_skips"]
    assert schema.present_tables(conn, db) == []


def test_the_result_reports_skipped_districts(capsys):
    r = RunResult(driver="builtin", mode="procedures", warehouses=1, clients=2, warmup_seconds=0.0,
                  measured_seconds=60.0, tpmc=1000.0)
    r.extra["delivery_skipped_districts"] = 17
    print_result(r)
    assert "Delivery skipped 17 district(s)" in capsys.readouterr().out
