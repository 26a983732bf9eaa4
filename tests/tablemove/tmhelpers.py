"""Helpers for the table-move tests: TPC-C clients in the background, where a table's file is, checksums."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


class Clients:
    """`innotier tpcc run` in the background (the real driver, real connections) until ``stop()``.

    Every instance is in ``RUNNING`` until stopped: the package's conftest kills what a failed test left running,
    so no driver outlives its test and writes into the next tests' schema.  Its progress goes to a file, not a
    pipe nobody reads."""

    RUNNING: list["Clients"] = []

    def __init__(self, sandbox: str, spec, clients: int = 4):
        self.spec = spec
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "tpcc", "run", "--sandbox", sandbox, "--clients", str(clients),
             "--workers", "1", "--warmup", "0", "--duration", "3600", "--json"],
            stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=str(REPO), env=dict(os.environ))
        Clients.RUNNING.append(self)
        self.wait_for_commits()

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=60)
        Clients.RUNNING.remove(self)

    def next_order_ids(self) -> int:
        conn = self.spec.with_database(None).connect()
        try:
            cur = conn.cursor()
            cur.execute("SELECT SUM(d_next_o_id) FROM tpcc.district")
            return int(cur.fetchone()[0])
        finally:
            conn.close()

    def wait_for_commits(self, n: int = 5) -> None:
        """New-Orders commit: the clients are working (and, after a move, working on the moved table)."""
        start = self.next_order_ids()
        wait_for(lambda: self.proc.poll() is not None or self.next_order_ids() >= start + n, 60,
                 "TPC-C clients to commit New-Orders")
        assert self.proc.poll() is None, f"the TPC-C run ended early: {self.stderr()}"

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=120)
        Clients.RUNNING.remove(self)
        assert self.proc.returncode == 8, self.stderr()  # stopped by SIGTERM: a partial, clean result
        return json.loads(out)


def file_of(spec, schema: str, table: str) -> str:
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT FILENAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s",
                    (f"{schema}/{table}",))
        row = cur.fetchone()
        return row[0] if row else ""
    finally:
        conn.close()


def sql(spec, *statements: str) -> list:
    conn = spec.with_database(None).connect()
    out = []
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
            out.append(cur.fetchall() if cur.with_rows else None)
    finally:
        conn.close()
    return out


def checksum(spec, table: str) -> int:
    return sql(spec, f"CHECKSUM TABLE {table}")[0][0][1]
