"""The transactions' joins keep their plan when the statistics lie (issue 33: the page-size sweep's stalls).

In the quiet page-size runs of 2026-12-02 one New-Order at a time held 200,016 (and 436,365) stock row locks for
17-33 s while every other terminal queued: its UPDATE of STOCK had been planned as a full scan, and an UPDATE
locks every row it reads.  The fault injected here is the lie itself: STOCK's (and every table's) persistent
statistics set to one row and one page, and the server restarted so it reads them.  The free-order form then
plans STOCK first as a full scan (shown, so the fault is real on this server); every join the workload runs keeps
JSON_TABLE (or the order lines) first and reads ITEM and STOCK by primary key, and a New-Order called through the
installed procedure reads no table by scan."""

from __future__ import annotations

import json

from tuner.tpcc import new_order, procedures, stock_level

LINES = [[5, 1, 3, 1], [77, 1, 2, 2], [900, 1, 1, 3]]  # [i_id, supply w_id, qty, ol_number], sorted
VALUES = {"into": "", "sorted": f"'{json.dumps(LINES)}'", "w_id": 1, "d_id": 3, "o_id": 3001, "next_o_id": 3001,
          "threshold": 15}
FREE_ORDER_UPDATE = ("UPDATE stock JOIN " + new_order.SORTED + " ON stock.s_w_id = l.w_id AND stock.s_i_id = l.i_id "
                     "SET s_ytd = s_ytd + l.qty")  # the form before 2026-12-02


def _explain(cur, template: str) -> list[dict]:
    cur.execute("EXPLAIN " + template.format(**VALUES))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _lie_about_the_statistics(sb) -> None:
    conn = sb.connection_spec().connect()
    cur = conn.cursor()
    cur.execute("UPDATE mysql.innodb_table_stats SET n_rows = 1, clustered_index_size = 1, "
                "sum_of_other_index_sizes = 0 WHERE database_name = 'tpcc'")
    cur.execute("UPDATE mysql.innodb_index_stats SET stat_value = 1 WHERE database_name = 'tpcc'")
    conn.close()
    sb.stop("clean")
    sb.start()


def test_every_join_reads_item_and_stock_by_primary_key_when_the_statistics_say_stock_is_one_row(clone):
    sb = clone("forced-plans")
    try:
        _check_plans_under_the_lie(sb)
    finally:
        sb.stop("kill")  # a server left with lying statistics was seen burning CPU for the rest of a session


def _check_plans_under_the_lie(sb) -> None:
    _lie_about_the_statistics(sb)
    conn = sb.connection_spec().with_database("tpcc").connect()
    cur = conn.cursor()
    cur.execute("SHOW TABLE STATUS LIKE 'stock'")
    status = dict(zip([d[0] for d in cur.description], cur.fetchone()))
    assert status["Rows"] <= 1, status  # the server believes the lie
    free = _explain(cur, FREE_ORDER_UPDATE)
    assert (free[0]["table"], free[0]["type"]) == ("stock", "ALL"), free  # the fault: a scan of STOCK first

    for name, template in (("UPDATE_STOCK", new_order.UPDATE_STOCK), ("DISPLAY_LINES", new_order.DISPLAY_LINES),
                           ("INSERT_ORDER_LINES", new_order.INSERT_ORDER_LINES),
                           ("COUNT_LOW_STOCK", stock_level.COUNT_LOW_STOCK)):
        plan = _explain(cur, template)
        by_table = {row["table"]: row for row in plan}
        assert plan[0]["table"] in ("l", "order_line"), (name, plan)
        for table in ("item", "stock"):
            if table in by_table:
                assert by_table[table]["type"] in ("eq_ref", "ref") and by_table[table]["key"] == "PRIMARY", (name, plan)
        assert "stock" in by_table, (name, plan)

    procedures.install(conn, "tpcc")
    cur.execute("SHOW SESSION STATUS LIKE 'Handler_read_rnd_next'")
    before = int(cur.fetchone()[1])
    lines = json.dumps([[i, 1, q] for i, _, q, _ in LINES])
    cur.callproc(new_order.PROCEDURE, (1, 3, 42, len(LINES), 1, lines))
    for result in cur.stored_results():
        result.fetchall()
    cur.execute("SHOW SESSION STATUS LIKE 'Handler_read_rnd_next'")
    scanned = int(cur.fetchone()[1]) - before
    # JSON_TABLE's own rows are read by "rnd_next" (a few per call); a scan of STOCK would read its 100,000
    assert scanned < 100, scanned
    conn.close()
