"""Delivery (TPC-C clause 2.7): deliver the oldest undelivered order of each of the 10 districts.

Inputs (2.7.1.2): home warehouse; O_CARRIER_ID uniform 1-10.  Run as one
database transaction for all 10 districts (2.7.4.2 allows it; HammerDB and
go-tpc do the same), not deferred.

Database work (2.7.4.2), per district: the NEW-ORDER row with the lowest
NO_O_ID (a district without one is skipped); delete it; read O_C_ID and set
O_CARRIER_ID; set OL_DELIVERY_D of its lines to now and sum OL_AMOUNT;
C_BALANCE += the sum and C_DELIVERY_CNT += 1.

Clause 2.7.4.2 asks for the skipped districts to be reported, not stored: the transaction returns how
many it skipped (the procedure as its one result row, after COMMIT; the statements as their output) and the
driver counts them (``delivery_skipped_districts`` in the run's result).  No row is written for it: a
counter row written inside the transaction is a row every skipping Delivery of a warehouse locks.

The NEW-ORDER row is read with FOR UPDATE: with a plain (snapshot) read, two
concurrent Deliveries of one warehouse can pick the same order and credit the
customer twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.tpcc import sqltemplate as T
from tuner.tpcc.session import Session
from tuner.tpcc.terminal import DISTRICTS_PER_W, Terminal

OP = "delivery"
PROCEDURE = "tpcc_delivery"

SELECT_OLDEST = ("SELECT no_o_id{into} FROM new_order WHERE no_w_id = {w_id} AND no_d_id = {d_id} "
                 "ORDER BY no_o_id LIMIT 1 FOR UPDATE")
DELETE_NEW_ORDER = "DELETE FROM new_order WHERE no_w_id = {w_id} AND no_d_id = {d_id} AND no_o_id = {o_id}"
# 2.7.4.2: set O_CARRIER_ID and read O_C_ID in one statement: O_C_ID is unchanged and comes back through
# LAST_INSERT_ID(expr) (see new_order.NEXT_ORDER_ID).
UPDATE_ORDER = ("UPDATE orders SET o_carrier_id = {carrier_id}, o_c_id = LAST_INSERT_ID(o_c_id) "
                "WHERE o_w_id = {w_id} AND o_d_id = {d_id} AND o_id = {o_id}")
UPDATE_LINES = ("UPDATE order_line SET ol_delivery_d = NOW() "
                "WHERE ol_w_id = {w_id} AND ol_d_id = {d_id} AND ol_o_id = {o_id}")
SUM_LINES = ("SELECT SUM(ol_amount){into} FROM order_line "
             "WHERE ol_w_id = {w_id} AND ol_d_id = {d_id} AND ol_o_id = {o_id}")
UPDATE_CUSTOMER = ("UPDATE customer SET c_balance = c_balance + {total}, c_delivery_cnt = c_delivery_cnt + 1 "
                   "WHERE c_w_id = {w_id} AND c_d_id = {d_id} AND c_id = {c_id}")

_VARS = {"w_id": "p_w_id", "d_id": "v_d_id", "o_id": "v_o_id", "carrier_id": "p_carrier_id", "c_id": "v_c_id",
         "total": "v_total"}

CREATE_PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE} (IN p_w_id INT, IN p_carrier_id INT)
BEGIN
  DECLARE v_d_id INT DEFAULT 1;
  DECLARE v_o_id, v_c_id INT;
  DECLARE v_total DECIMAL(12,2);
  DECLARE v_skipped INT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_o_id = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  WHILE v_d_id <= {DISTRICTS_PER_W} DO
    SET v_o_id = NULL;
    {T.procedure(SELECT_OLDEST, _VARS, ("v_o_id",))};
    IF v_o_id IS NOT NULL THEN
      {T.procedure(DELETE_NEW_ORDER, _VARS)};
      {T.procedure(UPDATE_ORDER, _VARS)};
      SET v_c_id = LAST_INSERT_ID();
      {T.procedure(UPDATE_LINES, _VARS)};
      {T.procedure(SUM_LINES, _VARS, ("v_total",))};
      {T.procedure(UPDATE_CUSTOMER, _VARS)};
    ELSE
      SET v_skipped = v_skipped + 1;
    END IF;
    SET v_d_id = v_d_id + 1;
  END WHILE;
  COMMIT;
  SELECT v_skipped;
END"""

_C_OLDEST = T.client(SELECT_OLDEST)
_C_DELETE = T.client(DELETE_NEW_ORDER)
_C_UPD_ORDER = T.client(UPDATE_ORDER)
_C_UPD_LINES = T.client(UPDATE_LINES)
_C_SUM = T.client(SUM_LINES)
_C_UPD_CUSTOMER = T.client(UPDATE_CUSTOMER)
CLIENT_STATEMENTS = (_C_OLDEST, _C_DELETE, _C_UPD_ORDER, _C_UPD_LINES, _C_SUM, _C_UPD_CUSTOMER)


@dataclass(slots=True)
class DeliveryInput:
    w_id: int
    carrier_id: int


def make_input(t: Terminal) -> DeliveryInput:
    return DeliveryInput(t.w_id, t.uniform(1, 10))


def call_sql(x: DeliveryInput) -> bytes:
    return f"CALL {PROCEDURE}({x.w_id},{x.carrier_id})".encode()


def call(s: Session, x: DeliveryInput) -> int:
    """Run the procedure; return the districts it skipped."""
    sets = s.call_rows(call_sql(x))
    return int(sets[0][0][0])


def run_statements(s: Session, x: DeliveryInput) -> int:
    """Run the transaction as statements; return the districts it skipped."""
    w = x.w_id
    skipped = 0
    for d in range(1, DISTRICTS_PER_W + 1):
        oldest = s.rows(_C_OLDEST.sql, w, d)
        if not oldest:  # 2.7.4.2: no undelivered order in this district: skipped
            skipped += 1
            continue
        o_id = oldest[0][0]
        s.execute(_C_DELETE.sql, w, d, o_id)
        s.execute(_C_UPD_ORDER.sql, x.carrier_id, w, d, o_id)
        c_id = s.low.insert_id()
        s.execute(_C_UPD_LINES.sql, w, d, o_id)
        total = s.rows(_C_SUM.sql, w, d, o_id)[0][0]
        s.execute(_C_UPD_CUSTOMER.sql, total, w, d, c_id)
    s.commit()
    return skipped
