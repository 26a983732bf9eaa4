"""Order-Status (TPC-C clause 2.6): a customer's balance and latest order, read only.

Inputs (2.6.1.2): home warehouse; district uniform 1-10; in 60% the customer is
chosen by last name (NURand(255,0,999) syllables), else by id NURand(1023,1,3000).

Database work (2.6.2.2): read the customer (C_BALANCE, C_FIRST, C_MIDDLE,
C_LAST; by last name the one at position ceil(n/2) sorted by C_FIRST); read the
customer's order with the largest O_ID (O_ENTRY_D, O_CARRIER_ID); read every
ORDER-LINE of it (OL_I_ID, OL_SUPPLY_W_ID, OL_QUANTITY, OL_AMOUNT,
OL_DELIVERY_D).

Output (2.6.3.3), one row in both modes (the procedure's result set, or the
tuple ``run_statements`` returns): C_ID, C_FIRST, C_MIDDLE, C_LAST, C_BALANCE,
O_ID, O_ENTRY_D, O_CARRIER_ID and the lines as
OL_I_ID,OL_SUPPLY_W_ID,OL_QUANTITY,OL_AMOUNT,OL_DELIVERY_D joined by ';' (one
GROUP_CONCAT, the same statement in both modes).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.tpcc import sqltemplate as T
from tuner.tpcc.payment import middle
from tuner.tpcc.session import Session
from tuner.tpcc.terminal import Terminal

OP = "order_status"
PROCEDURE = "tpcc_order_status"

COUNT_BY_NAME = ("SELECT COUNT(*){into} FROM customer "
                 "WHERE c_w_id = {w_id} AND c_d_id = {d_id} AND c_last = {c_last}")
PICK_BY_NAME = ("SELECT c_id{into} FROM customer WHERE c_w_id = {w_id} AND c_d_id = {d_id} "
                "AND c_last = {c_last} ORDER BY c_first LIMIT {offset}, 1")
LIST_BY_NAME = ("SELECT c_id FROM customer WHERE c_w_id = {w_id} AND c_d_id = {d_id} "
                "AND c_last = {c_last} ORDER BY c_first")
SELECT_CUSTOMER = ("SELECT c_balance, c_first, c_middle, c_last{into} FROM customer "
                   "WHERE c_w_id = {w_id} AND c_d_id = {d_id} AND c_id = {c_id}")
SELECT_LAST_ORDER = ("SELECT o_id, o_entry_d, o_carrier_id{into} FROM orders "
                     "WHERE o_w_id = {w_id} AND o_d_id = {d_id} AND o_c_id = {c_id} ORDER BY o_id DESC LIMIT 1")
# The lines as one display string (a procedure variable cannot hold a row set; the client gets the same string).
SELECT_LINES = ("SELECT GROUP_CONCAT(CONCAT_WS(',', ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, "
                     "IFNULL(ol_delivery_d, '')) ORDER BY ol_number SEPARATOR ';'){into} FROM order_line "
                     "WHERE ol_w_id = {w_id} AND ol_d_id = {d_id} AND ol_o_id = {o_id}")

_VARS = {"w_id": "p_w_id", "d_id": "p_d_id", "c_id": "v_c_id", "c_last": "p_c_last", "offset": "v_offset",
         "o_id": "v_o_id"}

CREATE_PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE} (
  IN p_w_id INT, IN p_d_id INT, IN p_c_id INT, IN p_c_last VARCHAR(16))
BEGIN
  DECLARE v_c_id INT DEFAULT p_c_id;
  DECLARE v_offset INT;
  DECLARE v_c_balance DECIMAL(12,2);
  DECLARE v_c_first, v_c_last VARCHAR(16);
  DECLARE v_c_middle CHAR(2);
  DECLARE v_o_id, v_o_carrier_id INT;
  DECLARE v_o_entry_d DATETIME;
  DECLARE v_lines TEXT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION READ ONLY;
  IF p_c_id = 0 THEN
    {T.procedure(COUNT_BY_NAME, _VARS, ("v_offset",))};
    SET v_offset = GREATEST(CEIL(v_offset / 2) - 1, 0);
    {T.procedure(PICK_BY_NAME, _VARS, ("v_c_id",))};
  END IF;
  {T.procedure(SELECT_CUSTOMER, _VARS, ("v_c_balance", "v_c_first", "v_c_middle", "v_c_last"))};
  {T.procedure(SELECT_LAST_ORDER, _VARS, ("v_o_id", "v_o_entry_d", "v_o_carrier_id"))};
  {T.procedure(SELECT_LINES, _VARS, ("v_lines",))};
  COMMIT;
  SELECT v_c_id, v_c_first, v_c_middle, v_c_last, v_c_balance, v_o_id, v_o_entry_d, v_o_carrier_id, v_lines;
END"""

OUTPUT_FIELDS = ("c_id", "c_first", "c_middle", "c_last", "c_balance", "o_id", "o_entry_d", "o_carrier_id", "lines")

_C_BY_NAME = T.client(LIST_BY_NAME)
_C_CUSTOMER = T.client(SELECT_CUSTOMER)
_C_LAST_ORDER = T.client(SELECT_LAST_ORDER)
_C_LINES = T.client(SELECT_LINES)
CLIENT_STATEMENTS = (_C_BY_NAME, _C_CUSTOMER, _C_LAST_ORDER, _C_LINES)


@dataclass(slots=True)
class OrderStatusInput:
    w_id: int
    d_id: int
    c_id: int  # 0: by last name
    c_last: str


def make_input(t: Terminal) -> OrderStatusInput:
    d_id = t.uniform(1, 10)
    if t.uniform(1, 100) <= 60:  # 2.6.1.2
        return OrderStatusInput(t.w_id, d_id, 0, t.last_name())
    return OrderStatusInput(t.w_id, d_id, t.customer_id(), "")


def call_sql(x: OrderStatusInput) -> bytes:
    return f"CALL {PROCEDURE}({x.w_id},{x.d_id},{x.c_id},'{x.c_last}')".encode()


def run_statements(s: Session, x: OrderStatusInput) -> tuple:
    """The procedure's statements, prepared on the client; returns the output row (OUTPUT_FIELDS)."""
    w, d = x.w_id, x.d_id
    c_id = x.c_id or middle(s.rows(_C_BY_NAME.sql, w, d, x.c_last))
    customer = s.rows(_C_CUSTOMER.sql, w, d, c_id)[0]
    order = s.rows(_C_LAST_ORDER.sql, w, d, c_id)
    o_id, entry_d, carrier, lines = None, None, None, None
    if order:
        o_id, entry_d, carrier = order[0]
        lines = s.rows(_C_LINES.sql, w, d, o_id)[0][0]
    s.commit()
    return (c_id, *customer[1:4], customer[0], o_id, entry_d, carrier, lines)
