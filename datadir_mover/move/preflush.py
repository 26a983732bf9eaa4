"""Flush the buffer pool's dirty pages while the server still runs, so its shutdown has little left to write.

A clean shutdown writes every dirty page before the server exits: with a 1 GiB buffer
pool under a TPC-C load that is hundreds of MiB written while nothing is served.  Before
the stop, the mover lowers ``innodb_max_dirty_pages_pct`` (and its low-water mark) to 0
and raises ``innodb_io_capacity``/``_max``, so the page cleaner flushes at full speed
while clients keep working, waits (at most ``LIMIT_S``) until
``Innodb_buffer_pool_pages_dirty`` is small or stops falling, then stops the server.  The
old values are saved first (in the move's journal directory, so a resumed or rolled-back
move restores the originals, not its own zeros) and put back whenever the server keeps
running: on any failure before the stop.  After a stop they are gone with the server.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

from tuner.core.server import ConnectionSpec, fetch_status

# order matters: the low-water mark may not exceed the maximum, io_capacity may not exceed io_capacity_max
LOWER = (("innodb_max_dirty_pages_pct_lwm", "0"), ("innodb_max_dirty_pages_pct", "0"))
RAISE = (("innodb_io_capacity_max", "100000"), ("innodb_io_capacity", "100000"))
VARIABLES = tuple(v for v, _ in LOWER + RAISE)
LIMIT_S = 30.0  # never wait longer than this for the flush (the shutdown flushes the rest)
ENOUGH_BYTES = 16 << 20  # dirty pages left that a shutdown writes in well under a second
STALL_S = 3.0  # no new low in this long: the clients dirty pages as fast as they are flushed
POLL_S = 0.2


@dataclass
class PreflushResult:
    seconds: float
    dirty_before: int  # pages
    dirty_after: int
    page_size: int
    why: str  # "clean enough", "stalled", "time limit"

    def to_dict(self) -> dict:
        return asdict(self)


def read_settings(conn) -> dict[str, str]:
    cur = conn.cursor()
    cur.execute("SELECT " + ", ".join(f"@@GLOBAL.{v}" for v in VARIABLES))
    row = cur.fetchone()
    cur.close()
    return {v: str(x) for v, x in zip(VARIABLES, row)}


def _set(conn, pairs) -> None:
    cur = conn.cursor()
    for var, value in pairs:
        cur.execute(f"SET GLOBAL {var} = {float(value):g}" if "pct" in var else f"SET GLOBAL {var} = {int(value)}")
    cur.close()


def restore(spec: ConnectionSpec, saved: dict[str, str]) -> bool:
    """Put the saved values back if the server runs; False when it cannot be reached (they died with it)."""
    try:
        conn = spec.with_database(None).connect(connection_timeout=5)
    except Exception:  # noqa: BLE001 - stopped or gone: nothing to restore
        return False
    try:
        # io_capacity may not exceed the max: lower it first, then the max, then it again (refused above the old max)
        order = [("innodb_io_capacity", saved["innodb_io_capacity"]),
                 ("innodb_io_capacity_max", saved["innodb_io_capacity_max"]),
                 ("innodb_io_capacity", saved["innodb_io_capacity"]),
                 ("innodb_max_dirty_pages_pct", saved["innodb_max_dirty_pages_pct"]),
                 ("innodb_max_dirty_pages_pct_lwm", saved["innodb_max_dirty_pages_pct_lwm"])]
        for var, value in order:
            try:
                _set(conn, [(var, value)])
            except Exception:  # noqa: BLE001 - refused in this order: the next setting of it succeeds
                pass
        try:
            return read_settings(conn) == saved
        except Exception:  # noqa: BLE001 - gone meanwhile: so are the settings
            return False
    finally:
        conn.close()


def dirty_pages(conn) -> int:
    return int(fetch_status(conn).get("Innodb_buffer_pool_pages_dirty", 0) or 0)


def flush(spec: ConnectionSpec, page_size: int, limit_s: float = LIMIT_S,
          echo: Callable[[str], None] = lambda s: None) -> PreflushResult:
    """Make the page cleaner flush at full speed and wait until few pages are dirty (the caller saved the settings
    with ``read_settings`` first and puts them back with ``restore``)."""
    conn = spec.with_database(None).connect(connection_timeout=5)
    try:
        t0 = time.monotonic()
        before = dirty_pages(conn)
        enough = max(1, ENOUGH_BYTES // max(page_size, 1))
        if before <= enough:
            return PreflushResult(0.0, before, before, page_size, "clean enough")
        _set(conn, RAISE + LOWER)
        echo(f"flushing {before} dirty pages before the stop (at most {limit_s:.0f} s)")
        low, low_at, now = before, t0, before
        why = "time limit"
        while time.monotonic() - t0 < limit_s:
            time.sleep(POLL_S)
            now = dirty_pages(conn)
            if now <= enough:
                why = "clean enough"
                break
            if now < low:
                low, low_at = now, time.monotonic()
            elif time.monotonic() - low_at > STALL_S:
                why = "stalled"
                break
        return PreflushResult(round(time.monotonic() - t0, 3), before, now, page_size, why)
    finally:
        conn.close()
