"""Stock-Level (TPC-C clause 2.8): how many recently sold items are low on stock, read only.

Inputs (2.8.1.2): the terminal's own warehouse and district (fixed per terminal,
2.8.1.1); threshold uniform 10-20.

Database work (2.8.2.2): read D_NEXT_O_ID; count the distinct items of the
order lines of the last 20 orders (O_ID from D_NEXT_O_ID-20 to D_NEXT_O_ID-1)
whose stock in the home warehouse is below the threshold.

Output (2.8.3.3), one row in both modes: W_ID, D_ID, the threshold and the
low-stock count.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.tpcc import sqltemplate as T
from tuner.tpcc.session import Session
from tuner.tpcc.terminal import Terminal

OP = "stock_level"
PROCEDURE = "tpcc_stock_level"

SELECT_NEXT_O_ID = "SELECT d_next_o_id{into} FROM district WHERE d_w_id = {w_id} AND d_id = {d_id}"
# the order lines first, each stock row by primary key (forced, as New-Order's: tuner/tpcc/new_order.LINE_ROWS)
COUNT_LOW_STOCK = ("SELECT COUNT(DISTINCT s_i_id){into} FROM order_line STRAIGHT_JOIN stock FORCE INDEX (PRIMARY) "
                   "WHERE ol_w_id = {w_id} AND ol_d_id = {d_id} AND ol_o_id < {next_o_id} "
                   "AND ol_o_id >= {next_o_id} - 20 AND s_w_id = {w_id} AND s_i_id = ol_i_id "
                   "AND s_quantity < {threshold}")

_VARS = {"w_id": "p_w_id", "d_id": "p_d_id", "threshold": "p_threshold", "next_o_id": "v_next_o_id"}

CREATE_PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE} (IN p_w_id INT, IN p_d_id INT, IN p_threshold INT)
BEGIN
  DECLARE v_next_o_id, v_low_stock INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION READ ONLY;
  {T.procedure(SELECT_NEXT_O_ID, _VARS, ("v_next_o_id",))};
  {T.procedure(COUNT_LOW_STOCK, _VARS, ("v_low_stock",))};
  COMMIT;
  SELECT p_w_id, p_d_id, p_threshold, v_low_stock;
END"""

OUTPUT_FIELDS = ("w_id", "d_id", "threshold", "low_stock")

_C_NEXT = T.client(SELECT_NEXT_O_ID)
_C_COUNT = T.client(COUNT_LOW_STOCK)
CLIENT_STATEMENTS = (_C_NEXT, _C_COUNT)


@dataclass(slots=True)
class StockLevelInput:
    w_id: int
    d_id: int
    threshold: int


def make_input(t: Terminal) -> StockLevelInput:
    return StockLevelInput(t.w_id, t.d_id, t.uniform(10, 20))


def call_sql(x: StockLevelInput) -> bytes:
    return f"CALL {PROCEDURE}({x.w_id},{x.d_id},{x.threshold})".encode()


def run_statements(s: Session, x: StockLevelInput) -> tuple:
    """The procedure's statements, prepared on the client; returns the output row (OUTPUT_FIELDS)."""
    w, d = x.w_id, x.d_id
    next_o_id = s.rows(_C_NEXT.sql, w, d)[0][0]
    low = s.rows(_C_COUNT.sql, w, d, next_o_id, next_o_id, w, x.threshold)[0][0]
    s.commit()
    return (w, d, x.threshold, low)
