"""TPC-C consistency checks, keyed by specification clause.

Clause 3.3.2 (TPC-C v5.11) lists twelve consistency conditions; every one that holds
at any time is checked here (1-10 and 12).  Condition 11 (count(ORDER) -
count(NEW-ORDER) = 2100 a district) only holds until the first Delivery, so it is
checked with the initial-state checks, which the loader runs once after loading:
the population rules of clause 4.3.3.1 (initial values, ranges, string lengths,
last names, 10% ORIGINAL, the O_C_ID permutation).

Each check is one SQL query that selects the offending rows; a check passes when
it selects none.  ``run_checks`` reports the first few offending rows of each
failed check and how many there are.  Peers check the same way: go-tpc
``tpcc/check.go`` (conditions 1-4), sysbench-tpcc ``tpcc_check.lua`` (1-5, 7-10, 12),
HammerDB ``checkschema`` (1-4).
"""

from __future__ import annotations

import datetime
import decimal
import time
from dataclasses import dataclass, field
from typing import Any

from tuner.core.errors import WorkloadError
from tuner.core.server import ConnectionSpec
from tuner.tpcc import schema
from tuner.tpcc.rand import SYLLABLES

D = schema.DISTRICTS_PER_W
FIRST_NO = schema.FIRST_NEW_ORDER


@dataclass(frozen=True)
class Check:
    clause: str
    description: str
    sql: str  # selects the offending rows
    initial_only: bool = False  # holds only for a freshly loaded database
    needs_lines: bool = False  # reads the per-order sums of ORDER-LINE (CREATE_LINES)
    needs_money: bool = False  # reads the per-customer sums (CREATE_MONEY, made from the per-order sums)
    # at load time this condition follows from initial-state checks that are run (see IMPLIED_AT_LOAD)
    implied_at_load: bool = False


@dataclass
class CheckResult:
    clause: str
    description: str
    passed: bool
    offending: list[dict[str, Any]] = field(default_factory=list)  # the first few rows
    offending_count: int = 0
    error: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"clause": self.clause, "description": self.description, "passed": self.passed,
                "offending": self.offending, "offending_count": self.offending_count, "error": self.error,
                "seconds": round(self.seconds, 3)}


@dataclass
class CheckReport:
    database: str
    results: list[CheckResult]
    seconds: float = 0.0
    initial: bool = False

    @property
    def ok(self) -> bool:
        return all(r.passed for r in self.results)

    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]

    def verdict(self, known: dict[str, str] | None = None) -> tuple[bool, str]:
        """(all passed, one line): the failed conditions, naming ``known`` deviations (condition -> why)."""
        failed = [f"{c.clause} {c.description} ({c.error or c.offending_count})" for c in self.failed()]
        if not failed:
            return True, f"{len(self.results)} conditions passed"
        named = sorted({known[c.clause] for c in self.failed() if c.clause in (known or {})})
        return False, "failed: " + "; ".join(failed) + (f" (known: {'; '.join(named)})" if named else "")

    def result(self, clause: str) -> CheckResult:
        for r in self.results:
            if r.clause == clause:
                return r
        raise KeyError(clause)

    def to_dict(self) -> dict[str, Any]:
        return {"database": self.database, "ok": self.ok, "initial": self.initial,
                "seconds": round(self.seconds, 3), "results": [r.to_dict() for r in self.results]}


# ---------------------------------------------------------------------------
# Clause 3.3.2: consistency conditions

COND_1 = """
SELECT w.w_id, w.w_ytd, d.sum_d_ytd
FROM warehouse w LEFT JOIN (SELECT d_w_id, SUM(d_ytd) AS sum_d_ytd FROM district GROUP BY d_w_id) d
  ON d.d_w_id = w.w_id
WHERE d.sum_d_ytd IS NULL OR w.w_ytd <> d.sum_d_ytd
ORDER BY w.w_id"""

COND_2 = """
SELECT d_w_id, d_id, d_next_o_id, max_o_id, max_no_o_id FROM (
  SELECT d_w_id, d_id, d_next_o_id,
         (SELECT MAX(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id) AS max_o_id,
         (SELECT MAX(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id) AS max_no_o_id
  FROM district) t
WHERE d_next_o_id - 1 <> COALESCE(max_o_id, 0)
   OR (max_no_o_id IS NOT NULL AND max_no_o_id <> d_next_o_id - 1)
ORDER BY d_w_id, d_id"""

COND_3 = """
SELECT no_w_id, no_d_id, MIN(no_o_id) AS min_no_o_id, MAX(no_o_id) AS max_no_o_id, COUNT(*) AS new_orders
FROM new_order GROUP BY no_w_id, no_d_id
HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)
ORDER BY no_w_id, no_d_id"""

# ORDER-LINE is the largest table (ten rows an order): it is read once a run, into a temporary table of
# per-order sums that conditions 4, 6, 7, 10 and 12 read (each scanned it again before: 60% of a W=1 check).
LINES_TABLE = "tpcc_check_lines"
CREATE_LINES = f"""
CREATE TEMPORARY TABLE {LINES_TABLE} (PRIMARY KEY (l_w_id, l_d_id, l_o_id)) AS
SELECT ol_w_id AS l_w_id, ol_d_id AS l_d_id, ol_o_id AS l_o_id, COUNT(*) AS order_lines,
       SUM(ol_delivery_d IS NULL) AS undelivered, SUM(IF(ol_delivery_d IS NULL, 0, ol_amount)) AS delivered
FROM order_line GROUP BY ol_w_id, ol_d_id, ol_o_id"""
DROP_LINES = f"DROP TEMPORARY TABLE IF EXISTS {LINES_TABLE}"

COND_4 = f"""
SELECT o.w_id, o.d_id, o.sum_o_ol_cnt, COALESCE(l.order_lines, 0) AS order_lines
FROM (SELECT o_w_id AS w_id, o_d_id AS d_id, SUM(o_ol_cnt) AS sum_o_ol_cnt FROM orders
      GROUP BY o_w_id, o_d_id) o
LEFT JOIN (SELECT l_w_id, l_d_id, CAST(SUM(order_lines) AS SIGNED) AS order_lines FROM {LINES_TABLE}
           GROUP BY l_w_id, l_d_id) l ON l.l_w_id = o.w_id AND l.l_d_id = o.d_id
WHERE o.sum_o_ol_cnt <> COALESCE(l.order_lines, 0)
ORDER BY o.w_id, o.d_id"""

COND_5 = """
SELECT o_w_id, o_d_id, o_id, o_carrier_id, no_o_id
FROM orders LEFT JOIN new_order ON no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id
WHERE (o_carrier_id IS NULL) <> (no_o_id IS NOT NULL)
ORDER BY o_w_id, o_d_id, o_id"""

COND_6 = f"""
SELECT o_w_id, o_d_id, o_id, o_ol_cnt, COALESCE(l.order_lines, 0) AS order_lines
FROM orders o
LEFT JOIN {LINES_TABLE} l ON l.l_w_id = o.o_w_id AND l.l_d_id = o.o_d_id AND l.l_o_id = o.o_id
WHERE o.o_ol_cnt <> COALESCE(l.order_lines, 0)
ORDER BY o_w_id, o_d_id, o_id"""

# the offending order lines, read only for the orders whose per-order sums show one: an order has a line whose
# OL_DELIVERY_D nullness differs from its O_CARRIER_ID's exactly when not all (carrier null) or some (carrier
# set) of its lines are undelivered
COND_7 = f"""
SELECT ol_w_id, ol_d_id, ol_o_id, ol_number, ol_delivery_d, o_carrier_id
FROM (SELECT o_w_id, o_d_id, o_id, o_carrier_id FROM orders
      JOIN {LINES_TABLE} l ON l.l_w_id = o_w_id AND l.l_d_id = o_d_id AND l.l_o_id = o_id
      WHERE IF(o_carrier_id IS NULL, l.undelivered <> l.order_lines, l.undelivered <> 0)) bad
JOIN order_line ON ol_w_id = bad.o_w_id AND ol_d_id = bad.o_d_id AND ol_o_id = bad.o_id
WHERE (ol_delivery_d IS NULL) <> (o_carrier_id IS NULL)
ORDER BY ol_w_id, ol_d_id, ol_o_id, ol_number"""

COND_8 = """
SELECT w_id, w_ytd, h.sum_h_amount
FROM warehouse LEFT JOIN (SELECT h_w_id, SUM(h_amount) AS sum_h_amount FROM history GROUP BY h_w_id) h
  ON h.h_w_id = w_id
WHERE w_ytd <> COALESCE(h.sum_h_amount, 0)
ORDER BY w_id"""

COND_9 = """
SELECT d_w_id, d_id, d_ytd, h.sum_h_amount
FROM district LEFT JOIN (SELECT h_w_id, h_d_id, SUM(h_amount) AS sum_h_amount FROM history
                         GROUP BY h_w_id, h_d_id) h
  ON h.h_w_id = d_w_id AND h.h_d_id = d_id
WHERE d_ytd <> COALESCE(h.sum_h_amount, 0)
ORDER BY d_w_id, d_id"""

# Per customer: C_BALANCE and C_YTD_PAYMENT from CUSTOMER, sum(OL_AMOUNT) of the delivered order lines
# of the customer's orders, sum(H_AMOUNT) of the customer's HISTORY rows.  Computed once a run into a
# temporary table that conditions 10 and 12 both read: the per-order sums (LINES_TABLE) joined to their
# orders, then everything is grouped per customer from a UNION ALL (joining grouped derived tables made
# the server re-scan them: 80 s for one warehouse).
MONEY_TABLE = "tpcc_check_money"
CREATE_MONEY = f"""
CREATE TEMPORARY TABLE {MONEY_TABLE} AS
SELECT w_id, d_id, c_id, SUM(balance) AS c_balance, SUM(ytd_payment) AS c_ytd_payment,
       SUM(delivered) AS delivered, SUM(paid) AS paid, SUM(is_customer) AS customer_rows
FROM (SELECT c_w_id AS w_id, c_d_id AS d_id, c_id, c_balance AS balance, c_ytd_payment AS ytd_payment,
             0 AS delivered, 0 AS paid, 1 AS is_customer FROM customer
      UNION ALL
      SELECT o_w_id, o_d_id, o_c_id, 0, 0, l.delivered, 0, 0
      FROM {LINES_TABLE} l JOIN orders ON o_w_id = l.l_w_id AND o_d_id = l.l_d_id AND o_id = l.l_o_id
      UNION ALL
      SELECT h_c_w_id, h_c_d_id, h_c_id, 0, 0, 0, h_amount, 0 FROM history) money
GROUP BY w_id, d_id, c_id"""
DROP_MONEY = f"DROP TEMPORARY TABLE IF EXISTS {MONEY_TABLE}"

COND_10 = f"""
SELECT w_id AS c_w_id, d_id AS c_d_id, c_id, c_balance, delivered, paid FROM {MONEY_TABLE}
WHERE customer_rows <> 1 OR c_balance <> delivered - paid
ORDER BY w_id, d_id, c_id"""

COND_11 = f"""
SELECT o.w_id, o.d_id, o.orders, COALESCE(n.new_orders, 0) AS new_orders
FROM (SELECT o_w_id AS w_id, o_d_id AS d_id, COUNT(*) AS orders FROM orders GROUP BY o_w_id, o_d_id) o
LEFT JOIN (SELECT no_w_id AS w_id, no_d_id AS d_id, COUNT(*) AS new_orders FROM new_order
           GROUP BY no_w_id, no_d_id) n ON n.w_id = o.w_id AND n.d_id = o.d_id
WHERE o.orders - COALESCE(n.new_orders, 0) <> {FIRST_NO - 1}
ORDER BY o.w_id, o.d_id"""

COND_12 = f"""
SELECT w_id AS c_w_id, d_id AS c_d_id, c_id, c_balance, c_ytd_payment, delivered FROM {MONEY_TABLE}
WHERE customer_rows <> 1 OR c_balance + c_ytd_payment <> delivered
ORDER BY w_id, d_id, c_id"""

# ---------------------------------------------------------------------------
# Clause 4.3.3.1: the initial population (checked once, right after a load)


def _syllable_sql(expr: str) -> str:
    return "ELT(" + expr + " + 1, " + ", ".join(f"'{s}'" for s in SYLLABLES) + ")"


LAST_NAME_OF_C_ID = ("CONCAT(" + _syllable_sql("(c_id - 1) DIV 100") + ", "
                      + _syllable_sql("((c_id - 1) DIV 10) % 10") + ", " + _syllable_sql("(c_id - 1) % 10") + ")")
# any three syllables: exactly the 1000 names of clause 4.3.2.3
SYLLABLES_REGEXP = "^(" + "|".join(SYLLABLES) + "){3}$"

INIT_TOTALS = f"""
SELECT 'warehouse' AS tbl, w_id AS w_id, NULL AS d_id, w_ytd AS ytd, NULL AS d_next_o_id FROM warehouse
WHERE w_ytd <> 300000.00 OR w_tax NOT BETWEEN 0 AND 0.2
UNION ALL
SELECT 'district', d_w_id, d_id, d_ytd, d_next_o_id FROM district
WHERE d_ytd <> 30000.00 OR d_next_o_id <> {schema.ORDERS_PER_D + 1} OR d_tax NOT BETWEEN 0 AND 0.2
ORDER BY 1, 2, 3"""

INIT_ORDERS = f"""
SELECT o_w_id, o_d_id, o_id, o_c_id, o_carrier_id, o_ol_cnt, o_all_local FROM orders
WHERE (o_id < {FIRST_NO} AND (o_carrier_id IS NULL OR o_carrier_id NOT BETWEEN 1 AND 10))
   OR (o_id >= {FIRST_NO} AND o_carrier_id IS NOT NULL)
   OR o_ol_cnt NOT BETWEEN {schema.MIN_OL_CNT} AND {schema.MAX_OL_CNT} OR o_all_local <> 1
   OR o_id NOT BETWEEN 1 AND {schema.ORDERS_PER_D}
ORDER BY o_w_id, o_d_id, o_id"""

INIT_PERMUTATION = f"""
SELECT o_w_id, o_d_id, COUNT(DISTINCT o_c_id) AS distinct_customers, MIN(o_c_id) AS min_c_id,
       MAX(o_c_id) AS max_c_id
FROM orders GROUP BY o_w_id, o_d_id
HAVING COUNT(DISTINCT o_c_id) <> {schema.CUSTOMERS_PER_D} OR MIN(o_c_id) <> 1
    OR MAX(o_c_id) <> {schema.CUSTOMERS_PER_D}
ORDER BY o_w_id, o_d_id"""

INIT_NEW_ORDER = f"""
SELECT no_w_id, no_d_id, no_o_id FROM new_order
WHERE no_o_id NOT BETWEEN {FIRST_NO} AND {schema.ORDERS_PER_D}
ORDER BY no_w_id, no_d_id, no_o_id"""

INIT_ORDER_LINE = f"""
SELECT ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount,
       LENGTH(ol_dist_info) AS dist_info_len
FROM order_line JOIN orders ON o_w_id = ol_w_id AND o_d_id = ol_d_id AND o_id = ol_o_id
WHERE ol_i_id NOT BETWEEN 1 AND {schema.ITEMS} OR ol_supply_w_id <> ol_w_id OR ol_quantity <> 5
   OR LENGTH(ol_dist_info) <> 24
   OR (ol_o_id < {FIRST_NO} AND (ol_amount <> 0.00 OR ol_delivery_d IS NULL OR ol_delivery_d <> o_entry_d))
   OR (ol_o_id >= {FIRST_NO} AND (ol_amount NOT BETWEEN 0.01 AND 9999.99 OR ol_delivery_d IS NOT NULL))
ORDER BY ol_w_id, ol_d_id, ol_o_id, ol_number"""

INIT_CUSTOMER = f"""
SELECT c_w_id, c_d_id, c_id, c_first, c_middle, c_last, c_credit, c_discount, c_balance, c_ytd_payment,
       c_payment_cnt, c_delivery_cnt, LENGTH(c_data) AS data_len
FROM customer
WHERE c_middle <> 'OE' OR LENGTH(c_first) NOT BETWEEN 8 AND 16 OR LENGTH(c_data) NOT BETWEEN 300 AND 500
   OR LENGTH(c_street_1) NOT BETWEEN 10 AND 20 OR LENGTH(c_city) NOT BETWEEN 10 AND 20
   OR c_zip NOT LIKE '____11111' OR LENGTH(c_phone) <> 16 OR LENGTH(c_state) <> 2
   OR c_credit NOT IN ('GC', 'BC') OR c_credit_lim <> 50000.00 OR c_discount NOT BETWEEN 0 AND 0.5
   OR c_balance <> -10.00 OR c_ytd_payment <> 10.00 OR c_payment_cnt <> 1 OR c_delivery_cnt <> 0
ORDER BY c_w_id, c_d_id, c_id"""

# first 1000 customers of a district: names 0..999 in order; the rest: one of those names (NURand 0..999)
INIT_LAST_NAMES = f"""
SELECT c_w_id, c_d_id, c_id, c_last FROM customer c
WHERE (c_id <= 1000 AND c_last <> {LAST_NAME_OF_C_ID})
   OR (c_id > 1000 AND NOT EXISTS (SELECT 1 FROM customer f WHERE f.c_w_id = c.c_w_id AND f.c_d_id = c.c_d_id
                                   AND f.c_last = c.c_last AND f.c_id <= 1000))
ORDER BY c_w_id, c_d_id, c_id"""

INIT_HISTORY = f"""
SELECT h_c_w_id, h_c_d_id, h_c_id, COUNT(*) AS history_rows, SUM(h_amount) AS amount,
       MIN(LENGTH(h_data)) AS min_len, MAX(LENGTH(h_data)) AS max_len FROM history
GROUP BY h_c_w_id, h_c_d_id, h_c_id
HAVING COUNT(*) <> 1 OR SUM(h_amount) <> 10.00 OR MIN(LENGTH(h_data)) < 12 OR MAX(LENGTH(h_data)) > 24
    OR MIN(h_w_id) <> h_c_w_id OR MIN(h_d_id) <> h_c_d_id
ORDER BY h_c_w_id, h_c_d_id, h_c_id"""

# Why the loader's verification (tuner.tpcc.load_check) may skip conditions 7, 10 and 12 (IMPLIED_AT_LOAD):
# in the initial state they follow from checks it does run.
#   7:  4.3.3.1/orders (O_CARRIER_ID null exactly for O_ID >= 2101) and 4.3.3.1/order_line (OL_DELIVERY_D
#       set exactly for OL_O_ID < 2101).
#   10, 12: 4.3.3.1/customer (every C_BALANCE -10.00, C_YTD_PAYMENT 10.00), 4.3.3.1/order_line (delivered
#       OL_AMOUNT 0.00) and 4.3.3.1/history (exactly one HISTORY row of 10.00 a customer): -10 = 0 - 10 and
#       -10 + 10 = 0.  (History rows of customers that do not exist would break 8/9, which run.)

# 10% ORIGINAL in I_DATA and S_DATA; 10% BC credit; S_QUANTITY 10..100 and lengths.  The comment to 4.3.3.1
# allows the fractions a 5% variation: 9.5-10.5%.  ORIGINAL is drawn row by row, binomial over 100,000 rows
# a warehouse, so the band is 5.3 standard deviations wide; BC is exactly 300 customers a district.
FRACTION_LOW, FRACTION_HIGH = 0.095, 0.105
INIT_FRACTIONS = f"""
SELECT 'item' AS tbl, NULL AS w_id, COUNT(*) AS total_rows, AVG(i_data LIKE '%ORIGINAL%') AS fraction,
       SUM(LENGTH(i_data) NOT BETWEEN 26 AND 50 OR LENGTH(i_name) NOT BETWEEN 14 AND 24
           OR i_price NOT BETWEEN 1.00 AND 100.00 OR i_im_id NOT BETWEEN 1 AND 10000) AS bad_rows
FROM item HAVING fraction NOT BETWEEN {FRACTION_LOW} AND {FRACTION_HIGH} OR bad_rows > 0
UNION ALL
SELECT 'stock', s_w_id, COUNT(*), AVG(s_data LIKE '%ORIGINAL%'),
       SUM(LENGTH(s_data) NOT BETWEEN 26 AND 50 OR s_quantity NOT BETWEEN 10 AND 100 OR s_ytd <> 0
           OR s_order_cnt <> 0 OR s_remote_cnt <> 0 OR LENGTH(s_dist_01) <> 24 OR LENGTH(s_dist_10) <> 24)
FROM stock GROUP BY s_w_id HAVING AVG(s_data LIKE '%ORIGINAL%') NOT BETWEEN {FRACTION_LOW} AND {FRACTION_HIGH} OR SUM(
       LENGTH(s_data) NOT BETWEEN 26 AND 50 OR s_quantity NOT BETWEEN 10 AND 100 OR s_ytd <> 0
       OR s_order_cnt <> 0 OR s_remote_cnt <> 0 OR LENGTH(s_dist_01) <> 24 OR LENGTH(s_dist_10) <> 24) > 0
UNION ALL
SELECT 'customer (c_credit = BC)', c_w_id, COUNT(*), AVG(c_credit = 'BC'), 0
FROM customer GROUP BY c_w_id HAVING AVG(c_credit = 'BC') NOT BETWEEN {FRACTION_LOW} AND {FRACTION_HIGH}"""

CHECKS: tuple[Check, ...] = (
    Check("3.3.2.1", "W_YTD = sum(D_YTD) for each warehouse", COND_1),
    Check("3.3.2.2", "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) for each district", COND_2),
    Check("3.3.2.3", "max(NO_O_ID) - min(NO_O_ID) + 1 = count of NEW-ORDER rows for each district", COND_3),
    Check("3.3.2.4", "sum(O_OL_CNT) = count of ORDER-LINE rows for each district", COND_4, needs_lines=True),
    Check("3.3.2.5", "O_CARRIER_ID is null exactly when the order has a NEW-ORDER row", COND_5),
    Check("3.3.2.6", "O_OL_CNT = count of the order's ORDER-LINE rows", COND_6, needs_lines=True),
    Check("3.3.2.7", "OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null", COND_7,
          needs_lines=True, implied_at_load=True),
    Check("3.3.2.8", "W_YTD = sum(H_AMOUNT) for each warehouse", COND_8),
    Check("3.3.2.9", "D_YTD = sum(H_AMOUNT) for each district", COND_9),
    Check("3.3.2.10", "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) for each customer", COND_10,
          needs_lines=True, needs_money=True, implied_at_load=True),
    Check("3.3.2.11", "count(ORDER) - count(NEW-ORDER) = 2100 for each district (initial state only)", COND_11,
          initial_only=True),
    Check("3.3.2.12", "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT) for each customer", COND_12,
          needs_lines=True, needs_money=True, implied_at_load=True),
    Check("4.3.3.1/totals", "W_YTD 300,000.00, D_YTD 30,000.00, D_NEXT_O_ID 3001, taxes 0..0.2", INIT_TOTALS,
          initial_only=True),
    Check("4.3.3.1/orders", "O_CARRIER_ID 1..10 for O_ID < 2101 and null after, O_OL_CNT 5..15, O_ALL_LOCAL 1",
          INIT_ORDERS, initial_only=True),
    Check("4.3.3.1/o_c_id", "O_C_ID is a permutation of 1..3000 in each district", INIT_PERMUTATION,
          initial_only=True),
    Check("4.3.3.1/new_order", "NEW-ORDER holds orders 2101..3000", INIT_NEW_ORDER, initial_only=True),
    Check("4.3.3.1/order_line", "OL_AMOUNT 0.00 and OL_DELIVERY_D = O_ENTRY_D when delivered, "
          "0.01..9999.99 and null otherwise; OL_QUANTITY 5; OL_DIST_INFO 24 chars", INIT_ORDER_LINE,
          initial_only=True),
    Check("4.3.3.1/customer", "customer initial values, lengths and ranges", INIT_CUSTOMER, initial_only=True),
    Check("4.3.2.3", "C_LAST: names 0..999 in order for the first 1000 customers, NURand names after",
          INIT_LAST_NAMES, initial_only=True),
    Check("4.3.3.1/history", "exactly one HISTORY row a customer: H_AMOUNT 10.00, H_DATA 12..24 chars", INIT_HISTORY,
          initial_only=True),
    Check("4.3.3.1/fractions", "10% ORIGINAL in I_DATA and S_DATA, 10% BC credit, item and stock ranges",
          INIT_FRACTIONS, initial_only=True),
)

IMPLIED_AT_LOAD = tuple(c.clause for c in CHECKS if c.implied_at_load)

COUNT_OFFENDING = "SELECT COUNT(*) FROM ({sql}) offending"


def jsonable(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat(sep=" ") if isinstance(v, datetime.datetime) else v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.decode(errors="replace")
    return v


def run_check(conn, check: Check, limit: int = 5) -> CheckResult:
    t0 = time.monotonic()
    cur = conn.cursor()
    try:
        cur.execute(f"{check.sql}\nLIMIT {int(limit)}")
        names = [d[0] for d in cur.description]
        rows = [{n: jsonable(v) for n, v in zip(names, row)} for row in cur.fetchall()]
        count = len(rows)
        if len(rows) == limit:
            cur.execute(COUNT_OFFENDING.format(sql=check.sql))
            count = int(cur.fetchone()[0])
    except Exception as exc:  # a missing table or column: the check fails with the server's words
        return CheckResult(check.clause, check.description, passed=False,
                           error=str(getattr(exc, "msg", exc)), seconds=time.monotonic() - t0)
    finally:
        cur.close()
    return CheckResult(check.clause, check.description, passed=not rows, offending=rows,
                       offending_count=count, seconds=time.monotonic() - t0)


def _prepare(conn, statements: tuple[str, ...]) -> str | None:
    """Build a temporary table the checks read (the per-order or per-customer sums); the server's error text
    if it cannot."""
    cur = conn.cursor()
    try:
        # CREATE ... SELECT under REPEATABLE READ takes a shared lock on every source row, and the lock table
        # lives in the buffer pool: with data tens of times the pool (a sweep in the DCPMM paper's regime) it
        # fails with "The total number of locks exceeds the lock table size".  Under READ COMMITTED the
        # SELECT is a consistent read without row locks (MySQL 8.0 manual 17.7.3, INSERT ... SELECT).
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        for sql in statements:
            cur.execute(sql)
    except Exception as exc:
        return str(getattr(exc, "msg", exc))
    finally:
        try:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        finally:
            cur.close()
    return None


def select_checks(initial: bool = False, clauses: list[str] | None = None) -> list[Check]:
    chosen = [c for c in CHECKS if initial or not c.initial_only]
    if clauses:
        chosen = [c for c in chosen if c.clause in clauses]
    return chosen


def run_checks(spec: ConnectionSpec, database: str = "tpcc", initial: bool = False, limit: int = 5,
               clauses: list[str] | None = None) -> CheckReport:
    """Run the consistency conditions (and, with ``initial``, the initial-population rules) on ``database``.

    The loader itself verifies with ``tuner.tpcc.load_check``, which asks the same
    questions of a fresh load a warehouse at a time.
    """
    t0 = time.monotonic()
    admin = spec.with_database(None).connect()
    try:
        present = schema.present_tables(admin, database)
    finally:
        admin.close()
    missing = [t for t in schema.TABLES if t not in present]
    if missing:
        raise WorkloadError(f"database {database} has no complete TPC-C schema (missing: {', '.join(missing)}); "
                            f"load it with `innotier tpcc load --warehouses N`")
    conn = spec.with_database(database).connect()
    try:
        chosen = select_checks(initial, clauses)
        lines_error = _prepare(conn, (DROP_LINES, CREATE_LINES)) if any(c.needs_lines for c in chosen) else None
        money_error = lines_error or (_prepare(conn, (DROP_MONEY, CREATE_MONEY))
                                      if any(c.needs_money for c in chosen) else None)
        results = []
        for c in chosen:
            error = money_error if c.needs_money else lines_error if c.needs_lines else None
            results.append(CheckResult(c.clause, c.description, passed=False, error=error) if error
                           else run_check(conn, c, limit))
    finally:
        conn.close()
    return CheckReport(database=database, results=results, seconds=time.monotonic() - t0, initial=initial)
