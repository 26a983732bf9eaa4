"""Load a TPC-C database: generated on the server, one bulk transaction per table, verified at the end.

How it is fast (load times against the peers' loaders: docs/benchmarks.md):

* **No rows cross the wire.**  Every table is filled by ``INSERT ... SELECT`` over a
  numbers table, with the values computed by the server (RAND(), string functions).
  Random a-strings are windows at random offsets of a 4 MiB pool of random
  alphanumerics that Python generates once per load (clause 4.3.2.2 asks for random
  alphanumeric characters of a random length; each window is that).  Windows of the
  same length that start at the same offset are equal, and there are only ~4.2
  million offsets: of N such windows a given one has an exact twin with probability
  1 - exp(-N / 4.2M).  The 10 S_DIST columns are 1 million windows a warehouse, so
  about 21% of S_DIST values have a twin at W=1 and about 61% at W=4.  Nothing in
  TPC-C reads these strings as keys or compares them.
* **InnoDB bulk insert.**  With unique_checks=0 and foreign_key_checks=0, MariaDB
  10.6+ inserts into an *empty* table with one table-level undo record and builds
  each index by sorting (MDEV-24621, MDEV-24818; mariadb-dump and mariadb-import rely on it).
  So each table is loaded in one transaction that starts on the empty table, every
  warehouse one statement of it (for progress).  Parallelism is therefore by table
  (``jobs`` connections, biggest table first; ORDER-LINE after ORDERS, which it reads);
  parallel warehouses in one table would fall back to row-by-row undo logging and locks.
* The secondary indexes are in the CREATE TABLE: the bulk path sorts them too.

What is generated follows clause 4.3.3.1 (see ``tuner.tpcc.rand`` for the helpers in
Python form): 3000 customers a district with the first 1000 last names in syllable
order and the rest NURand(255, 0, 999) with the load's C; 3000 orders a district
with O_C_ID a random permutation of 1..3000, O_CARRIER_ID random 1..10 for
O_ID < 2101 and NULL for the last 900, 5-15 order lines with OL_AMOUNT 0.00 and a
delivery date for delivered orders and random 0.01-9999.99 (no date) otherwise;
900 new orders a district; 10% ORIGINAL in I_DATA and S_DATA (drawn a row at a time),
C_CREDIT "BC" for exactly 300 customers of each district chosen at random; W_YTD 300,000.00,
D_YTD 30,000.00, D_NEXT_O_ID 3001, C_BALANCE -10.00, one HISTORY row a customer.

At the end every table's row count is compared with the expected one and the
initial-state rules and consistency conditions are checked by ``tuner.tpcc.load_check``
(each table read once, a warehouse at a time, on the load's connections; conditions 7,
10 and 12 are implied by the initial-state rules, see ``check.IMPLIED_AT_LOAD``); only
then is the schema marked loaded in ``tpcc_meta`` (``schema.warehouse_count`` reports 0
before that).
"""

from __future__ import annotations

import datetime
import os

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tuner.core.errors import InnotierError, UsageError, WorkloadError
from tuner.core.server import ConnectionSpec
from tuner.tpcc import schema
from tuner.tpcc.rand import A_C_LAST, ALPHANUMERIC, SYLLABLES, make_constants
from tuner.tpcc.load_check import verify_load

# 2: exactly 300 BC customers a district, the Delivery skip counter table.  3: customers inserted in primary-key
# order (version 2's came in the BC pick's window order: the customer table 28.6 MiB of data at W=1 instead of
# 18.6), no skip counter table.  The same rows, other pages: a storage benchmark on them is another benchmark.
LOADER_VERSION = "3"
POOL_BYTES = 4 * 1024 * 1024  # random alphanumerics; windows of it are the a-strings
POOL_CHUNK = 1024 * 1024  # sent in pieces: well under any max_allowed_packet
NUMBERS = 100000  # the numbers table: 1 .. ITEMS (the largest per-statement row count)
MAX_JOBS = 16

# Session settings.  unique_checks=0 with foreign_key_checks=0 is what turns on MariaDB's bulk-insert
# path for an empty table (MDEV-24818); with unique_checks=1 inserts take row locks, so several
# warehouses of one table can load at once.  sql_log_bin needs a privilege; it is tried separately.
SESSION_BULK = "SET SESSION unique_checks = 0, foreign_key_checks = 0"
SESSION_ROWS = "SET SESSION unique_checks = 1, foreign_key_checks = 0"
SESSION_NO_BINLOG = "SET SESSION sql_log_bin = 0"

CREATE_POOL = ("CREATE TABLE tpcc_load_pool (id INT NOT NULL PRIMARY KEY, p LONGBLOB NOT NULL) "
               "ENGINE=InnoDB")
INSERT_POOL = "INSERT INTO tpcc_load_pool VALUES (1, %s)"
APPEND_POOL = "UPDATE tpcc_load_pool SET p = CONCAT(p, %s) WHERE id = 1"
CREATE_NUMBERS = "CREATE TABLE tpcc_load_numbers (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"
# 1..100000 from a cross join of digits: portable (MariaDB and MySQL 8, no SEQUENCE engine needed)
FILL_NUMBERS = """
INSERT INTO tpcc_load_numbers
SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d
FROM (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e,
     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) f"""
DROP_HELPERS = "DROP TABLE IF EXISTS tpcc_load_pool, tpcc_load_numbers"


# ---------------------------------------------------------------------------
# SQL expressions for the random values (clause 4.3.2), over the pool column `p`.

def a_string(lo: int, hi: int) -> str:
    """random a-string [lo .. hi]: a window of the pool at a random offset (clause 4.3.2.2)."""
    length = str(lo) if lo == hi else f"{lo} + FLOOR(RAND() * {hi - lo + 1})"
    return f"SUBSTRING(p, 1 + FLOOR(RAND() * {POOL_BYTES - hi}), {length})"


LETTERS_2 = "CONCAT(CHAR(65 + FLOOR(RAND() * 26)), CHAR(65 + FLOOR(RAND() * 26)))"  # state: 2 letters
ZIP = "CONCAT(LPAD(FLOOR(RAND() * 10000), 4, '0'), '11111')"  # clause 4.3.2.7
PHONE = "CONCAT(LPAD(FLOOR(RAND() * 100000000), 8, '0'), LPAD(FLOOR(RAND() * 100000000), 8, '0'))"
TAX = "FLOOR(RAND() * 2001) / 10000"  # random [0.0000 .. 0.2000]
ADDRESS = ", ".join([a_string(10, 20), a_string(10, 20), a_string(10, 20), LETTERS_2, ZIP])


def _syllable(expr: str) -> str:
    return "ELT(" + expr + " + 1, " + ", ".join(f"'{s}'" for s in SYLLABLES) + ")"


def last_name_sql(num: str) -> str:
    """C_LAST for a number in [0 .. 999] (clause 4.3.2.3), as SQL."""
    return f"CONCAT({_syllable(f'{num} DIV 100')}, {_syllable(f'({num} DIV 10) % 10')}, {_syllable(f'{num} % 10')})"


def nurand_c_last_sql(c_load: int) -> str:
    """NURand(255, 0, 999) with the load's C (clause 2.1.6, 4.3.2.3)."""
    return f"(((FLOOR(RAND() * {A_C_LAST + 1}) | FLOOR(RAND() * 1000)) + {int(c_load)}) % 1000)"


# A derived table that draws RAND() must be materialized so its columns hold one value each: MySQL 9 merges
# a plain derived table into the outer query and evaluates RAND() again at every use; a LIMIT stops that on both.
MATERIALIZE = "LIMIT 4294967295"

# I_DATA / S_DATA: a-string [26..50], "ORIGINAL" at a random position in 10% of rows (clause 4.3.3.1).
# The derived table ORIGINAL_PARTS draws the random parts once a row (materialized, see MATERIALIZE),
# so the outer expression can use them several times.
ORIGINAL_PARTS = (f"26 + FLOOR(RAND() * 25) AS len_, 1 + FLOOR(RAND() * {POOL_BYTES - 50}) AS off_, "
                  "RAND() < 0.1 AS orig_, RAND() AS frac_")
_POS = "(1 + FLOOR(frac_ * (len_ - 7)))"
DATA_WITH_ORIGINAL = (f"IF(orig_, CONCAT(SUBSTRING(p, off_, {_POS} - 1), 'ORIGINAL', "
                      f"SUBSTRING(p, off_ + {_POS} + 7, len_ - {_POS} - 7)), SUBSTRING(p, off_, len_))")

FROM_POOL = "tpcc_load_pool"  # one row (id = 1): a const table, read once a statement

LOAD_WAREHOUSE = f"""
INSERT INTO warehouse (w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd)
SELECT n, {a_string(6, 10)}, {ADDRESS}, {TAX}, 300000.00
FROM {FROM_POOL}, tpcc_load_numbers WHERE id = 1 AND n <= %s"""

LOAD_DISTRICT = f"""
INSERT INTO district (d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd,
                      d_next_o_id)
SELECT (n - 1) % {schema.DISTRICTS_PER_W} + 1, (n - 1) DIV {schema.DISTRICTS_PER_W} + 1, {a_string(6, 10)},
       {ADDRESS}, {TAX}, 30000.00, {schema.ORDERS_PER_D + 1}
FROM {FROM_POOL}, tpcc_load_numbers WHERE id = 1 AND n <= %s * {schema.DISTRICTS_PER_W}"""

LOAD_ITEM = f"""
INSERT INTO item (i_id, i_im_id, i_name, i_price, i_data)
SELECT n, 1 + FLOOR(RAND() * 10000), {a_string(14, 24)}, (100 + FLOOR(RAND() * 9901)) / 100, {DATA_WITH_ORIGINAL}
FROM {FROM_POOL}, (SELECT n, {ORIGINAL_PARTS} FROM tpcc_load_numbers WHERE n <= {schema.ITEMS} {MATERIALIZE}) r
WHERE id = 1"""

LOAD_STOCK = f"""
INSERT INTO stock (s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05,
                   s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt,
                   s_data)
SELECT n, %s, 10 + FLOOR(RAND() * 91), {", ".join([a_string(24, 24)] * 10)}, 0, 0, 0, {DATA_WITH_ORIGINAL}
FROM {FROM_POOL}, (SELECT n, {ORIGINAL_PARTS} FROM tpcc_load_numbers WHERE n <= {schema.STOCK_PER_W} {MATERIALIZE}) r
WHERE id = 1"""

_CUSTOMERS_PER_W = schema.DISTRICTS_PER_W * schema.CUSTOMERS_PER_D

LOAD_CUSTOMER = f"""
INSERT INTO customer (c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, c_street_2, c_city,
                      c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance,
                      c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data)
SELECT c_, d_, %s, {a_string(8, 16)}, 'OE', {last_name_sql('ln_')}, {ADDRESS}, {PHONE}, %s,
       IF(credit_rank_ <= {schema.CUSTOMERS_PER_D // 10}, 'BC', 'GC'), 50000.00, FLOOR(RAND() * 5001) / 10000,
       -10.00, 10.00, 1, 0,
       {a_string(300, 500)}
FROM {FROM_POOL},
     (SELECT (n - 1) % {schema.CUSTOMERS_PER_D} + 1 AS c_, (n - 1) DIV {schema.CUSTOMERS_PER_D} + 1 AS d_,
             IF((n - 1) % {schema.CUSTOMERS_PER_D} < 1000, (n - 1) % {schema.CUSTOMERS_PER_D}, {{nurand}}) AS ln_,
             ROW_NUMBER() OVER (PARTITION BY (n - 1) DIV {schema.CUSTOMERS_PER_D}
                                ORDER BY CRC32(CONCAT('credit:', %s, ':', %s, ':', n))) AS credit_rank_
      FROM tpcc_load_numbers WHERE n <= {_CUSTOMERS_PER_W} {MATERIALIZE}) r
WHERE id = 1
ORDER BY d_, c_"""  # the window hands the rows over in its own order (CRC32 within a district): inserted so, the
                    # clustered index splits its pages at random and CUSTOMER comes out half again as large

LOAD_HISTORY = f"""
INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
SELECT (n - 1) % {schema.CUSTOMERS_PER_D} + 1, (n - 1) DIV {schema.CUSTOMERS_PER_D} + 1, %s,
       (n - 1) DIV {schema.CUSTOMERS_PER_D} + 1, %s, %s, 10.00, {a_string(12, 24)}
FROM {FROM_POOL}, tpcc_load_numbers WHERE id = 1 AND n <= {_CUSTOMERS_PER_W}"""

# O_C_ID: a random permutation of 1..3000 in every district: ROW_NUMBER over a pseudo-random order keyed by the
# load's time and the warehouse.  Not ORDER BY RAND(): MySQL 9 refuses a non-deterministic window order (ERROR 3587).
LOAD_ORDERS = f"""
INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
SELECT o_, d_, %s, c_, %s, IF(o_ < {schema.FIRST_NEW_ORDER}, 1 + FLOOR(RAND() * 10), NULL),
       {schema.MIN_OL_CNT} + FLOOR(RAND() * {schema.MAX_OL_CNT - schema.MIN_OL_CNT + 1}), 1
FROM (SELECT (n - 1) % {schema.ORDERS_PER_D} + 1 AS o_, (n - 1) DIV {schema.ORDERS_PER_D} + 1 AS d_,
             ROW_NUMBER() OVER (PARTITION BY (n - 1) DIV {schema.ORDERS_PER_D}
                                ORDER BY CRC32(CONCAT(%s, ':', %s, ':', n))) AS c_
      FROM tpcc_load_numbers WHERE n <= {schema.DISTRICTS_PER_W * schema.ORDERS_PER_D}) r"""

LOAD_NEW_ORDER = f"""
INSERT INTO new_order (no_o_id, no_d_id, no_w_id)
SELECT {schema.FIRST_NEW_ORDER} + (n - 1) % {schema.NEW_ORDERS_PER_D}, (n - 1) DIV {schema.NEW_ORDERS_PER_D} + 1, %s
FROM tpcc_load_numbers WHERE n <= {schema.DISTRICTS_PER_W * schema.NEW_ORDERS_PER_D}"""

LOAD_ORDER_LINE = f"""
INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
                        ol_quantity, ol_amount, ol_dist_info)
SELECT o.o_id, o.o_d_id, o.o_w_id, s.n, 1 + FLOOR(RAND() * {schema.ITEMS}), o.o_w_id,
       IF(o.o_id < {schema.FIRST_NEW_ORDER}, o.o_entry_d, NULL), 5,
       IF(o.o_id < {schema.FIRST_NEW_ORDER}, 0.00, (1 + FLOOR(RAND() * 999999)) / 100), {a_string(24, 24)}
FROM {FROM_POOL}, orders o  -- orders first, lines 1..15 of each: rows come in primary-key order
     STRAIGHT_JOIN tpcc_load_numbers s ON s.n <= {schema.MAX_OL_CNT} AND s.n <= o.o_ol_cnt
WHERE id = 1 AND o.o_w_id = %s"""


# ---------------------------------------------------------------------------
# The plan: one task a table, one statement a warehouse


@dataclass
class Statement:
    sql: str
    params: tuple
    rows: int  # expected (ORDER-LINE: estimated, 10 lines an order)


@dataclass
class TableTask:
    """One transaction: the statements that load one table (for one warehouse, or all of them)."""

    table: str
    statements: list[Statement]
    after: tuple[str, ...] = ()  # keys of tasks that must be committed first
    weight: float = 1.0  # relative cost (bytes), to start the biggest first
    warehouse: int | None = None  # None: every warehouse in this one transaction

    @property
    def key(self) -> str:
        return self.table if self.warehouse is None else f"{self.table}:{self.warehouse}"

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.statements)


@dataclass
class LoadPlan:
    database: str
    warehouses: int
    jobs: int
    c_load: dict[str, int]
    load_time: str
    bulk: bool = False  # one transaction a table on the InnoDB bulk-insert path, else one a table and warehouse
    tasks: list[TableTask] = field(default_factory=list)

    def table_rows(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks:
            out[t.table] = out.get(t.table, 0) + t.rows
        return out

    @property
    def total_rows(self) -> int:
        return sum(t.rows for t in self.tasks)

    def describe(self) -> str:
        how = "one bulk transaction a table" if self.bulk else "one transaction a table and warehouse"
        lines = [f"load TPC-C into database {self.database}: {self.warehouses} warehouse(s), "
                 f"{self.jobs} job(s), {how}"]
        for table, rows in self.table_rows().items():
            lines.append(f"  {table}: ~{rows} rows")
        return "\n".join(lines)


@dataclass
class LoadResult:
    warehouses: int
    seconds: float
    row_counts: dict[str, int]
    verified: bool
    database: str = "tpcc"
    jobs: int = 1
    c_load: dict[str, int] = field(default_factory=dict)
    table_seconds: dict[str, float] = field(default_factory=dict)
    verify_seconds: float = 0.0
    checks: Any = None  # tuner.tpcc.check.CheckReport of the initial-state verification

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": self.database, "warehouses": self.warehouses, "jobs": self.jobs,
            "seconds": round(self.seconds, 3), "verify_seconds": round(self.verify_seconds, 3),
            "row_counts": dict(self.row_counts), "verified": self.verified, "c_load": dict(self.c_load),
            "table_seconds": {k: round(v, 3) for k, v in self.table_seconds.items()},
            "checks": self.checks.to_dict() if self.checks is not None else None,
        }


def default_jobs() -> int:
    """One connection a core, at least 2 (the server does the work; stock alone is ~40% of it)."""
    return max(2, min(4, os.cpu_count() or 2))


def validate(warehouses: Any, jobs: Any, database: str) -> tuple[int, int]:
    if isinstance(warehouses, bool) or not isinstance(warehouses, int) or warehouses < 1:
        raise UsageError(f"--warehouses {warehouses} is not valid; give a whole number of 1 or more")
    if jobs is None:
        jobs = default_jobs()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"--jobs {jobs} is not valid; give a whole number of 1 or more (or leave it out)")
    if not database or "`" in database or len(database) > 64:
        raise UsageError(f"database name {database!r} is not valid; give a plain name such as tpcc")
    return warehouses, min(jobs, MAX_JOBS)


# approximate bytes a warehouse (item: in all), so the longest tasks start first
TABLE_WEIGHTS = {"stock": 31e6, "order_line": 21e6, "customer": 20e6, "item": 8e6, "orders": 1.5e6,
                 "history": 1.5e6, "new_order": 0.1e6, "district": 1e3, "warehouse": 1e2}


def _per_warehouse_statements(w: int, load_time: str, customer_sql: str) -> dict[str, Statement]:
    per_w = schema.DISTRICTS_PER_W
    return {
        "stock": Statement(LOAD_STOCK, (w,), schema.STOCK_PER_W),
        "orders": Statement(LOAD_ORDERS, (w, load_time, load_time, w), per_w * schema.ORDERS_PER_D),
        "order_line": Statement(LOAD_ORDER_LINE, (w,), per_w * schema.ORDERS_PER_D * 10),
        "customer": Statement(customer_sql, (w, load_time, load_time, w), per_w * schema.CUSTOMERS_PER_D),
        "history": Statement(LOAD_HISTORY, (w, w, load_time), per_w * schema.CUSTOMERS_PER_D),
        "new_order": Statement(LOAD_NEW_ORDER, (w,), per_w * schema.NEW_ORDERS_PER_D),
    }


def build_plan(warehouses: int, database: str, jobs: int, c_load_c_last: int, load_time: str,
               bulk: bool = False) -> LoadPlan:
    """The tasks of a load.  ORDER-LINE is generated from ORDERS, so it waits for it."""
    plan = LoadPlan(database=database, warehouses=warehouses, jobs=jobs, c_load={"c_last": c_load_c_last},
                    load_time=load_time, bulk=bulk)
    customer_sql = LOAD_CUSTOMER.replace("{nurand}", nurand_c_last_sql(c_load_c_last))
    per_w = {w: _per_warehouse_statements(w, load_time, customer_sql) for w in range(1, warehouses + 1)}
    tasks = [
        TableTask("item", [Statement(LOAD_ITEM, (), schema.ITEMS)], weight=TABLE_WEIGHTS["item"]),
        TableTask("district", [Statement(LOAD_DISTRICT, (warehouses,), warehouses * schema.DISTRICTS_PER_W)],
                  weight=TABLE_WEIGHTS["district"]),
        TableTask("warehouse", [Statement(LOAD_WAREHOUSE, (warehouses,), warehouses)],
                  weight=TABLE_WEIGHTS["warehouse"]),
    ]
    for table in ("stock", "orders", "order_line", "customer", "history", "new_order"):
        if bulk:
            after = ("orders",) if table == "order_line" else ()
            tasks.append(TableTask(table, [per_w[w][table] for w in per_w], after=after,
                                   weight=TABLE_WEIGHTS[table] * warehouses))
        else:
            for w in per_w:
                after = (f"orders:{w}",) if table == "order_line" else ()
                tasks.append(TableTask(table, [per_w[w][table]], after=after, weight=TABLE_WEIGHTS[table],
                                       warehouse=w))
    # ORDERS gates ORDER-LINE: run it early; then the biggest first, warehouse by warehouse
    tasks.sort(key=lambda t: (t.table != "orders", t.warehouse or 0, -t.weight))
    plan.tasks = tasks
    return plan


# ---------------------------------------------------------------------------
# Execution


# byte b -> ALPHANUMERIC[b % 62] for b < 248 (= 4 * 62); bytes 248..255 are dropped, so every symbol is
# equally likely (rejection sampling, done by bytes.translate in C)
_POOL_TABLE = bytes(ALPHANUMERIC.encode()[b % len(ALPHANUMERIC)] if b < 248 else 0 for b in range(256))
_POOL_REJECT = bytes(range(4 * len(ALPHANUMERIC), 256))


def _random_pool(nbytes: int) -> bytes:
    """``nbytes`` random alphanumerics (62 symbols, uniform), from the OS's random source."""
    out = bytearray()
    while len(out) < nbytes:
        out += os.urandom(nbytes - len(out) + nbytes // 16).translate(_POOL_TABLE, _POOL_REJECT)
    return bytes(out[:nbytes])


def _session(spec: ConnectionSpec, database: str, bulk: bool):
    conn = spec.with_database(database).connect()
    cur = conn.cursor()
    cur.execute(SESSION_BULK if bulk else SESSION_ROWS)
    try:
        cur.execute(SESSION_NO_BINLOG)
    except Exception:  # no privilege, or no binary log: nothing to skip
        pass
    cur.close()
    return conn


def _prepare_helpers(conn) -> None:
    cur = conn.cursor()
    cur.execute(DROP_HELPERS)
    cur.execute(CREATE_NUMBERS)
    cur.execute(FILL_NUMBERS)
    cur.execute(CREATE_POOL)
    pool = _random_pool(POOL_BYTES)
    cur.execute(INSERT_POOL, (pool[:POOL_CHUNK],))
    for off in range(POOL_CHUNK, len(pool), POOL_CHUNK):
        cur.execute(APPEND_POOL, (pool[off:off + POOL_CHUNK],))
    cur.close()


class _Scheduler:
    """Hands the ready task with the largest weight to whichever job asks; tracks what is committed."""

    def __init__(self, tasks: list[TableTask]):
        self.pending = list(tasks)
        self.done: set[str] = set()
        self.failed: BaseException | None = None
        self.cond = threading.Condition()

    def next(self) -> TableTask | None:
        with self.cond:
            while True:
                if self.failed is not None or not self.pending:
                    return None
                for t in self.pending:
                    if all(d in self.done for d in t.after):  # keys of committed tasks
                        self.pending.remove(t)
                        return t
                self.cond.wait()

    def finish(self, key: str) -> None:
        with self.cond:
            self.done.add(key)
            self.cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            if self.failed is None:
                self.failed = exc
            self.cond.notify_all()


def _run_task(conn, task: TableTask, on_rows: Callable[[str, int], None]) -> float:
    t0 = time.monotonic()
    cur = conn.cursor()
    cur.execute("BEGIN")
    for st in task.statements:
        cur.execute(st.sql, st.params)
        on_rows(task.table, cur.rowcount if cur.rowcount and cur.rowcount > 0 else st.rows)
    cur.execute("COMMIT")
    cur.close()
    return time.monotonic() - t0


def execute_plan(spec: ConnectionSpec, plan: LoadPlan, on_rows: Callable[[str, int], None]) -> dict[str, float]:
    """Run the table tasks on ``plan.jobs`` connections; returns seconds a table."""
    sched = _Scheduler(plan.tasks)
    seconds: dict[str, float] = {}
    lock = threading.Lock()

    def worker() -> None:
        conn = None
        try:
            conn = _session(spec, plan.database, plan.bulk)
            while (task := sched.next()) is not None:
                took = _run_task(conn, task, on_rows)
                with lock:
                    seconds[task.table] = seconds.get(task.table, 0.0) + took
                sched.finish(task.key)
        except BaseException as exc:  # handed to the caller below
            sched.fail(exc)
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass

    threads = [threading.Thread(target=worker, name=f"tpcc-load-{i}", daemon=True)
               for i in range(min(plan.jobs, len(plan.tasks)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if sched.failed is not None:
        exc = sched.failed
        if isinstance(exc, InnotierError):
            raise exc
        raise WorkloadError(f"loading TPC-C into {plan.database} failed: {getattr(exc, 'msg', exc)}; "
                            f"fix the cause and load again with --drop") from exc
    return seconds


class _Progress:
    """A rich progress bar over rows (or nothing when progress is off)."""

    def __init__(self, enabled: bool, plan: LoadPlan):
        self.enabled = enabled
        self.lock = threading.Lock()
        self.bar = None
        if enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), transient=False)
            self.task_ids = {table: self.bar.add_task(table, total=rows)
                             for table, rows in plan.table_rows().items()}

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def rows(self, table: str, n: int) -> None:
        """Count n more rows of a table.  Some totals are expectations (order_line: 5-15 lines an order, 10 on
        average), so a table that outgrows its total gets the rows done as its total: never past 100%."""
        if self.bar is not None:
            with self.lock:
                task_id = self.task_ids[table]
                task = next(t for t in self.bar.tasks if t.id == task_id)
                if task.completed + n > (task.total or 0):
                    self.bar.update(task_id, total=task.completed + n)
                self.bar.advance(task_id, n)

    def finish(self) -> None:
        """Every table is loaded: its count is its total (a table below its expectation ends at 100% too)."""
        if self.bar is not None:
            for task in self.bar.tasks:
                self.bar.update(task.id, total=task.completed)

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text)


def load(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", jobs: int | None = None,
         drop: bool = False, progress: bool = True, bulk: bool = False) -> LoadResult:
    """Create and load the TPC-C schema with ``warehouses`` warehouses; verify it; return what was done.

    Refuses a database that already holds TPC-C tables unless ``drop`` (then only
    those tables are dropped).  Bad arguments and unreachable servers fail before
    anything is changed.
    """
    warehouses, jobs = validate(warehouses, jobs, database)
    t0 = time.monotonic()
    admin = spec.with_database(None).connect()  # ServerError when unreachable: nothing changed yet
    try:
        present = schema.present_tables(admin, database)
        if present and not drop:
            raise WorkloadError(f"database {database} already has TPC-C tables ({', '.join(present)}); "
                                f"pass --drop to replace them, or load into another --database")
        constants = make_constants(seed=int.from_bytes(os.urandom(8), "little"))
        load_time = datetime.datetime.now().replace(microsecond=0).isoformat(sep=" ")
        plan = build_plan(warehouses, database, jobs, constants.c_last, load_time, bulk=bulk)
        if present:
            schema.drop_schema(admin, database)
        schema.create_schema(admin, database)
        schema.write_meta(admin, {"state": "loading", "warehouses": warehouses, "loader": LOADER_VERSION,
                                  "c_load_c_last": constants.c_last, "c_load_c_id": constants.c_id,
                                  "c_load_ol_i_id": constants.ol_i_id, "loaded_at": load_time})
        _prepare_helpers(admin)
        with _Progress(progress, plan) as bar:
            table_seconds = execute_plan(spec, plan, bar.rows)
            load_seconds = time.monotonic() - t0
            bar.finish()
        # after the bars are closed: in a pipe or a log rich prints them only then, and this comes after them
        bar.note(f"loaded in {load_seconds:.1f} s; verifying row counts and initial-state invariants")
        cur = admin.cursor()
        cur.execute(DROP_HELPERS)
        cur.close()
        return _verify(spec, admin, plan, constants, table_seconds, t0)
    finally:
        admin.close()


def _verify(spec, admin, plan: LoadPlan, constants, table_seconds, t0) -> LoadResult:
    t_verify = time.monotonic()
    report, counts, problems = verify_load(lambda: spec.with_database(plan.database).connect(), plan.database,
                                           plan.warehouses, plan.jobs)
    problems += [f"{r.clause} {r.description}" for r in report.results if not r.passed]
    if problems:
        raise WorkloadError(f"the load of {plan.database} did not verify ({'; '.join(problems[:4])}); "
                            f"it stays marked unloaded: load again with --drop")
    schema.write_meta(admin, {"state": "loaded"})
    seconds = time.monotonic() - t0
    return LoadResult(warehouses=plan.warehouses, seconds=seconds, row_counts=counts, verified=True,
                      database=plan.database, jobs=plan.jobs, c_load=constants.to_dict(),
                      table_seconds=table_seconds, verify_seconds=time.monotonic() - t_verify, checks=report)
