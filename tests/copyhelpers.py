"""Helpers for the copy layer's tests (tests/move): file ages, a row writer that rides through restarts, a move.

- ``age`` / ``trust_timestamps``: make the racily-clean rule not apply, so a pass may keep a file by its stat;
- ``RowWriter``: a thread inserting numbered rows, one transaction each, remembering acknowledged ids;
- ``move``: an ``Executor`` for a move of a sandbox's component (``on_state`` called as each state begins);
- ``unequal_files``: files of a copy that differ from their source, both read now.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

from datadir_mover.move.copy import RACY_MARGIN_NS, digest_file, walk


def age(path: Path) -> None:
    """Make a file look modified long before any copy read it (the racily-clean rule does not apply)."""
    old = time.time_ns() - 10 * RACY_MARGIN_NS
    os.utime(path, ns=(old, old))


def trust_timestamps(manifest) -> None:
    """Pretend the pass read every file long after its last change (ctime cannot be set back)."""
    for rec in manifest.records.values():
        rec.read_at_ns += 10 * RACY_MARGIN_NS


class RowWriter(threading.Thread):
    """Inserts numbered rows into ``table`` (id INT PRIMARY KEY, at DATETIME(6)), one transaction each,
    reconnecting through a restart; ``acked`` holds the ids the server acknowledged."""

    def __init__(self, spec, table: str):
        super().__init__(daemon=True)
        self.spec = spec
        self.table = table
        self.stop = threading.Event()
        self.acked: list[int] = []
        self.errors = 0

    def run(self) -> None:
        conn = None
        n = 0
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = self.spec.with_database(None).connect(connection_timeout=2)
                n += 1
                cur = conn.cursor()
                cur.execute(f"INSERT INTO {self.table} (id, at) VALUES (%s, NOW(6))", (n,))
                conn.commit()
                self.acked.append(n)  # the server acknowledged the commit
            except Exception:
                self.errors += 1
                try:
                    conn and conn.close()
                except Exception:
                    pass
                conn = None
                self.stop.wait(0.05)  # the server is restarting: do not spin on connection refusals


def move(sandbox: str, component: str, to: str, precopy: bool, on_state=None, verify: str = "sample") -> tuple:
    """(executor, plan) of a move of ``component`` of ``sandbox`` to ``to``."""
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from tuner.core.sandbox import Sandbox

    spec = Sandbox.load(sandbox).connection_spec()
    plan = planmod.build(planmod.MoveRequest(component, to, precopy=precopy, probe=False, verify=verify), spec)
    ex = Executor.create(plan)
    if on_state:
        ex.on_state = on_state
    return ex, plan


def unequal_files(source: str, target: str) -> list[str]:
    """Files copied to ``target`` that differ from their source (whole-file digests, both read now)."""
    return [rel for rel, st in walk(target) if stat.S_ISREG(st.st_mode) and
            digest_file(os.path.join(target, rel), drop_cache=False) != digest_file(os.path.join(source, rel),
                                                                                     drop_cache=False)]
