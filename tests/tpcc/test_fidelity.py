"""TPC-C fidelity on a real W=1 schema, both modes: New-Order's rollback, the display output of each
transaction against the rows, lock order inside the database, retries that run out.

The deck, tpmC and restarts are in test_run.py.
"""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest

from tuner.core.measure import Measurement
from tuner.tpcc import driver, new_order, order_status, payment, procedures, stock_level
from tuner.tpcc.rand import make_constants
from tuner.tpcc.session import Session, classify
from tuner.tpcc.terminal import Terminal

MODES = ["procedures", "statements"]
WAIT_LIMIT = 300.0  # seconds to wait for a lock wait to show up (the machine may be loaded); not an assertion


@pytest.fixture(scope="module")
def spec(tpcc_w1):
    conn = tpcc_w1.connect()
    try:
        procedures.install(conn, "tpcc")
    finally:
        conn.close()
    return tpcc_w1


@pytest.fixture
def conn(spec):
    c = spec.connect()
    yield c
    c.close()


def terminal(seed: int = 11) -> Terminal:
    return Terminal.for_client(0, 1, make_constants(seed=5), seed=seed)


def patient_session(spec, mode: str) -> Session:
    s = Session(spec, autocommit=mode == "procedures")
    s.low.query(b"SET SESSION innodb_lock_wait_timeout = 600")  # a loaded machine must not time the test out
    return s


def run_one(spec, mode: str, module, x, session: Session | None = None):
    """(outcome, output row or error message) of one transaction on its own session."""
    s = session or patient_session(spec, mode)
    try:
        if mode == "procedures":
            sets = s.call_rows(module.call_sql(x))
            return "commit", (sets[0][0] if sets and sets[0] else None)
        return "commit", module.run_statements(s, x)
    except Exception as exc:
        if mode == "statements":
            s.rollback()
        return classify(exc), str(getattr(exc, "msg", exc))
    finally:
        if session is None:
            s.close()


def one(conn, sql: str, *args):
    cur = conn.cursor()
    cur.execute(sql, args)
    row = cur.fetchone()
    cur.fetchall()
    cur.close()
    return row


def wait_for_lock_waits(conn, tables: list[str], results: dict) -> list[tuple]:
    """Poll until transactions wait on locks of exactly these tables; return (trx_query, locked table) of each."""
    deadline = time.monotonic() + WAIT_LIMIT
    cur = conn.cursor()
    while True:
        cur.execute("SELECT t.trx_query, l.lock_table FROM information_schema.INNODB_TRX t "
                    "JOIN information_schema.INNODB_LOCKS l ON l.lock_id = t.trx_requested_lock_id "
                    "WHERE t.trx_state = 'LOCK WAIT'")
        rows = cur.fetchall()
        if sorted(t.strip("`").split("`.`")[-1] for _, t in rows) == sorted(tables):
            cur.close()
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"expected lock waits on {tables}, saw {rows}; finished: {results}")
        # InnoDB refreshes the INNODB_TRX / INNODB_LOCKS cache only when it was not read for 0.1 s:
        # polling faster would read a stale picture forever.
        time.sleep(0.3)


def lines_of(x) -> list[tuple[int, int, int]]:
    return [tuple(map(int, p.split(","))) for p in x.lines.strip("[]").split("],[")]


# ---------------------------------------------------------------------------
# 1. The 1% rollback does all its work, holds its locks, then rolls back (2.4.2.3, isolation test 4)


@pytest.mark.parametrize("mode", MODES)
def test_rolled_back_new_order_works_then_rolls_back_and_blocks_its_district(spec, mode):
    d = 3
    obs, blocker = spec.connect(), spec.connect()
    try:
        next_o = one(obs, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", d)[0]
        orders_before = one(obs, "SELECT COUNT(*) FROM orders WHERE o_w_id = 1 AND o_d_id = %s", d)[0]
        ytd_before = one(obs, "SELECT SUM(s_ytd) FROM stock WHERE s_w_id = 1 AND s_i_id IN (7, 3, 9, 5)")[0]
        # A gap lock where the rolled-back order's NEW-ORDER row goes: it stops there, all else done.
        bc = blocker.cursor()
        bc.execute("START TRANSACTION")
        bc.execute("SELECT * FROM new_order WHERE no_w_id = 1 AND no_d_id = %s AND no_o_id = %s FOR UPDATE",
                    (d, next_o))
        bc.fetchall()
        bad = new_order.NewOrderInput(1, d, 5, 5, 1, f"[[7,1,2],[3,1,1],[9,1,3],[5,1,4],"
                                                     f"[{new_order.UNUSED_ITEM_ID},1,1]]", True)
        good = new_order.NewOrderInput(1, d, 6, 5, 1, "[[11,1,1],[12,1,1],[13,1,1],[14,1,1],[15,1,1]]", False)
        results: dict[str, tuple] = {}
        ta = threading.Thread(target=lambda: results.setdefault("bad", run_one(spec, mode, new_order, bad)))
        ta.start()
        wait_for_lock_waits(obs, ["new_order"], results)
        # Its work is there, uncommitted: the district incremented, ORDER and 4 ORDER-LINEs inserted, stock moved.
        cur = obs.cursor()
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
        cur.close()
        assert one(obs, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", d)[0] == next_o + 1
        assert one(obs, "SELECT o_c_id FROM orders WHERE o_w_id = 1 AND o_d_id = %s AND o_id = %s", d, next_o)[0] == 5
        assert one(obs, "SELECT COUNT(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = %s AND ol_o_id = %s",
                   d, next_o)[0] == 4
        assert one(obs, "SELECT SUM(s_ytd) FROM stock WHERE s_w_id = 1 AND s_i_id IN (7, 3, 9, 5)")[0] == \
            ytd_before + 10
        # A concurrent New-Order on the same district waits on the district row it holds.
        tb = threading.Thread(target=lambda: results.setdefault("good", run_one(spec, mode, new_order, good)))
        tb.start()
        wait_for_lock_waits(obs, ["district", "new_order"], results)
        blocker.rollback()
        ta.join(WAIT_LIMIT)
        tb.join(WAIT_LIMIT)
        cur = obs.cursor()
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.close()
        outcome, message = results["bad"]
        assert outcome == "rollback" and f"o_id {next_o} " in message and "c_credit" in message
        # The rollback left nothing: the waiting order got the very same order id.
        outcome, row = results["good"]
        assert outcome == "commit" and new_order.parse_output(row).o_id == next_o
        assert one(obs, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = %s", d)[0] == next_o + 1
        assert one(obs, "SELECT o_c_id, o_ol_cnt FROM orders WHERE o_w_id = 1 AND o_d_id = %s AND o_id = %s",
                   d, next_o) == (6, 5)
        assert one(obs, "SELECT COUNT(*) FROM orders WHERE o_w_id = 1 AND o_d_id = %s", d)[0] == orders_before + 1
        assert one(obs, "SELECT COUNT(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = %s AND ol_o_id = %s "
                        "AND ol_i_id IN (7, 3, 9, 5)", d, next_o)[0] == 0
        assert one(obs, "SELECT SUM(s_ytd) FROM stock WHERE s_w_id = 1 AND s_i_id IN (7, 3, 9, 5)")[0] == ytd_before
    finally:
        blocker.close()
        obs.close()


# ---------------------------------------------------------------------------
# 2. Output fields against the rows


@pytest.mark.parametrize("mode", MODES)
def test_new_order_output_matches_the_rows(spec, conn, mode):
    t = terminal(seed=21 if mode == "procedures" else 22)
    x = new_order.make_input(t)
    while x.rollback:
        x = new_order.make_input(t)
    keyed = lines_of(x)
    before = {i: one(conn, "SELECT s_quantity FROM stock WHERE s_w_id = %s AND s_i_id = %s", w, i)[0]
              for i, w, _ in keyed}
    outcome, row = run_one(spec, mode, new_order, x)
    assert outcome == "commit"
    out = new_order.parse_output(row)
    o = one(conn, "SELECT o_entry_d, o_ol_cnt, o_c_id FROM orders WHERE o_w_id = 1 AND o_d_id = %s AND o_id = %s",
            x.d_id, out.o_id)
    assert o == (out.entry_d, x.ol_cnt, x.c_id) and out.ol_cnt == x.ol_cnt
    c_discount, c_last, c_credit = one(conn, "SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id = 1 "
                                             "AND c_d_id = %s AND c_id = %s", x.d_id, x.c_id)
    w_tax = one(conn, "SELECT w_tax FROM warehouse WHERE w_id = 1")[0]
    d_tax = one(conn, "SELECT d_tax FROM district WHERE d_w_id = 1 AND d_id = %s", x.d_id)[0]
    assert (out.c_discount, out.c_last, out.c_credit, out.w_tax, out.d_tax) == \
        (c_discount, c_last, c_credit, w_tax, d_tax)
    assert [ln.ol_number for ln in out.lines] == list(range(1, x.ol_cnt + 1))
    amount = Decimal(0)
    for ln, (i_id, w, qty) in zip(out.lines, keyed):  # OL_NUMBER is the keyed position, not the lock order
        assert (ln.i_id, ln.supply_w_id, ln.quantity) == (i_id, w, qty)
        i_name, i_price, i_data = one(conn, "SELECT i_name, i_price, i_data FROM item WHERE i_id = %s", i_id)
        s_quantity, s_data = one(conn, "SELECT s_quantity, s_data FROM stock WHERE s_w_id = %s AND s_i_id = %s",
                                 w, i_id)
        ol = one(conn, "SELECT ol_i_id, ol_quantity, ol_amount FROM order_line WHERE ol_w_id = 1 AND ol_d_id = %s "
                       "AND ol_o_id = %s AND ol_number = %s", x.d_id, out.o_id, ln.ol_number)
        assert ol == (i_id, qty, ln.ol_amount) and ln.ol_amount == qty * i_price
        assert (ln.i_name, ln.i_price) == (i_name, i_price)
        assert ln.s_quantity == before[i_id]  # the value before this order's update ...
        expect = before[i_id] - qty if before[i_id] >= qty + 10 else before[i_id] - qty + 91
        assert s_quantity == expect  # ... which the update moved as 2.4.2.2 says
        brand = "B" if "ORIGINAL" in i_data and "ORIGINAL" in s_data else "G"
        assert ln.brand_generic == brand
        amount += ln.ol_amount
    assert out.total == (amount * (1 - c_discount) * (1 + w_tax + d_tax)).quantize(Decimal("0.01"))


def test_brand_generic_and_pre_update_quantity_cover_both_branches(spec, conn):
    """Items with ORIGINAL in both I_DATA and S_DATA show 'B'; a low stock shows its value before the +91."""
    i_id = one(conn, "SELECT i_id FROM item JOIN stock ON s_i_id = i_id AND s_w_id = 1 WHERE i_data LIKE "
                     "'%ORIGINAL%' AND s_data LIKE '%ORIGINAL%' ORDER BY i_id LIMIT 1")[0]
    cur = conn.cursor()
    cur.execute("UPDATE stock SET s_quantity = 12 WHERE s_w_id = 1 AND s_i_id = %s", (i_id,))
    cur.close()
    others = one(conn, "SELECT GROUP_CONCAT(i_id) FROM (SELECT i_id FROM item WHERE i_id <> %s ORDER BY i_id "
                       "LIMIT 4) t", i_id)[0].split(",")
    lines = [f"[{i_id},1,7]"] + [f"[{o},1,1]" for o in others]
    x = new_order.NewOrderInput(1, 2, 9, 5, 1, "[" + ",".join(lines) + "]", False)
    out = new_order.parse_output(run_one(spec, "procedures", new_order, x)[1])
    assert (out.lines[0].brand_generic, out.lines[0].s_quantity) == ("B", 12)
    assert one(conn, "SELECT s_quantity FROM stock WHERE s_w_id = 1 AND s_i_id = %s", i_id)[0] == 12 - 7 + 91


@pytest.mark.parametrize("mode", MODES)
def test_payment_output_matches_the_rows(spec, conn, mode):
    for credit in ("GC", "BC"):
        c_id = one(conn, "SELECT c_id FROM customer WHERE c_w_id = 1 AND c_d_id = 4 AND c_credit = %s "
                         "ORDER BY c_id LIMIT 1 OFFSET %s", credit, 1 if mode == "procedures" else 2)[0]
        x = payment.PaymentInput(1, 4, 1, 4, c_id, "", "123.45")
        outcome, row = run_one(spec, mode, payment, x)
        assert outcome == "commit"
        out = dict(zip(payment.OUTPUT_FIELDS, row))
        assert len(row) == len(payment.OUTPUT_FIELDS)
        c = one(conn, "SELECT c_first, c_middle, c_last, c_phone, c_since, c_credit, c_credit_lim, c_discount, "
                      "c_balance, c_data FROM customer WHERE c_w_id = 1 AND c_d_id = 4 AND c_id = %s", c_id)
        assert (out["c_first"], out["c_middle"], out["c_last"], out["c_phone"], out["c_since"], out["c_credit"],
                out["c_credit_lim"], out["c_discount"], out["c_balance"]) == c[:9]
        assert out["c_id"] == c_id and out["h_amount"] == Decimal("123.45")
        w = one(conn, "SELECT w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id = 1")
        dd = one(conn, "SELECT d_street_1, d_street_2, d_city, d_state, d_zip FROM district "
                       "WHERE d_w_id = 1 AND d_id = 4")
        assert tuple(out[k] for k in ("w_street_1", "w_street_2", "w_city", "w_state", "w_zip")) == w
        assert tuple(out[k] for k in ("d_street_1", "d_street_2", "d_city", "d_state", "d_zip")) == dd
        h_date = one(conn, "SELECT MAX(h_date) FROM history WHERE h_c_w_id = 1 AND h_c_d_id = 4 AND h_c_id = %s",
                     c_id)[0]
        assert out["h_date"] == h_date
        if credit == "BC":
            assert out["c_data"] == c[9][:200] and c[9].startswith(f"{c_id} 4 1 4 1 123.45 ")
        else:
            assert out["c_data"] is None


@pytest.mark.parametrize("mode", MODES)
def test_order_status_output_matches_the_rows(spec, conn, mode):
    x = order_status.OrderStatusInput(1, 6, 77, "")
    outcome, row = run_one(spec, mode, order_status, x)
    assert outcome == "commit"
    out = dict(zip(order_status.OUTPUT_FIELDS, row))
    assert (out["c_first"], out["c_middle"], out["c_last"], out["c_balance"]) == \
        one(conn, "SELECT c_first, c_middle, c_last, c_balance FROM customer WHERE c_w_id = 1 AND c_d_id = 6 "
                  "AND c_id = 77")
    o_id, entry_d, carrier = one(conn, "SELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id = 1 "
                                       "AND o_d_id = 6 AND o_c_id = 77 ORDER BY o_id DESC LIMIT 1")
    assert (out["c_id"], out["o_id"], out["o_entry_d"], out["o_carrier_id"]) == (77, o_id, entry_d, carrier)
    cur = conn.cursor()
    cur.execute("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount FROM order_line WHERE ol_w_id = 1 "
                "AND ol_d_id = 6 AND ol_o_id = %s ORDER BY ol_number", (o_id,))
    rows = cur.fetchall()
    cur.close()
    shown = [part.split(",")[:4] for part in out["lines"].split(";")]
    assert shown == [[str(v) for v in r] for r in rows]


@pytest.mark.parametrize("mode", MODES)
def test_stock_level_output_matches_the_rows(spec, conn, mode):
    x = stock_level.StockLevelInput(1, 2, 20)
    outcome, row = run_one(spec, mode, stock_level, x)
    assert outcome == "commit"
    next_o = one(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 2")[0]
    items = one(conn, "SELECT GROUP_CONCAT(DISTINCT ol_i_id) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 2 "
                      "AND ol_o_id >= %s AND ol_o_id < %s", next_o - 20, next_o)[0]
    low = one(conn, f"SELECT COUNT(*) FROM stock WHERE s_w_id = 1 AND s_quantity < 20 AND s_i_id IN ({items})")[0]
    assert tuple(row) == (1, 2, 20, low)


# ---------------------------------------------------------------------------
# 6. The lock order is the database's business: the client sends lines as keyed


def test_inputs_arrive_in_keyed_order_and_the_database_sorts_them():
    t = terminal()
    unsorted = 0
    for _ in range(200):
        x = new_order.make_input(t)
        valid = lines_of(x)[:-1] if x.rollback else lines_of(x)
        assert len({i for i, _, _ in valid}) == len(valid)  # distinct items (disclosed: LINE_ORDER)
        unsorted += valid != sorted(valid, key=lambda ln: (ln[1], ln[0]))
    assert unsorted > 150  # the driver no longer sorts
    assert "ORDER BY k.w_id, k.i_id" in new_order.CREATE_PROCEDURE  # the procedure does
    assert "ORDER BY k.w_id, k.i_id" in new_order._C_CUSTOMER.sql  # and so does the statement sequence


# ---------------------------------------------------------------------------
# 5. Retries that run out: an error, timed from the first attempt


@pytest.mark.parametrize("mode", MODES)
def test_retries_exhausted_is_an_error_timed_from_the_first_attempt(spec, mode):
    blocker = spec.connect()
    s = Session(spec, autocommit=mode == "procedures")
    try:
        s.low.query(b"SET SESSION innodb_lock_wait_timeout = 1")
        bc = blocker.cursor()
        bc.execute("START TRANSACTION")
        bc.execute("SELECT w_ytd FROM warehouse WHERE w_id = 1 FOR UPDATE")  # Payment updates this row last
        bc.fetchall()
        m = Measurement()
        m.start_measuring()
        x = payment.PaymentInput(1, 1, 1, 1, 10, "", "5.00")
        outcome, message = driver.run_transaction(s, payment, x, mode == "procedures", 2, m.record)
        assert outcome == "error" and message.startswith("retries exhausted (2): 1205")
        assert m.counts["payment"] == {"commit": 0, "rollback": 0, "retry": 2, "error": 1}
        h = m.error_total["payment"]
        assert h.count == 1 and h.max >= 3.0  # three attempts, each waiting out the 1 s lock-wait timeout
        assert m.total["payment"].count == 0
    finally:
        blocker.rollback()
        blocker.close()
        s.close()
