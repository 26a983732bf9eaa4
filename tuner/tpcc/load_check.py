"""The loader's verification: every initial-state rule and consistency condition of a fresh load.

``tuner.tpcc.check`` asks each question of the whole database in its own query, which is what a check after
a run needs (any row may have changed).  Right after a load the same questions cost several passes over
every table, with GROUP BYs that sort ORDER-LINE and HISTORY; this module reads each table once, a
warehouse at a time along the primary key, on ``jobs`` connections, and reduces each warehouse to a few
numbers a district (counts, bounds, sums, how many rows break a population rule).  The rules are then
decided in Python from those numbers, clause by clause, so the report has the same clauses as
``check.run_checks(initial=True, at_load=True)`` and names the warehouse and district that fail.

Each per-district reduction keeps the exactness of the whole-table query it replaces: for example "exactly
one HISTORY row a customer" is count = distinct customers = 3000 with ids 1..3000 in every district, and
condition 5 compares the interval of orders without a carrier with the interval of NEW-ORDER rows, both
known to be gap-free from their counts.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tuner.core.errors import WorkloadError
from tuner.tpcc import schema
from tuner.tpcc.check import (CHECKS, IMPLIED_AT_LOAD, SYLLABLES_REGEXP, CheckReport, CheckResult,
                              FRACTION_HIGH, FRACTION_LOW, LAST_NAME_OF_C_ID, jsonable)

FIRST_NO = schema.FIRST_NEW_ORDER
ORDERS_PER_D = schema.ORDERS_PER_D

WAREHOUSES = "SELECT w_id, w_ytd, w_tax FROM warehouse ORDER BY w_id"
DISTRICTS = "SELECT d_w_id, d_id, d_ytd, d_tax, d_next_o_id FROM district ORDER BY d_w_id, d_id"

# rows of any table outside warehouses 1..W: the first primary-key column's bounds, read from the index ends
KEY_BOUNDS = {"district": "d_w_id", "customer": "c_w_id", "new_order": "no_w_id", "orders": "o_w_id",
              "order_line": "ol_w_id", "stock": "s_w_id"}
BOUNDS = "SELECT MIN({col}), MAX({col}) FROM {table}"

ORDERS_OF_W = f"""
SELECT o_d_id AS d_id, COUNT(*) AS orders, MAX(o_id) AS max_o_id, SUM(o_ol_cnt) AS sum_ol_cnt,
       COUNT(DISTINCT o_c_id) AS distinct_c_id, MIN(o_c_id) AS min_c_id, MAX(o_c_id) AS max_c_id,
       SUM(o_carrier_id IS NULL) AS undelivered, MIN(IF(o_carrier_id IS NULL, o_id, NULL)) AS first_undelivered,
       MAX(IF(o_carrier_id IS NULL, o_id, NULL)) AS last_undelivered,
       SUM((o_id < {FIRST_NO} AND (o_carrier_id IS NULL OR o_carrier_id NOT BETWEEN 1 AND 10))
           OR (o_id >= {FIRST_NO} AND o_carrier_id IS NOT NULL)
           OR o_ol_cnt NOT BETWEEN {schema.MIN_OL_CNT} AND {schema.MAX_OL_CNT} OR o_all_local <> 1
           OR o_id NOT BETWEEN 1 AND {ORDERS_PER_D}) AS bad_orders
FROM orders WHERE o_w_id = %s GROUP BY o_d_id"""

NEW_ORDERS_OF_W = """
SELECT no_d_id AS d_id, COUNT(*) AS new_orders, MIN(no_o_id) AS min_no_o_id, MAX(no_o_id) AS max_no_o_id
FROM new_order WHERE no_w_id = %s GROUP BY no_d_id"""

# Order lines reduced to one row an order while streaming along the primary key, then matched with their
# order by its primary key: lines without an order, an order's line count, and each line's rules.
ORDER_LINES_OF_W = f"""
SELECT l.d_id, COUNT(*) AS orders_with_lines, SUM(l.ol_lines) AS ol_lines, SUM(o.o_id IS NULL) AS orphan_orders,
       SUM(l.ol_lines <> o.o_ol_cnt) AS wrong_line_count,
       SUM(l.bad_lines) + SUM(l.o_id < {FIRST_NO} AND (l.first_d <> o.o_entry_d OR l.last_d <> o.o_entry_d))
         AS bad_lines
FROM (SELECT ol_d_id AS d_id, ol_o_id AS o_id, COUNT(*) AS ol_lines, MIN(ol_delivery_d) AS first_d,
             MAX(ol_delivery_d) AS last_d,
             SUM(ol_i_id NOT BETWEEN 1 AND {schema.ITEMS} OR ol_supply_w_id <> ol_w_id OR ol_quantity <> 5
                 OR LENGTH(ol_dist_info) <> 24
                 OR (ol_o_id < {FIRST_NO} AND (ol_amount <> 0.00 OR ol_delivery_d IS NULL))
                 OR (ol_o_id >= {FIRST_NO} AND (ol_amount NOT BETWEEN 0.01 AND 9999.99
                                                OR ol_delivery_d IS NOT NULL))) AS bad_lines
      FROM order_line WHERE ol_w_id = %s GROUP BY ol_d_id, ol_o_id) l
LEFT JOIN orders o ON o.o_w_id = %s AND o.o_d_id = l.d_id AND o.o_id = l.o_id
GROUP BY l.d_id"""

CUSTOMERS_OF_W = f"""
SELECT c_d_id AS d_id, COUNT(*) AS customers, MIN(c_id) AS min_c_id, MAX(c_id) AS max_c_id,
       SUM(c_middle <> 'OE' OR LENGTH(c_first) NOT BETWEEN 8 AND 16 OR LENGTH(c_data) NOT BETWEEN 300 AND 500
           OR LENGTH(c_street_1) NOT BETWEEN 10 AND 20 OR LENGTH(c_city) NOT BETWEEN 10 AND 20
           OR c_zip NOT LIKE '____11111' OR LENGTH(c_phone) <> 16 OR LENGTH(c_state) <> 2
           OR c_credit NOT IN ('GC', 'BC') OR c_credit_lim <> 50000.00 OR c_discount NOT BETWEEN 0 AND 0.5
           OR c_balance <> -10.00 OR c_ytd_payment <> 10.00 OR c_payment_cnt <> 1 OR c_delivery_cnt <> 0)
         AS bad_customers,
       SUM(IF(c_id <= 1000, c_last <> {LAST_NAME_OF_C_ID}, c_last NOT REGEXP '{SYLLABLES_REGEXP}'))
         AS bad_last_names,
       SUM(c_credit = 'BC') AS bad_credit
FROM customer WHERE c_w_id = %s GROUP BY c_d_id"""

STOCK_OF_W = """
SELECT COUNT(*) AS stock, MIN(s_i_id) AS min_i_id, MAX(s_i_id) AS max_i_id,
       SUM(INSTR(s_data, 'ORIGINAL') > 0) AS original,
       SUM(LENGTH(s_data) NOT BETWEEN 26 AND 50 OR s_quantity NOT BETWEEN 10 AND 100 OR s_ytd <> 0
           OR s_order_cnt <> 0 OR s_remote_cnt <> 0 OR LENGTH(s_dist_01) <> 24 OR LENGTH(s_dist_02) <> 24
           OR LENGTH(s_dist_03) <> 24 OR LENGTH(s_dist_04) <> 24 OR LENGTH(s_dist_05) <> 24
           OR LENGTH(s_dist_06) <> 24 OR LENGTH(s_dist_07) <> 24 OR LENGTH(s_dist_08) <> 24
           OR LENGTH(s_dist_09) <> 24 OR LENGTH(s_dist_10) <> 24) AS bad_stock
FROM stock WHERE s_w_id = %s"""

ITEMS = """
SELECT COUNT(*) AS items, MIN(i_id) AS min_i_id, MAX(i_id) AS max_i_id,
       SUM(INSTR(i_data, 'ORIGINAL') > 0) AS original,
       SUM(LENGTH(i_data) NOT BETWEEN 26 AND 50 OR LENGTH(i_name) NOT BETWEEN 14 AND 24
           OR i_price NOT BETWEEN 1.00 AND 100.00 OR i_im_id NOT BETWEEN 1 AND 10000) AS bad_items
FROM item"""

# HISTORY has no key to read a warehouse by: one pass over the table, grouped by the paying district.
HISTORY = """
SELECT h_w_id AS w_id, h_d_id AS d_id, COUNT(*) AS history_rows, COUNT(DISTINCT h_c_id) AS distinct_c_id,
       MIN(h_c_id) AS min_c_id, MAX(h_c_id) AS max_c_id, SUM(h_amount) AS amount,
       SUM(h_amount <> 10.00 OR LENGTH(h_data) NOT BETWEEN 12 AND 24 OR h_c_w_id <> h_w_id
           OR h_c_d_id <> h_d_id) AS bad_history
FROM history GROUP BY h_w_id, h_d_id"""


@dataclass
class Facts:
    """What the passes read: per warehouse and district aggregates, whole-table ones, and key bounds."""

    warehouses: int
    warehouse_rows: list[dict] = field(default_factory=list)
    district_rows: list[dict] = field(default_factory=list)
    per_district: dict[str, dict[tuple[int, int], dict]] = field(default_factory=dict)  # pass -> (w, d) -> row
    stock: dict[int, dict] = field(default_factory=dict)
    items: dict = field(default_factory=dict)
    bounds: dict[str, tuple] = field(default_factory=dict)

    def district(self, name: str, w: int, d: int) -> dict:
        return self.per_district.get(name, {}).get((w, d), {})


@dataclass(frozen=True)
class Pass:
    """One query of the verification and where its rows go."""

    name: str
    sql: str
    params: tuple = ()
    weight: float = 1.0  # to start the longest first


def _rows(cur) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def plan_passes(warehouses: int) -> list[Pass]:
    passes = [Pass("history", HISTORY, weight=1.5 * warehouses), Pass("items", ITEMS, weight=8),
              Pass("warehouses", WAREHOUSES, weight=0), Pass("districts", DISTRICTS, weight=0)]
    passes += [Pass(f"bounds:{t}", BOUNDS.format(col=c, table=t), weight=0) for t, c in KEY_BOUNDS.items()]
    for w in range(1, warehouses + 1):
        passes += [Pass("order_lines", ORDER_LINES_OF_W, (w, w), weight=21), Pass("stock", STOCK_OF_W, (w,), 31),
                   Pass("customers", CUSTOMERS_OF_W, (w,), 20), Pass("orders", ORDERS_OF_W, (w,), 1.5),
                   Pass("new_orders", NEW_ORDERS_OF_W, (w,), 0.1)]
    return sorted(passes, key=lambda p: -p.weight)


def _store(facts: Facts, p: Pass, rows: list[dict], lock: threading.Lock) -> None:
    with lock:
        if p.name == "warehouses":
            facts.warehouse_rows = rows
        elif p.name == "districts":
            facts.district_rows = rows
        elif p.name == "items":
            facts.items = rows[0]
        elif p.name == "stock":
            facts.stock[p.params[0]] = rows[0]
        elif p.name.startswith("bounds:"):
            facts.bounds[p.name.split(":", 1)[1]] = tuple(rows[0].values())
        else:
            table = facts.per_district.setdefault(p.name, {})
            for r in rows:
                w = r.pop("w_id", None) or p.params[0]
                table[(w, r.pop("d_id"))] = r


def read_facts(connect: Callable[[], Any], warehouses: int, jobs: int) -> Facts:
    """Run every pass on ``jobs`` connections (``connect()`` opens one on the database)."""
    facts, lock = Facts(warehouses), threading.Lock()
    queue = plan_passes(warehouses)
    failed: list[BaseException] = []

    def worker() -> None:
        try:
            conn = connect()
        except BaseException as exc:  # reported by the caller
            failed.append(exc)
            return
        try:
            cur = conn.cursor()
            while not failed:
                with lock:
                    if not queue:
                        return
                    p = queue.pop(0)
                cur.execute(p.sql, p.params or None)
                _store(facts, p, _rows(cur), lock)
        except BaseException as exc:
            failed.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, name=f"tpcc-verify-{i}", daemon=True) for i in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        exc = failed[0]
        raise WorkloadError(f"verifying the load of TPC-C failed: {getattr(exc, 'msg', exc)}; fix the cause "
                            f"and load again with --drop") from exc
    return facts


# ---------------------------------------------------------------------------
# The rules, decided from the facts: each returns the offending warehouses / districts (empty: passed)

Offending = list[dict[str, Any]]


def _districts(facts: Facts):
    for w in range(1, facts.warehouses + 1):
        for d in range(1, schema.DISTRICTS_PER_W + 1):
            yield w, d


def _n(value) -> int:
    return int(value or 0)


def _totals(facts: Facts) -> Offending:
    bad = [{"w_id": r["w_id"], "w_ytd": r["w_ytd"], "w_tax": r["w_tax"]} for r in facts.warehouse_rows
           if r["w_ytd"] != 300000 or not 0 <= r["w_tax"] <= 0.2]
    bad += [{"w_id": r["d_w_id"], "d_id": r["d_id"], "d_ytd": r["d_ytd"], "d_next_o_id": r["d_next_o_id"]}
            for r in facts.district_rows
            if r["d_ytd"] != 30000 or r["d_next_o_id"] != ORDERS_PER_D + 1 or not 0 <= r["d_tax"] <= 0.2]
    return bad


def _cond_1(facts: Facts) -> Offending:
    sums: dict[int, Any] = {}
    for r in facts.district_rows:
        sums[r["d_w_id"]] = sums.get(r["d_w_id"], 0) + r["d_ytd"]
    return [{"w_id": r["w_id"], "w_ytd": r["w_ytd"], "sum_d_ytd": sums.get(r["w_id"])}
            for r in facts.warehouse_rows if sums.get(r["w_id"]) != r["w_ytd"]]


def _cond_2(facts: Facts) -> Offending:
    bad = []
    for r in facts.district_rows:
        w, d = r["d_w_id"], r["d_id"]
        max_o, max_no = facts.district("orders", w, d).get("max_o_id"), facts.district("new_orders", w, d).get(
            "max_no_o_id")
        if r["d_next_o_id"] - 1 != _n(max_o) or (max_no is not None and max_no != r["d_next_o_id"] - 1):
            bad.append({"w_id": w, "d_id": d, "d_next_o_id": r["d_next_o_id"], "max_o_id": max_o,
                        "max_no_o_id": max_no})
    return bad


def _per_district(facts: Facts, name: str, wrong: Callable[[dict], bool]) -> Offending:
    """Districts whose row of pass ``name`` is ``wrong`` (a district without a row is wrong too)."""
    bad = []
    for w, d in _districts(facts):
        r = facts.district(name, w, d)
        if not r or wrong(r):
            bad.append({"w_id": w, "d_id": d, **r})
    return bad


def _cond_3(facts: Facts) -> Offending:
    return _per_district(facts, "new_orders",
                         lambda r: r["max_no_o_id"] - r["min_no_o_id"] + 1 != r["new_orders"])


def _cond_4(facts: Facts) -> Offending:
    bad = []
    for w, d in _districts(facts):
        ol_cnt = _n(facts.district("orders", w, d).get("sum_ol_cnt"))
        lines = _n(facts.district("order_lines", w, d).get("ol_lines"))
        if ol_cnt != lines:
            bad.append({"w_id": w, "d_id": d, "sum_o_ol_cnt": ol_cnt, "order_lines": lines})
    return bad


def _cond_5(facts: Facts) -> Offending:
    """Orders without a carrier and NEW-ORDER rows are the same gap-free interval of order ids."""
    bad = []
    for w, d in _districts(facts):
        o, no = facts.district("orders", w, d), facts.district("new_orders", w, d)
        undelivered = (o.get("first_undelivered"), o.get("last_undelivered"), _n(o.get("undelivered")))
        new_orders = (no.get("min_no_o_id"), no.get("max_no_o_id"), _n(no.get("new_orders")))
        gap_free = undelivered[2] == 0 or undelivered[1] - undelivered[0] + 1 == undelivered[2]
        if undelivered != new_orders or not gap_free:
            bad.append({"w_id": w, "d_id": d, "undelivered_orders": undelivered, "new_orders": new_orders})
    return bad


def _cond_6(facts: Facts) -> Offending:
    bad = []
    for w, d in _districts(facts):
        orders, ol = _n(facts.district("orders", w, d).get("orders")), facts.district("order_lines", w, d)
        if _n(ol.get("orphan_orders")) or _n(ol.get("wrong_line_count")) or _n(ol.get("orders_with_lines")) != orders:
            bad.append({"w_id": w, "d_id": d, "orders": orders, **ol})
    return bad


def _cond_8(facts: Facts) -> Offending:
    paid: dict[int, Any] = {}
    for (w, _), r in facts.per_district.get("history", {}).items():
        paid[w] = paid.get(w, 0) + r["amount"]
    return [{"w_id": r["w_id"], "w_ytd": r["w_ytd"], "sum_h_amount": paid.get(r["w_id"], 0)}
            for r in facts.warehouse_rows if paid.get(r["w_id"], 0) != r["w_ytd"]]


def _cond_9(facts: Facts) -> Offending:
    return [{"w_id": r["d_w_id"], "d_id": r["d_id"], "d_ytd": r["d_ytd"],
             "sum_h_amount": facts.district("history", r["d_w_id"], r["d_id"]).get("amount", 0)}
            for r in facts.district_rows
            if facts.district("history", r["d_w_id"], r["d_id"]).get("amount", 0) != r["d_ytd"]]


def _cond_11(facts: Facts) -> Offending:
    bad = []
    for w, d in _districts(facts):
        orders = _n(facts.district("orders", w, d).get("orders"))
        new_orders = _n(facts.district("new_orders", w, d).get("new_orders"))
        if orders - new_orders != FIRST_NO - 1:
            bad.append({"w_id": w, "d_id": d, "orders": orders, "new_orders": new_orders})
    return bad


def _all_of(per_customer: int, r: dict, count: str, distinct: str | None = None) -> bool:
    """``r`` covers ids 1..per_customer exactly once (count = distinct = n, min 1, max n)."""
    n = r[count]
    return n == per_customer and r["min_c_id"] == 1 and r["max_c_id"] == per_customer and (
        distinct is None or r[distinct] == n)


def _fractions(facts: Facts) -> Offending:
    bad = []

    def off(fraction: float) -> bool:
        return not FRACTION_LOW <= fraction <= FRACTION_HIGH

    items = facts.items
    if off(_n(items.get("original")) / max(1, _n(items.get("items")))) or _n(items.get("bad_items")):
        bad.append({"tbl": "item", **items})
    for w in range(1, facts.warehouses + 1):
        s = facts.stock.get(w, {})
        if off(_n(s.get("original")) / max(1, _n(s.get("stock")))) or _n(s.get("bad_stock")):
            bad.append({"tbl": "stock", "w_id": w, **s})
        credit = [facts.district("customers", w, d) for d in range(1, schema.DISTRICTS_PER_W + 1)]
        bc = sum(_n(r.get("bad_credit")) for r in credit) / max(1, sum(_n(r.get("customers")) for r in credit))
        if off(bc):
            bad.append({"tbl": "customer (c_credit = BC)", "w_id": w, "fraction": round(bc, 4)})
    return bad


RULES: dict[str, Callable[[Facts], Offending]] = {
    "3.3.2.1": _cond_1, "3.3.2.2": _cond_2, "3.3.2.3": _cond_3, "3.3.2.4": _cond_4, "3.3.2.5": _cond_5,
    "3.3.2.6": _cond_6, "3.3.2.8": _cond_8, "3.3.2.9": _cond_9, "3.3.2.11": _cond_11,
    "4.3.3.1/totals": _totals,
    "4.3.3.1/orders": lambda f: _per_district(f, "orders", lambda r: _n(r["bad_orders"]) > 0),
    "4.3.3.1/o_c_id": lambda f: _per_district(f, "orders", lambda r: not _all_of(
        schema.CUSTOMERS_PER_D, r, "orders", "distinct_c_id")),
    "4.3.3.1/new_order": lambda f: _per_district(f, "new_orders", lambda r: r["min_no_o_id"] < FIRST_NO
                                                 or r["max_no_o_id"] > ORDERS_PER_D),
    "4.3.3.1/order_line": lambda f: _per_district(f, "order_lines", lambda r: _n(r["bad_lines"]) > 0),
    "4.3.3.1/customer": lambda f: _per_district(f, "customers", lambda r: _n(r["bad_customers"]) > 0
                                                or not _all_of(schema.CUSTOMERS_PER_D, r, "customers")),
    "4.3.2.3": lambda f: _per_district(f, "customers", lambda r: _n(r["bad_last_names"]) > 0),
    "4.3.3.1/history": lambda f: _per_district(f, "history", lambda r: _n(r["bad_history"]) > 0
                                               or not _all_of(schema.CUSTOMERS_PER_D, r, "history_rows",
                                                              "distinct_c_id")),
    "4.3.3.1/fractions": _fractions,
}


def row_counts(facts: Facts) -> dict[str, int]:
    """Rows of each table, from the passes (every row of warehouses 1..W was read by one of them)."""
    def total(name: str, col: str) -> int:
        return sum(_n(r.get(col)) for r in facts.per_district.get(name, {}).values())

    return {"warehouse": len(facts.warehouse_rows), "district": len(facts.district_rows),
            "customer": total("customers", "customers"), "history": total("history", "history_rows"),
            "new_order": total("new_orders", "new_orders"), "orders": total("orders", "orders"),
            "item": _n(facts.items.get("items")), "stock": sum(_n(s.get("stock")) for s in facts.stock.values()),
            "order_line": total("order_lines", "ol_lines")}


def count_problems(facts: Facts, counts: dict[str, int]) -> list[str]:
    """Row counts against clause 1.2.1 / 4.3.3.1, and rows of warehouses that were not loaded."""
    problems = [f"{t} has {counts.get(t)} rows, expected {n}"
                for t, n in schema.expected_rows(facts.warehouses).items() if counts.get(t) != n]
    for table, (low, high) in facts.bounds.items():
        if low is not None and (low < 1 or high > facts.warehouses):
            problems.append(f"{table} has rows of warehouses {low}..{high}, loaded 1..{facts.warehouses}")
    ids = [r["w_id"] for r in facts.warehouse_rows]
    if ids != list(range(1, facts.warehouses + 1)):
        problems.append(f"warehouse ids are {ids[:5]}..., expected 1..{facts.warehouses}")
    return problems


def report(facts: Facts, database: str, seconds: float, limit: int = 5) -> CheckReport:
    """The verdict a clause, in the order of ``check.CHECKS`` (conditions implied at load left out)."""
    results = []
    for c in CHECKS:
        if c.clause in IMPLIED_AT_LOAD or c.clause not in RULES:
            continue
        bad = RULES[c.clause](facts)
        results.append(CheckResult(c.clause, c.description, passed=not bad, offending_count=len(bad),
                                   offending=[{k: jsonable(v) for k, v in r.items()} for r in bad[:limit]]))
    return CheckReport(database=database, results=results, seconds=seconds, initial=True)


def verify_load(connect: Callable[[], Any], database: str, warehouses: int, jobs: int
                ) -> tuple[CheckReport, dict[str, int], list[str]]:
    """(the clause report, rows a table, row-count problems) of a fresh load of ``warehouses``."""
    t0 = time.monotonic()
    facts = read_facts(connect, warehouses, jobs)
    counts = row_counts(facts)
    return report(facts, database, time.monotonic() - t0), counts, count_problems(facts, counts)
