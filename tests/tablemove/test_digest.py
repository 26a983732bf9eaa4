"""The row digest that proves a shadow table equal to its original, on real tables of the shared MariaDB sandbox.

Equal contents in another order digest equal; each difference the copy could make (a changed value, NULL for
'', a separator moved between two columns' values, a missing row) digests different; the one-hash-a-row
query gives what the query hashing each row twice gives.
"""

from __future__ import annotations

import pytest

from datadir_mover.tablemove import digest
from tmhelpers import sql

ROWS = [(1, "a", "b"), (2, None, "x"), (3, "", "y"), (4, "p#q", "r")]


def _table(spec, name: str, rows) -> None:
    sql(spec, f"DROP TABLE IF EXISTS digest_t.{name}",
        f"CREATE TABLE digest_t.{name} (id INT PRIMARY KEY, a VARCHAR(8) NULL, b VARCHAR(8) NULL)")
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.executemany(f"INSERT INTO digest_t.{name} VALUES (%s, %s, %s)", rows)
        conn.commit()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def spec(shared_sandbox):
    s = shared_sandbox.connection_spec()
    sql(s, "CREATE DATABASE IF NOT EXISTS digest_t")
    yield s
    sql(s, "DROP DATABASE digest_t")


def _digests(spec, *tables):
    return digest.snapshot_digests(spec, "digest_t", list(tables), ["id", "a", "b"])


@pytest.mark.parametrize("changed", [
    [(1, "a", "c"), *ROWS[1:]],  # a value
    [ROWS[0], (2, "", "x"), *ROWS[2:]],  # NULL became ''
    [*ROWS[:3], (4, "p", "q#r")],  # a separator moved between columns
    ROWS[:3],  # a row missing
])
def test_every_difference_digests_different(spec, changed):
    _table(spec, "orig", ROWS)
    _table(spec, "copy", changed)
    a, b = _digests(spec, "orig", "copy")
    assert a != b


def test_equal_rows_in_another_order_digest_equal_and_as_hashing_twice_did(spec):
    _table(spec, "orig", ROWS)
    _table(spec, "copy", list(reversed(ROWS)))
    a, b = _digests(spec, "orig", "copy")
    assert a == b and a.rows == 4
    row = ("MD5(CONCAT_WS('#', `id`, `a`, `b`, CONCAT(ISNULL(`id`), ISNULL(`a`), ISNULL(`b`)), "
           "CONCAT_WS(',', LENGTH(`id`), LENGTH(`a`), LENGTH(`b`))))")
    twice = sql(spec, f"SELECT COUNT(*), BIT_XOR(CAST(CONV(LEFT({row}, 16), 16, 10) AS UNSIGNED)), "
                      f"BIT_XOR(CAST(CONV(RIGHT({row}, 16), 16, 10) AS UNSIGNED)) FROM digest_t.orig")[0][0]
    assert (a.rows, a.high, a.low) == tuple(int(v) for v in twice)
