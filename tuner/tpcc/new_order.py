"""New-Order (TPC-C clause 2.4): one order of 5-15 lines, 1% of them rolled back on an unused item.

Inputs (2.4.1): home warehouse; district uniform 1-10; customer NURand(1023,1,3000);
5-15 lines; item NURand(8191,1,100000); supply warehouse home in 99% of lines,
another warehouse in 1% (2.4.1.5); quantity uniform 1-10; in 1% of orders the
last item id is unused (100001), and the transaction must roll back (2.4.1.4, 2.4.2.3).

Item ids within one order are distinct (go-tpc does the same) and the lines are
processed in (supply warehouse, item) order, which makes New-Orders lock stock rows
in one global order and so never deadlock with each other.  The lines travel as
one JSON array and every per-line step is one set-based statement over
JSON_TABLE (MariaDB 10.6+, MySQL 8.0.4+): 6 statements and a COMMIT per order
instead of HammerDB's 4 per line plus 6, the same rows read and written.  Stock
and items are touched before the district row is locked, so the hot D_NEXT_O_ID
lock is held for the shortest time.

Database work per 2.4.2.2: read W_TAX, C_DISCOUNT/C_LAST/C_CREDIT; read and
increment D_NEXT_O_ID (reading D_TAX); insert ORDER and NEW-ORDER rows; per line
read the ITEM row, update STOCK (S_QUANTITY -= qty, or -= qty - 91 when that would
leave fewer than 10; S_YTD += qty; S_ORDER_CNT += 1; S_REMOTE_CNT += 1 when
remote) and insert an ORDER-LINE with OL_AMOUNT = qty * I_PRICE and OL_DIST_INFO =
S_DIST_xx for the district; OL_DELIVERY_D stays null.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.tpcc import sqltemplate as T
from tuner.tpcc.session import UNUSED_ITEM_MESSAGE, Rollback, Session
from tuner.tpcc.terminal import ITEMS, Terminal

OP = "new_order"
PROCEDURE = "tpcc_new_order"
UNUSED_ITEM_ID = ITEMS + 1  # 2.4.1.5: "an unused value for OL_I_ID"

# The order lines as a table: [[i_id, supply_w_id, quantity], ...] (ol_number = position).
LINES = ("JSON_TABLE({lines}, '$[*]' COLUMNS (ol_number FOR ORDINALITY, i_id INT PATH '$[0]', "
         "w_id INT PATH '$[1]', qty INT PATH '$[2]')) AS l")

# 2.4.2.2: W_TAX, D_TAX and the customer's C_DISCOUNT, C_LAST, C_CREDIT (non-locking reads; the taxes never change).
SELECT_CUSTOMER = ("SELECT c_discount, c_last, c_credit, w_tax, d_tax{into} FROM customer, warehouse, district "
                   "WHERE w_id = {w_id} AND d_w_id = {w_id} AND d_id = {d_id} "
                   "AND c_w_id = {w_id} AND c_d_id = {d_id} AND c_id = {c_id}")
# 2.4.2.2: every line's ITEM and STOCK rows, and the STOCK update, in one statement; stock rows are locked in
# JSON order (= sorted).  A line whose item does not exist matches nothing, so fewer rows than lines
# means the unused item id: the order rolls back (2.4.2.3).
UPDATE_STOCK = ("UPDATE stock JOIN " + LINES + " ON stock.s_w_id = l.w_id AND stock.s_i_id = l.i_id "
                "JOIN item ON item.i_id = l.i_id "
                "SET s_quantity = IF(s_quantity >= l.qty + 10, s_quantity - l.qty, s_quantity - l.qty + 91), "
                "s_ytd = s_ytd + l.qty, s_order_cnt = s_order_cnt + 1, "
                "s_remote_cnt = s_remote_cnt + (l.w_id <> {w_id})")
# 2.4.2.2: the order id is D_NEXT_O_ID, which is incremented: one locking update, the old value comes back
# through LAST_INSERT_ID(expr) (MySQL/MariaDB manual, LAST_INSERT_ID(): "If expr is given ... the value of
# expr is returned by the next call to LAST_INSERT_ID()" and by mysql_insert_id()).
NEXT_ORDER_ID = ("UPDATE district SET d_next_o_id = LAST_INSERT_ID(d_next_o_id + 1) "
                 "WHERE d_w_id = {w_id} AND d_id = {d_id}")
INSERT_ORDER = ("INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) "
                "VALUES ({o_id}, {d_id}, {w_id}, {c_id}, NOW(), {ol_cnt}, {all_local})")
INSERT_NEW_ORDER = "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES ({o_id}, {d_id}, {w_id})"
INSERT_ORDER_LINES = (
    "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_quantity, "
    "ol_amount, ol_dist_info) "
    "SELECT {o_id}, {d_id}, {w_id}, l.ol_number, l.i_id, l.w_id, l.qty, l.qty * i_price, "
    "ELT({d_id}, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, "
    "s_dist_09, s_dist_10) FROM " + LINES + " JOIN item ON item.i_id = l.i_id "
    "JOIN stock ON stock.s_w_id = l.w_id AND stock.s_i_id = l.i_id")

_VARS = {"w_id": "p_w_id", "d_id": "p_d_id", "c_id": "p_c_id", "ol_cnt": "p_ol_cnt",
         "all_local": "p_all_local", "lines": "p_lines", "o_id": "v_o_id"}

CREATE_PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE} (
  IN p_w_id INT, IN p_d_id INT, IN p_c_id INT, IN p_ol_cnt INT, IN p_all_local INT, IN p_lines VARCHAR(1024))
BEGIN
  DECLARE v_c_discount DECIMAL(4,4);
  DECLARE v_c_last VARCHAR(16);
  DECLARE v_c_credit CHAR(2);
  DECLARE v_w_tax DECIMAL(4,4);
  DECLARE v_d_tax DECIMAL(4,4);
  DECLARE v_o_id INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  {T.procedure(SELECT_CUSTOMER, _VARS, ("v_c_discount", "v_c_last", "v_c_credit", "v_w_tax", "v_d_tax"))};
  {T.procedure(UPDATE_STOCK, _VARS)};
  IF ROW_COUNT() < p_ol_cnt THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{UNUSED_ITEM_MESSAGE}';
  END IF;
  {T.procedure(NEXT_ORDER_ID, _VARS)};
  SET v_o_id = LAST_INSERT_ID() - 1;
  {T.procedure(INSERT_ORDER, _VARS)};
  {T.procedure(INSERT_NEW_ORDER, _VARS)};
  {T.procedure(INSERT_ORDER_LINES, _VARS)};
  COMMIT;
END"""

_C_CUSTOMER = T.client(SELECT_CUSTOMER)
_C_STOCK = T.client(UPDATE_STOCK)
_C_NEXT_ORDER_ID = T.client(NEXT_ORDER_ID)
_C_ORDER = T.client(INSERT_ORDER)
_C_NEW_ORDER = T.client(INSERT_NEW_ORDER)
_C_LINES = T.client(INSERT_ORDER_LINES)
CLIENT_STATEMENTS = (_C_CUSTOMER, _C_STOCK, _C_NEXT_ORDER_ID, _C_ORDER, _C_NEW_ORDER, _C_LINES)


@dataclass(slots=True)
class NewOrderInput:
    w_id: int
    d_id: int
    c_id: int
    ol_cnt: int
    all_local: int
    lines: str  # JSON [[i_id, supply_w_id, qty], ...]
    rollback: bool


def make_input(t: Terminal) -> NewOrderInput:
    r = t.rng.random
    ol_cnt = 5 + int(r() * 11)  # uniform 5..15
    rollback = r() < 0.01  # 2.4.1.4: 1%
    items: set[int] = set()
    lines = []
    all_local = 1
    n_valid = ol_cnt - 1 if rollback else ol_cnt
    while len(items) < n_valid:
        items.add(t.item_id())
    home = t.w_id
    multi = t.warehouses > 1
    for i_id in items:
        if multi and r() < 0.01:  # 2.4.1.5: 1% of lines from a remote supply warehouse
            w = t.other_warehouse()
            all_local = 0
        else:
            w = home
        lines.append((w, i_id, 1 + int(r() * 10)))
    lines.sort()
    if rollback:
        lines.append((home, UNUSED_ITEM_ID, 1 + int(r() * 10)))
    text = "[" + ",".join(f"[{i},{w},{q}]" for w, i, q in lines) + "]"
    return NewOrderInput(home, 1 + int(r() * 10), t.customer_id(), ol_cnt, all_local, text, rollback)


def call_sql(x: NewOrderInput) -> bytes:
    return f"CALL {PROCEDURE}({x.w_id},{x.d_id},{x.c_id},{x.ol_cnt},{x.all_local},'{x.lines}')".encode()


def run_statements(s: Session, x: NewOrderInput) -> None:
    """The same statements as the procedure, prepared on the client (autocommit off)."""
    w, d, lines = x.w_id, x.d_id, x.lines
    s.rows(_C_CUSTOMER.sql, w, w, d, w, d, x.c_id)
    if s.execute(_C_STOCK.sql, lines, w) < x.ol_cnt:
        s.rollback()
        raise Rollback(UNUSED_ITEM_MESSAGE)
    s.execute(_C_NEXT_ORDER_ID.sql, w, d)
    o_id = s.low.insert_id() - 1
    s.execute(_C_ORDER.sql, o_id, d, w, x.c_id, x.ol_cnt, x.all_local)
    s.execute(_C_NEW_ORDER.sql, o_id, d, w)
    s.execute(_C_LINES.sql, o_id, d, w, d, lines)
    s.commit()
