"""New-Order (TPC-C clause 2.4): one order of 5-15 lines, 1% of them rolled back on an unused item.

Inputs (2.4.1): home warehouse; district uniform 1-10; customer NURand(1023,1,3000);
5-15 lines; item NURand(8191,1,100000); supply warehouse home in 99% of lines,
another warehouse in 1% (2.4.1.5); quantity uniform 1-10; in 1% of orders the
last item id is unused (100001), and the transaction must roll back (2.4.1.4, 2.4.2.3).
Item ids within one order are distinct (as go-tpc; the spec does not require it, and
a multi-table UPDATE updates a row once): the result discloses it.

The lines travel as one JSON array in the order they were keyed (OL_NUMBER =
position).  The database logic itself sorts them by (supply warehouse, item) --
a GROUP_CONCAT ... ORDER BY inside the first SELECT -- and every per-line step is
one set-based statement over JSON_TABLE of the sorted array (MariaDB 10.6+, MySQL
8.0.4+): stock rows are therefore locked in one global order, so New-Orders never
deadlock with each other, whichever client sent them.  Stock and items are touched
before the district row is locked, so the hot D_NEXT_O_ID lock is held for the
shortest time.

Database work per 2.4.2.2: read W_TAX, D_TAX, C_DISCOUNT/C_LAST/C_CREDIT; update
STOCK per line (S_QUANTITY -= qty, or -= qty - 91 when that would leave fewer than
10; S_YTD += qty; S_ORDER_CNT += 1; S_REMOTE_CNT += 1 when remote); read each
line's ITEM (I_NAME, I_PRICE, I_DATA) and STOCK (S_QUANTITY, S_DATA) for the
display; read and increment D_NEXT_O_ID; insert the ORDER, ORDER-LINE (OL_AMOUNT =
qty * I_PRICE, OL_DIST_INFO = S_DIST_xx) and NEW-ORDER rows.  When an item was not
found (the 1% case), all of that work is done and then rolled back (2.4.2.3): the
district row stays locked until the rollback, as the spec's isolation test 4 expects.

Output (2.4.3.3), returned as one row -- the procedure's result set, or the
tuple ``run_statements`` returns: O_ID, O_ENTRY_D, C_LAST, C_CREDIT, C_DISCOUNT,
W_TAX, D_TAX, O_OL_CNT, the total (sum of OL_AMOUNT * (1 - C_DISCOUNT) * (1 +
W_TAX + D_TAX)), and per line OL_NUMBER|OL_SUPPLY_W_ID|OL_I_ID|I_NAME|OL_QUANTITY|
S_QUANTITY|brand-generic|I_PRICE|OL_AMOUNT (lines joined by ';').  S_QUANTITY is
the value before the update, as the spec's Appendix A displays it; it is read after
the update and inverted exactly: quantities stay within 10..100 (4.3.3.1 loads
10..100; the update keeps them there), so new <= 100 - qty means the plain branch.
A rolled-back order returns the error whose message holds O_ID, C_LAST and C_CREDIT
(2.4.3.4: "Item number is not valid").
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from tuner.tpcc import sqltemplate as T
from tuner.tpcc.session import UNUSED_ITEM_MESSAGE, Rollback, Session
from tuner.tpcc.terminal import ITEMS, Terminal

OP = "new_order"
PROCEDURE = "tpcc_new_order"
UNUSED_ITEM_ID = ITEMS + 1  # 2.4.1.5: "an unused value for OL_I_ID"
# How the lines are processed and who orders them: recorded in every result.
LINE_ORDER = ("item ids distinct within an order (as go-tpc); the procedure / statement sequence sorts the "
              "lines by (supply warehouse, item) before touching stock, so stock rows lock in one order")

# The keyed lines: [[i_id, supply_w_id, quantity], ...] (ol_number = position).
KEYED = ("JSON_TABLE({lines}, '$[*]' COLUMNS (ol_number FOR ORDINALITY, i_id INT PATH '$[0]', "
         "w_id INT PATH '$[1]', qty INT PATH '$[2]')) AS k")
# The same lines sorted by (supply warehouse, item), each carrying its ol_number: [[i_id, w_id, qty, ol_number]].
SORTED = ("JSON_TABLE({sorted}, '$[*]' COLUMNS (i_id INT PATH '$[0]', w_id INT PATH '$[1]', qty INT PATH '$[2]', "
          "ol_number INT PATH '$[3]')) AS l")
SORT_LINES = ("(SELECT CONCAT('[', GROUP_CONCAT(CONCAT('[', k.i_id, ',', k.w_id, ',', k.qty, ',', k.ol_number, ']') "
              "ORDER BY k.w_id, k.i_id SEPARATOR ','), ']') FROM " + KEYED + ")")

# 2.4.2.2: W_TAX, D_TAX and the customer's C_DISCOUNT, C_LAST, C_CREDIT (non-locking reads; the taxes never
# change), the entry date, and the lines in lock order (computed by the server, see SORT_LINES).
SELECT_CUSTOMER = ("SELECT c_discount, c_last, c_credit, w_tax, d_tax, NOW(), " + SORT_LINES + "{into} "
                   "FROM customer, warehouse, district "
                   "WHERE w_id = {w_id} AND d_w_id = {w_id} AND d_id = {d_id} "
                   "AND c_w_id = {w_id} AND c_d_id = {d_id} AND c_id = {c_id}")
# The lines' ITEM and STOCK rows, by primary key, the lines first.  The join order and the index are forced: with
# STOCK's statistics saying it is tiny (n_rows 1), MariaDB 10.11 plans the free-order form as a full scan of STOCK
# first; an UPDATE (or an INSERT ... SELECT) locks every row it reads, so one New-Order held 200,016 and 436,365
# stock row locks for 17-33 s and every other terminal queued behind them (the page-size sweep's stalls of
# 2026-12-02, caught by the sweep's oldest-transaction sample; docs/sweep-statistics.md).
LINE_ROWS = (" STRAIGHT_JOIN item FORCE INDEX (PRIMARY) ON item.i_id = l.i_id "
             "STRAIGHT_JOIN stock FORCE INDEX (PRIMARY) ON stock.s_w_id = l.w_id AND stock.s_i_id = l.i_id")
# 2.4.2.2: every line's STOCK update in one statement; stock rows are locked in the sorted order.  A line whose
# item does not exist has no stock row either and matches nothing.
UPDATE_STOCK = ("UPDATE " + SORTED + " STRAIGHT_JOIN stock FORCE INDEX (PRIMARY) "
                "ON stock.s_w_id = l.w_id AND stock.s_i_id = l.i_id "
                "SET s_quantity = IF(s_quantity >= l.qty + 10, s_quantity - l.qty, s_quantity - l.qty + 91), "
                "s_ytd = s_ytd + l.qty, s_order_cnt = s_order_cnt + 1, "
                "s_remote_cnt = s_remote_cnt + (l.w_id <> {w_id})")
# 2.4.2.2 / 2.4.3.3: each line's ITEM and STOCK display fields (this transaction's own updated stock rows, so
# S_QUANTITY is inverted to the value before the update: see the module docstring); the count of lines whose
# item exists decides the rollback (2.4.2.3).
DISPLAY_LINES = ("SELECT COUNT(*), SUM(l.qty * i_price), GROUP_CONCAT(CONCAT_WS('|', l.ol_number, l.w_id, l.i_id, "
                 "i_name, l.qty, IF(s_quantity <= 100 - l.qty, s_quantity + l.qty, s_quantity + l.qty - 91), "
                 "IF(i_data LIKE '%ORIGINAL%' AND s_data LIKE '%ORIGINAL%', 'B', 'G'), i_price, l.qty * i_price) "
                 "ORDER BY l.ol_number SEPARATOR ';'){into} "
                 "FROM " + SORTED + LINE_ROWS)
# 2.4.2.2: the order id is D_NEXT_O_ID, which is incremented: one locking update, the old value comes back
# through LAST_INSERT_ID(expr) (MySQL/MariaDB manual, LAST_INSERT_ID(): "If expr is given ... the value of
# expr is returned by the next call to LAST_INSERT_ID()" and by mysql_insert_id()).
NEXT_ORDER_ID = ("UPDATE district SET d_next_o_id = LAST_INSERT_ID(d_next_o_id + 1) "
                 "WHERE d_w_id = {w_id} AND d_id = {d_id}")
INSERT_ORDER = ("INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) "
                "VALUES ({o_id}, {d_id}, {w_id}, {c_id}, {entry_d}, {ol_cnt}, {all_local})")
INSERT_ORDER_LINES = (
    "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_quantity, "
    "ol_amount, ol_dist_info) "
    "SELECT {o_id}, {d_id}, {w_id}, l.ol_number, l.i_id, l.w_id, l.qty, l.qty * i_price, "
    "ELT({d_id}, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, "
    "s_dist_09, s_dist_10) FROM " + SORTED + LINE_ROWS)
INSERT_NEW_ORDER = "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES ({o_id}, {d_id}, {w_id})"

_VARS = {"w_id": "p_w_id", "d_id": "p_d_id", "c_id": "p_c_id", "ol_cnt": "p_ol_cnt",
         "all_local": "p_all_local", "lines": "p_lines", "o_id": "v_o_id", "sorted": "v_sorted",
         "entry_d": "v_entry_d"}

CREATE_PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE} (
  IN p_w_id INT, IN p_d_id INT, IN p_c_id INT, IN p_ol_cnt INT, IN p_all_local INT, IN p_lines VARCHAR(1024))
BEGIN
  DECLARE v_c_discount, v_w_tax, v_d_tax DECIMAL(4,4);
  DECLARE v_c_last VARCHAR(16);
  DECLARE v_c_credit CHAR(2);
  DECLARE v_entry_d DATETIME;
  DECLARE v_sorted VARCHAR(2048);
  DECLARE v_found, v_o_id INT;
  DECLARE v_amount DECIMAL(12,2);
  DECLARE v_items TEXT;
  DECLARE v_msg VARCHAR(128);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  {T.procedure(SELECT_CUSTOMER, _VARS, ("v_c_discount", "v_c_last", "v_c_credit", "v_w_tax", "v_d_tax",
                                        "v_entry_d", "v_sorted"))};
  {T.procedure(UPDATE_STOCK, _VARS)};
  {T.procedure(DISPLAY_LINES, _VARS, ("v_found", "v_amount", "v_items"))};
  {T.procedure(NEXT_ORDER_ID, _VARS)};
  SET v_o_id = LAST_INSERT_ID() - 1;
  {T.procedure(INSERT_ORDER, _VARS)};
  {T.procedure(INSERT_ORDER_LINES, _VARS)};
  {T.procedure(INSERT_NEW_ORDER, _VARS)};
  IF v_found < p_ol_cnt THEN
    SET v_msg = CONCAT('{UNUSED_ITEM_MESSAGE}: o_id ', v_o_id, ' c_last ', v_c_last, ' c_credit ', v_c_credit);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
  END IF;
  COMMIT;
  SELECT v_o_id, v_entry_d, v_c_last, v_c_credit, v_c_discount, v_w_tax, v_d_tax, p_ol_cnt,
         ROUND(v_amount * (1 - v_c_discount) * (1 + v_w_tax + v_d_tax), 2), v_items;
END"""

_C_CUSTOMER = T.client(SELECT_CUSTOMER)
_C_STOCK = T.client(UPDATE_STOCK)
_C_DISPLAY = T.client(DISPLAY_LINES)
_C_NEXT_ORDER_ID = T.client(NEXT_ORDER_ID)
_C_ORDER = T.client(INSERT_ORDER)
_C_LINES = T.client(INSERT_ORDER_LINES)
_C_NEW_ORDER = T.client(INSERT_NEW_ORDER)
CLIENT_STATEMENTS = (_C_CUSTOMER, _C_STOCK, _C_DISPLAY, _C_NEXT_ORDER_ID, _C_ORDER, _C_LINES, _C_NEW_ORDER)


@dataclass(slots=True)
class NewOrderInput:
    w_id: int
    d_id: int
    c_id: int
    ol_cnt: int
    all_local: int
    lines: str  # JSON [[i_id, supply_w_id, qty], ...] in keyed order
    rollback: bool


@dataclass
class OutputLine:
    ol_number: int
    supply_w_id: int
    i_id: int
    i_name: str
    quantity: int
    s_quantity: int  # before this order's update
    brand_generic: str  # 'B' or 'G'
    i_price: Decimal
    ol_amount: Decimal


@dataclass
class NewOrderOutput:
    """What the terminal displays after a committed New-Order (2.4.3.3)."""

    o_id: int
    entry_d: object
    c_last: str
    c_credit: str
    c_discount: Decimal
    w_tax: Decimal
    d_tax: Decimal
    ol_cnt: int
    total: Decimal
    lines: list[OutputLine]


def make_input(t: Terminal) -> NewOrderInput:
    r = t.rng.random
    ol_cnt = 5 + int(r() * 11)  # uniform 5..15
    rollback = r() < 0.01  # 2.4.1.4: 1%
    seen: set[int] = set()
    parts = []
    all_local = 1
    home = t.w_id
    multi = t.warehouses > 1
    n_valid = ol_cnt - 1 if rollback else ol_cnt
    while len(parts) < n_valid:
        i_id = t.item_id()
        if i_id in seen:
            continue
        seen.add(i_id)
        if multi and r() < 0.01:  # 2.4.1.5: 1% of lines from a remote supply warehouse
            w = t.other_warehouse()
            all_local = 0
        else:
            w = home
        parts.append(f"[{i_id},{w},{1 + int(r() * 10)}]")
    if rollback:  # 2.4.1.5: the last line carries the unused item
        parts.append(f"[{UNUSED_ITEM_ID},{home},{1 + int(r() * 10)}]")
    return NewOrderInput(home, 1 + int(r() * 10), t.customer_id(), ol_cnt, all_local, "[" + ",".join(parts) + "]",
                         rollback)


def call_sql(x: NewOrderInput) -> bytes:
    return f"CALL {PROCEDURE}({x.w_id},{x.d_id},{x.c_id},{x.ol_cnt},{x.all_local},'{x.lines}')".encode()


def rollback_message(o_id, c_last, c_credit) -> str:
    """The same text the procedure SIGNALs (2.4.3.4: the order id, C_LAST and C_CREDIT are displayed)."""
    return f"{UNUSED_ITEM_MESSAGE}: o_id {o_id} c_last {_text(c_last)} c_credit {_text(c_credit)}"


def total(amount, c_discount, w_tax, d_tax) -> Decimal:
    """2.4.2.2: sum(OL_AMOUNT) * (1 - C_DISCOUNT) * (1 + W_TAX + D_TAX), to the cent (SQL ROUND)."""
    exact = Decimal(amount) * (1 - Decimal(c_discount)) * (1 + Decimal(w_tax) + Decimal(d_tax))
    return exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def run_statements(s: Session, x: NewOrderInput) -> tuple:
    """The same statements as the procedure, prepared on the client (autocommit off); returns the output row."""
    w, d = x.w_id, x.d_id
    disc, c_last, credit, w_tax, d_tax, entry_d, ordered = s.rows(_C_CUSTOMER.sql, x.lines, w, w, d, w, d, x.c_id)[0]
    ordered = _text(ordered)
    s.execute(_C_STOCK.sql, ordered, w)
    found, amount, items = s.rows(_C_DISPLAY.sql, ordered)[0]
    s.execute(_C_NEXT_ORDER_ID.sql, w, d)
    o_id = s.low.insert_id() - 1
    s.execute(_C_ORDER.sql, o_id, d, w, x.c_id, entry_d, x.ol_cnt, x.all_local)
    s.execute(_C_LINES.sql, o_id, d, w, d, ordered)
    s.execute(_C_NEW_ORDER.sql, o_id, d, w)
    if found < x.ol_cnt:
        s.rollback()
        raise Rollback(rollback_message(o_id, c_last, credit))
    s.commit()
    return (o_id, entry_d, c_last, credit, disc, w_tax, d_tax, x.ol_cnt, total(amount, disc, w_tax, d_tax), items)


def _text(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def parse_output(row) -> NewOrderOutput:
    """The output row (either mode) as the terminal's fields."""
    o_id, entry_d, c_last, credit, disc, w_tax, d_tax, ol_cnt, tot, items = row
    lines = []
    for part in _text(items).split(";"):
        n, sw, i, name, q, sq, bg, price, amount = part.split("|")
        lines.append(OutputLine(int(n), int(sw), int(i), name, int(q), int(sq), bg, Decimal(price), Decimal(amount)))
    return NewOrderOutput(int(o_id), entry_d, _text(c_last), _text(credit), Decimal(disc), Decimal(w_tax),
                          Decimal(d_tax), int(ol_cnt), Decimal(tot), lines)
