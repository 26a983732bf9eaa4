"""The nine TPC-C tables: DDL, keys, cardinalities, and what a loaded schema looks like.

Column types follow the TPC-C specification, clause 1.3 (Table Layouts), in the
MySQL spelling HammerDB uses for MariaDB/MySQL (src/mariadb/mariaoltp.tcl,
CreateTables): DECIMAL(4,4) taxes and discounts, DECIMAL(12,2) balances, latin1
(the database HammerDB creates is latin1).  Where HammerDB departs from the spec
(OL_AMOUNT as INT) we follow the spec (DECIMAL(6,2)).

Keys are the ones every standard driver uses (clause 1.3 primary keys; HammerDB,
tpcc-mysql create_table.sql/add_fkey_idx.sql, go-tpc tpcc/ddl.go):

* customer (c_w_id, c_d_id, c_last, c_first) for Payment / Order-Status by last name;
* orders (o_w_id, o_d_id, o_c_id, o_id) for Order-Status's "last order of a customer".

HISTORY has no primary key in the spec; like HammerDB and tpcc-mysql we let
InnoDB use its hidden row id.  The secondary indexes are declared in CREATE TABLE:
MariaDB 10.6+ builds every index of an empty table by sorting when a transaction
bulk-inserts into it (MDEV-24621/MDEV-24818), so adding them afterwards is not
faster (``add_indexes`` is kept for servers where it is, and is idempotent).

Besides the nine tables, the loader keeps ``tpcc_meta`` (name/value): the load
state, the warehouse count and the NURand C constants used at load time
(clause 2.1.6.1 needs C-Load of C_LAST to choose a valid C-Run).
"""

from __future__ import annotations

from typing import Any
from tuner.tpcc.rand import make_constants

# ---------------------------------------------------------------------------
# Cardinalities (clause 1.2.1 / 4.3.3.1); the driver imports these.

ITEMS = 100000
DISTRICTS_PER_W = 10
CUSTOMERS_PER_D = 3000
ORDERS_PER_D = 3000
NEW_ORDERS_PER_D = 900  # the last 900 orders of each district are undelivered (o_id 2101..3000)
FIRST_NEW_ORDER = ORDERS_PER_D - NEW_ORDERS_PER_D + 1  # 2101
MIN_OL_CNT, MAX_OL_CNT = 5, 15
STOCK_PER_W = ITEMS

META_TABLE = "tpcc_meta"
# Schemas loaded by loader version 2 hold a Delivery skip counter table that nothing writes any more (the
# driver counts the skips from what each Delivery returns, tuner/tpcc/delivery.py).  It is left where it is,
# harmless, and still dropped with the schema, so `tpcc load --drop` leaves nothing behind.
LEGACY_TABLES = ("tpcc_delivery_skips",)

# ---------------------------------------------------------------------------
# DDL (clause 1.3), one named constant a table.

CREATE_WAREHOUSE = """
CREATE TABLE warehouse (
  w_id INT NOT NULL,
  w_name VARCHAR(10),
  w_street_1 VARCHAR(20),
  w_street_2 VARCHAR(20),
  w_city VARCHAR(20),
  w_state CHAR(2),
  w_zip CHAR(9),
  w_tax DECIMAL(4,4),
  w_ytd DECIMAL(12,2),
  PRIMARY KEY (w_id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_DISTRICT = """
CREATE TABLE district (
  d_id INT NOT NULL,
  d_w_id INT NOT NULL,
  d_name VARCHAR(10),
  d_street_1 VARCHAR(20),
  d_street_2 VARCHAR(20),
  d_city VARCHAR(20),
  d_state CHAR(2),
  d_zip CHAR(9),
  d_tax DECIMAL(4,4),
  d_ytd DECIMAL(12,2),
  d_next_o_id INT,
  PRIMARY KEY (d_w_id, d_id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_CUSTOMER = """
CREATE TABLE customer (
  c_id INT NOT NULL,
  c_d_id INT NOT NULL,
  c_w_id INT NOT NULL,
  c_first VARCHAR(16),
  c_middle CHAR(2),
  c_last VARCHAR(16),
  c_street_1 VARCHAR(20),
  c_street_2 VARCHAR(20),
  c_city VARCHAR(20),
  c_state CHAR(2),
  c_zip CHAR(9),
  c_phone CHAR(16),
  c_since DATETIME,
  c_credit CHAR(2),
  c_credit_lim DECIMAL(12,2),
  c_discount DECIMAL(4,4),
  c_balance DECIMAL(12,2),
  c_ytd_payment DECIMAL(12,2),
  c_payment_cnt INT,
  c_delivery_cnt INT,
  c_data VARCHAR(500),
  PRIMARY KEY (c_w_id, c_d_id, c_id),
  KEY idx_customer (c_w_id, c_d_id, c_last, c_first)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_HISTORY = """
CREATE TABLE history (
  h_c_id INT,
  h_c_d_id INT,
  h_c_w_id INT,
  h_d_id INT,
  h_w_id INT,
  h_date DATETIME,
  h_amount DECIMAL(6,2),
  h_data VARCHAR(24)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_NEW_ORDER = """
CREATE TABLE new_order (
  no_o_id INT NOT NULL,
  no_d_id INT NOT NULL,
  no_w_id INT NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_ORDERS = """
CREATE TABLE orders (
  o_id INT NOT NULL,
  o_d_id INT NOT NULL,
  o_w_id INT NOT NULL,
  o_c_id INT,
  o_entry_d DATETIME,
  o_carrier_id INT,
  o_ol_cnt INT,
  o_all_local INT,
  PRIMARY KEY (o_w_id, o_d_id, o_id),
  KEY idx_orders (o_w_id, o_d_id, o_c_id, o_id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_ORDER_LINE = """
CREATE TABLE order_line (
  ol_o_id INT NOT NULL,
  ol_d_id INT NOT NULL,
  ol_w_id INT NOT NULL,
  ol_number INT NOT NULL,
  ol_i_id INT,
  ol_supply_w_id INT,
  ol_delivery_d DATETIME,
  ol_quantity INT,
  ol_amount DECIMAL(6,2),
  ol_dist_info CHAR(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_ITEM = """
CREATE TABLE item (
  i_id INT NOT NULL,
  i_im_id INT,
  i_name VARCHAR(24),
  i_price DECIMAL(5,2),
  i_data VARCHAR(50),
  PRIMARY KEY (i_id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_STOCK = """
CREATE TABLE stock (
  s_i_id INT NOT NULL,
  s_w_id INT NOT NULL,
  s_quantity INT,
  s_dist_01 CHAR(24),
  s_dist_02 CHAR(24),
  s_dist_03 CHAR(24),
  s_dist_04 CHAR(24),
  s_dist_05 CHAR(24),
  s_dist_06 CHAR(24),
  s_dist_07 CHAR(24),
  s_dist_08 CHAR(24),
  s_dist_09 CHAR(24),
  s_dist_10 CHAR(24),
  s_ytd INT,
  s_order_cnt INT,
  s_remote_cnt INT,
  s_data VARCHAR(50),
  PRIMARY KEY (s_w_id, s_i_id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""

CREATE_META = f"""
CREATE TABLE {META_TABLE} (
  name VARCHAR(64) NOT NULL,
  value VARCHAR(255),
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=latin1"""


# table name -> DDL, in creation order
TABLES: dict[str, str] = {
    "warehouse": CREATE_WAREHOUSE,
    "district": CREATE_DISTRICT,
    "customer": CREATE_CUSTOMER,
    "history": CREATE_HISTORY,
    "new_order": CREATE_NEW_ORDER,
    "orders": CREATE_ORDERS,
    "order_line": CREATE_ORDER_LINE,
    "item": CREATE_ITEM,
    "stock": CREATE_STOCK,
}

# secondary indexes (also declared in the DDL above); add_indexes() adds any that are missing
SECONDARY_INDEXES: dict[str, tuple[str, str]] = {
    "idx_customer": ("customer", "c_w_id, c_d_id, c_last, c_first"),
    "idx_orders": ("orders", "o_w_id, o_d_id, o_c_id, o_id"),
}

CREATE_DATABASE = "CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET latin1"
SELECT_PRESENT_TABLES = ("SELECT table_name FROM information_schema.tables "
                         "WHERE table_schema = %s AND table_name IN ({names})")
SELECT_PRESENT_INDEXES = ("SELECT DISTINCT index_name FROM information_schema.statistics "
                          "WHERE table_schema = DATABASE() AND index_name IN ({names})")
SELECT_META = "SELECT name, value FROM `{db}`.tpcc_meta"
SELECT_WAREHOUSES = "SELECT COUNT(*) FROM `{db}`.warehouse"
UPSERT_META = "REPLACE INTO tpcc_meta (name, value) VALUES (%s, %s)"


def expected_rows(warehouses: int) -> dict[str, int]:
    """Row counts of a freshly loaded schema (clause 1.2.1, 4.3.3.1).

    ORDER-LINE is not here: it holds sum(o_ol_cnt) rows, each order having a
    random 5..15 lines; the loader verifies it against that sum (condition 3.3.2.4).
    """
    w = warehouses
    districts = w * DISTRICTS_PER_W
    return {
        "warehouse": w,
        "district": districts,
        "customer": districts * CUSTOMERS_PER_D,
        "history": districts * CUSTOMERS_PER_D,
        "new_order": districts * NEW_ORDERS_PER_D,
        "orders": districts * ORDERS_PER_D,
        "item": ITEMS,
        "stock": w * STOCK_PER_W,
    }


def _fetch(conn, sql: str, params: tuple = ()) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, params)
    rows = cur.fetchall()
    cur.close()
    return rows


def present_tables(conn, database: str) -> list[str]:
    """Which of the nine TPC-C tables (and tpcc_meta, and the legacy tables) exist in ``database``."""
    names = list(TABLES) + [META_TABLE, *LEGACY_TABLES]
    rows = _fetch(conn, SELECT_PRESENT_TABLES.format(names=", ".join(["%s"] * len(names))),
                  (database, *names))
    found = {(r[0].decode() if isinstance(r[0], bytes) else r[0]) for r in rows}
    return [n for n in names if n in found]


def schema_present(conn, database: str) -> bool:
    """True when any TPC-C table (or the loader's meta table) exists in ``database``."""
    return bool(present_tables(conn, database))


def create_schema(conn, database: str) -> None:
    """Create the database (if needed), the nine tables and tpcc_meta; ``USE`` the database."""
    cur = conn.cursor()
    cur.execute(CREATE_DATABASE.format(db=database))
    cur.execute(f"USE `{database}`")
    for ddl in list(TABLES.values()) + [CREATE_META]:
        cur.execute(ddl)
    cur.close()


def drop_schema(conn, database: str) -> list[str]:
    """Drop the TPC-C tables, tpcc_meta and any legacy table of ``database`` (not the database: it may hold
    other things)."""
    present = present_tables(conn, database)
    if present:
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS " + ", ".join(f"`{database}`.`{t}`" for t in present))
        cur.close()
    return present


def add_indexes(conn) -> list[str]:
    """Add the secondary indexes that are missing in the current database; returns the ones added."""
    names = list(SECONDARY_INDEXES)
    have = {(r[0].decode() if isinstance(r[0], bytes) else r[0])
            for r in _fetch(conn, SELECT_PRESENT_INDEXES.format(names=", ".join(["%s"] * len(names))),
                            tuple(names))}
    added = []
    cur = conn.cursor()
    for name, (table, cols) in SECONDARY_INDEXES.items():
        if name not in have:
            cur.execute(f"ALTER TABLE {table} ADD INDEX {name} ({cols})")
            added.append(name)
    cur.close()
    return added


def read_meta(conn, database: str) -> dict[str, str]:
    """The loader's notes (state, warehouses, c_load_*); {} when there is no tpcc_meta table."""
    if META_TABLE not in present_tables(conn, database):
        return {}
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in _fetch(conn, SELECT_META.format(db=database))}


def write_meta(conn, values: dict[str, Any]) -> None:
    """Record name/value pairs in tpcc_meta of the current database."""
    cur = conn.cursor()
    for k, v in values.items():
        cur.execute(UPSERT_META, (k, None if v is None else str(v)))
    cur.close()


def warehouse_count(conn, database: str) -> int:
    """Warehouses of a completely loaded schema; 0 when the schema is absent or its load never finished.

    A schema our loader wrote counts only once its load is verified
    (tpcc_meta state=loaded).  A schema another tool loaded (no tpcc_meta) counts
    its warehouse rows.
    """
    present = present_tables(conn, database)
    if "warehouse" not in present:
        return 0
    if META_TABLE in present:
        meta = read_meta(conn, database)
        if meta.get("state") != "loaded":
            return 0
    return int(_fetch(conn, SELECT_WAREHOUSES.format(db=database))[0][0])


def run_constants(conn, database: str, seed: int | None = None):
    """NURand constants for a run on this schema, with C_LAST's C-Run valid for its C-Load (clause 2.1.6.1)."""
    meta = read_meta(conn, database)
    c_load = int(meta["c_load_c_last"]) if meta.get("c_load_c_last", "").isdigit() else None
    return make_constants(seed=seed, c_load=c_load)
