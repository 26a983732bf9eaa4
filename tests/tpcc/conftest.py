"""Fixtures shared by the TPC-C tests (the session-wide ones are in tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tuner.core.server import ConnectionSpec
from tuner.tpcc import loader
from tuner.tpcc.adapters import _common as common


def _database_for(request) -> str:
    """A database name for the test (letters, digits and _ only, at most 64 characters)."""
    return "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]


@dataclass
class DistrictDb:
    """A one-table schema (district: d_id, d_next_o_id) on the shared sandbox, and a session on it."""

    spec: ConnectionSpec
    database: str
    conn: Any

    def new_orders(self, n: int) -> None:
        """``n`` committed New-Order id increments in district 1, as the counters see a New-Order."""
        cur = self.conn.cursor()
        for _ in range(n):
            cur.execute("UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_id = 1")
            self.conn.commit()
        cur.close()


@pytest.fixture
def district_db(shared_sandbox, request):
    """What the server-side counters read (sum of d_next_o_id): districts 1 and 2 at 3001, in a database
    named for the test."""
    spec = shared_sandbox.connection_spec()
    database = _database_for(request)
    common.prepare_database(spec, database, drop=True, tool="test")
    conn = spec.with_database(database).connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE district (d_id INT PRIMARY KEY, d_next_o_id INT)")
    cur.execute("INSERT INTO district VALUES (1, 3001), (2, 3001)")
    conn.commit()
    cur.close()
    try:
        yield DistrictDb(spec, database, conn)
    finally:
        conn.close()


@dataclass
class LoadedDb:
    """A fresh W=1 TPC-C schema of ours on the shared sandbox, a session and a cursor on it."""

    spec: ConnectionSpec
    database: str
    conn: Any
    cur: Any


@pytest.fixture
def w1_db(shared_sandbox, request):
    """A W=1 schema loaded by our loader into a database named for the test, dropped afterwards."""
    spec = shared_sandbox.connection_spec()
    database = _database_for(request)
    loader.load(spec, 1, database=database, drop=True, progress=False)
    conn = spec.with_database(database).connect()
    cur = conn.cursor()
    try:
        yield LoadedDb(spec, database, conn, cur)
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cur.close()
        conn.close()
