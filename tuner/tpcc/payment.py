"""Payment (TPC-C clause 2.5): a customer pays; warehouse, district and customer balances move.

Inputs (2.5.1.2): home warehouse; district uniform 1-10; in 85% the customer is
in the home warehouse and district, in 15% in another warehouse (uniform) and a
uniform district; in 60% the customer is chosen by last name (NURand(255,0,999)
syllables), else by id NURand(1023,1,3000); H_AMOUNT uniform 1.00-5000.00.

Database work (2.5.2.2): read the warehouse and district (name, address);
W_YTD and D_YTD += H_AMOUNT; by last name, take the customer at position
ceil(n/2) of those with that last name sorted by C_FIRST; C_BALANCE -= H_AMOUNT,
C_YTD_PAYMENT += H_AMOUNT, C_PAYMENT_CNT += 1; for a bad-credit ('BC') customer
C_DATA gets C_ID, C_D_ID, C_W_ID, D_ID, W_ID and H_AMOUNT put in front, truncated
to 500 characters; insert a HISTORY row with H_DATA = W_NAME + 4 spaces + D_NAME.

The warehouse and district rows are the hottest rows of the benchmark (every
Payment of a warehouse updates the same W_YTD), so their updates come last,
just before COMMIT: the row locks are held for the shortest time.  The results
are those of the clause's order of steps.

Output (2.5.3.3), one row -- the procedure's result set, or the tuple
``run_statements`` returns (``OUTPUT_FIELDS`` names the columns): the ids,
H_AMOUNT, H_DATE, the warehouse's and district's addresses, the customer's name,
address, phone, C_SINCE, C_CREDIT, C_CREDIT_LIM, C_DISCOUNT, the new C_BALANCE,
and for a bad-credit customer the first 200 characters of the new C_DATA.  The
customer row is read FOR UPDATE (it is updated next anyway), so the balance shown
is exact under concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from tuner.tpcc import sqltemplate as T
from tuner.tpcc.session import Session
from tuner.tpcc.terminal import Terminal

OP = "payment"
PROCEDURE = "tpcc_payment"

# 2.5.2.2: the warehouse's and the district's name and address, read in one statement.
SELECT_WAREHOUSE_DISTRICT = ("SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip, "
                             "d_name, d_street_1, d_street_2, d_city, d_state, d_zip, NOW(){into} "
                             "FROM warehouse, district "
                             "WHERE w_id = {w_id} AND d_w_id = {w_id} AND d_id = {d_id}")
# 2.5.2.2: by last name: the customers sorted by first name; take position ceil(n/2).
COUNT_BY_NAME = ("SELECT COUNT(*){into} FROM customer "
                 "WHERE c_w_id = {c_w_id} AND c_d_id = {c_d_id} AND c_last = {c_last}")
PICK_BY_NAME = ("SELECT c_id{into} FROM customer WHERE c_w_id = {c_w_id} AND c_d_id = {c_d_id} "
                "AND c_last = {c_last} ORDER BY c_first LIMIT {offset}, 1")
LIST_BY_NAME = ("SELECT c_id FROM customer WHERE c_w_id = {c_w_id} AND c_d_id = {c_d_id} "
                "AND c_last = {c_last} ORDER BY c_first")
SELECT_CUSTOMER = ("SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, "
                   "c_since, c_credit, c_credit_lim, c_discount, c_balance, "
                   "IF(c_credit = 'BC', LEFT(c_data, 200), NULL){into} FROM customer "
                   "WHERE c_w_id = {c_w_id} AND c_d_id = {c_d_id} AND c_id = {c_id} FOR UPDATE")
UPDATE_CUSTOMER = (
    "UPDATE customer SET c_balance = c_balance - {h_amount}, c_ytd_payment = c_ytd_payment + {h_amount}, "
    "c_payment_cnt = c_payment_cnt + 1, "
    "c_data = IF(c_credit = 'BC', LEFT(CONCAT_WS(' ', {c_id}, {c_d_id}, {c_w_id}, {d_id}, {w_id}, {h_amount}, "
    "c_data), 500), c_data) "
    "WHERE c_w_id = {c_w_id} AND c_d_id = {c_d_id} AND c_id = {c_id}")
INSERT_HISTORY = ("INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) "
                  "VALUES ({c_id}, {c_d_id}, {c_w_id}, {d_id}, {w_id}, {h_date}, {h_amount}, "
                  "CONCAT({w_name}, '    ', {d_name}))")
UPDATE_DISTRICT = "UPDATE district SET d_ytd = d_ytd + {h_amount} WHERE d_w_id = {w_id} AND d_id = {d_id}"
UPDATE_WAREHOUSE = "UPDATE warehouse SET w_ytd = w_ytd + {h_amount} WHERE w_id = {w_id}"

_VARS = {"w_id": "p_w_id", "d_id": "p_d_id", "c_w_id": "p_c_w_id", "c_d_id": "p_c_d_id", "c_id": "v_c_id",
         "c_last": "p_c_last", "h_amount": "p_h_amount", "offset": "v_offset", "w_name": "v_w_name",
         "d_name": "v_d_name", "h_date": "v_h_date"}
_ADDR = ("v_street_1", "v_street_2", "v_city", "v_state", "v_zip")
_D_ADDR = ("v_d_street_1", "v_d_street_2", "v_d_city", "v_d_state", "v_d_zip")

CREATE_PROCEDURE = f"""CREATE PROCEDURE {PROCEDURE} (
  IN p_w_id INT, IN p_d_id INT, IN p_c_w_id INT, IN p_c_d_id INT, IN p_c_id INT, IN p_c_last VARCHAR(16),
  IN p_h_amount DECIMAL(6,2))
BEGIN
  DECLARE v_c_id INT DEFAULT p_c_id;
  DECLARE v_offset INT;
  DECLARE v_w_name, v_d_name VARCHAR(10);
  DECLARE v_street_1, v_street_2, v_city, v_d_street_1, v_d_street_2, v_d_city VARCHAR(20);
  DECLARE v_state, v_d_state CHAR(2);
  DECLARE v_zip, v_d_zip CHAR(9);
  DECLARE v_c_first, v_c_last VARCHAR(16);
  DECLARE v_c_middle, v_c_credit CHAR(2);
  DECLARE v_c_street_1, v_c_street_2, v_c_city VARCHAR(20);
  DECLARE v_c_state CHAR(2);
  DECLARE v_c_zip CHAR(9);
  DECLARE v_c_phone CHAR(16);
  DECLARE v_c_since DATETIME;
  DECLARE v_c_credit_lim, v_c_balance DECIMAL(12,2);
  DECLARE v_c_discount DECIMAL(4,4);
  DECLARE v_c_data VARCHAR(200);
  DECLARE v_h_date DATETIME;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  {T.procedure(SELECT_WAREHOUSE_DISTRICT, _VARS, ("v_w_name",) + _ADDR + ("v_d_name",) + _D_ADDR + ("v_h_date",))};
  IF p_c_id = 0 THEN
    {T.procedure(COUNT_BY_NAME, _VARS, ("v_offset",))};
    SET v_offset = GREATEST(CEIL(v_offset / 2) - 1, 0);
    {T.procedure(PICK_BY_NAME, _VARS, ("v_c_id",))};
  END IF;
  {T.procedure(SELECT_CUSTOMER, _VARS, ("v_c_first", "v_c_middle", "v_c_last", "v_c_street_1", "v_c_street_2",
                                        "v_c_city", "v_c_state", "v_c_zip", "v_c_phone", "v_c_since", "v_c_credit",
                                        "v_c_credit_lim", "v_c_discount", "v_c_balance", "v_c_data"))};
  {T.procedure(UPDATE_CUSTOMER, _VARS)};
  {T.procedure(INSERT_HISTORY, _VARS)};
  {T.procedure(UPDATE_DISTRICT, _VARS)};
  {T.procedure(UPDATE_WAREHOUSE, _VARS)};
  COMMIT;
  SELECT p_w_id, p_d_id, v_c_id, p_c_d_id, p_c_w_id, p_h_amount, v_h_date, {", ".join(_ADDR)}, {", ".join(_D_ADDR)},
         v_c_first, v_c_middle, v_c_last, v_c_street_1, v_c_street_2, v_c_city, v_c_state, v_c_zip, v_c_phone,
         v_c_since, v_c_credit, v_c_credit_lim, v_c_discount, v_c_balance - p_h_amount,
         IF(v_c_credit = 'BC', LEFT(CONCAT_WS(' ', v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, p_h_amount, v_c_data),
            200), NULL);
END"""

# The output row's columns (2.5.3.3), in order, for both modes.
OUTPUT_FIELDS = ("w_id", "d_id", "c_id", "c_d_id", "c_w_id", "h_amount", "h_date", "w_street_1", "w_street_2",
                 "w_city", "w_state", "w_zip", "d_street_1", "d_street_2", "d_city", "d_state", "d_zip", "c_first",
                 "c_middle", "c_last", "c_street_1", "c_street_2", "c_city", "c_state", "c_zip", "c_phone",
                 "c_since", "c_credit", "c_credit_lim", "c_discount", "c_balance", "c_data")

_C_WAREHOUSE_DISTRICT = T.client(SELECT_WAREHOUSE_DISTRICT)
_C_BY_NAME = T.client(LIST_BY_NAME)
_C_CUSTOMER = T.client(SELECT_CUSTOMER)
_C_UPD_CUSTOMER = T.client(UPDATE_CUSTOMER)
_C_HISTORY = T.client(INSERT_HISTORY)
_C_UPD_DISTRICT = T.client(UPDATE_DISTRICT)
_C_UPD_WAREHOUSE = T.client(UPDATE_WAREHOUSE)
CLIENT_STATEMENTS = (_C_WAREHOUSE_DISTRICT, _C_BY_NAME, _C_CUSTOMER, _C_UPD_CUSTOMER, _C_HISTORY,
                     _C_UPD_DISTRICT, _C_UPD_WAREHOUSE)


@dataclass(slots=True)
class PaymentInput:
    w_id: int
    d_id: int
    c_w_id: int
    c_d_id: int
    c_id: int  # 0: choose by last name
    c_last: str
    h_amount: str  # decimal text, e.g. "1234.56"


def make_input(t: Terminal) -> PaymentInput:
    u = t.uniform
    d_id = u(1, 10)
    if t.warehouses > 1 and u(1, 100) <= 15:  # 2.5.1.2: 15% remote customer
        c_w_id, c_d_id = t.other_warehouse(), u(1, 10)
    else:
        c_w_id, c_d_id = t.w_id, d_id
    if u(1, 100) <= 60:  # 2.5.1.2: 60% by last name
        c_id, c_last = 0, t.last_name()
    else:
        c_id, c_last = t.customer_id(), ""
    cents = u(100, 500000)
    return PaymentInput(t.w_id, d_id, c_w_id, c_d_id, c_id, c_last, f"{cents // 100}.{cents % 100:02d}")


def call_sql(x: PaymentInput) -> bytes:
    return (f"CALL {PROCEDURE}({x.w_id},{x.d_id},{x.c_w_id},{x.c_d_id},{x.c_id},'{x.c_last}',{x.h_amount})"
            ).encode()


def middle(ids: list) -> int:
    """2.5.2.2 / 2.6.2.2: the customer at position ceil(n/2) (1-based) of those sorted by C_FIRST."""
    return ids[max((len(ids) + 1) // 2 - 1, 0)][0]


def run_statements(s: Session, x: PaymentInput) -> tuple:
    """The procedure's statements, prepared on the client; returns the output row (OUTPUT_FIELDS)."""
    w, d, cw, cd, amount = x.w_id, x.d_id, x.c_w_id, x.c_d_id, x.h_amount
    wd = s.rows(_C_WAREHOUSE_DISTRICT.sql, w, w, d)[0]
    w_name, d_name, h_date = wd[0], wd[6], wd[12]
    c_id = x.c_id or middle(s.rows(_C_BY_NAME.sql, cw, cd, x.c_last))
    c = s.rows(_C_CUSTOMER.sql, cw, cd, c_id)[0]
    s.execute(_C_UPD_CUSTOMER.sql, amount, amount, c_id, cd, cw, d, w, amount, cw, cd, c_id)
    s.execute(_C_HISTORY.sql, c_id, cd, cw, d, w, h_date, amount, w_name, d_name)
    s.execute(_C_UPD_DISTRICT.sql, amount, w, d)
    s.execute(_C_UPD_WAREHOUSE.sql, amount, w)
    s.commit()
    c_data = None
    if c[10] == "BC":
        c_data = " ".join((str(c_id), str(cd), str(cw), str(d), str(w), amount, c[14] or ""))[:200]
    return (w, d, c_id, cd, cw, Decimal(amount), h_date, *wd[1:6], *wd[7:12], *c[:13], c[13] - Decimal(amount),
            c_data)
