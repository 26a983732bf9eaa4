"""The commit block the mover holds on one connection: taken before the stop's sample, and from the start
until the checksums are compared (``--verify tables``), released by closing the connection (or the stop)."""

from __future__ import annotations

from typing import Callable

from tuner.core.server import ConnectionSpec

from datadir_mover.move.verify import block_writes

LOCK_WAIT_S = 5  # the commit block waits at most this long for a lock (FTWRL queues behind a long query)


def blocking_connection(spec: ConnectionSpec):
    """A connection holding the commit block (``verify.block_writes``), which waits at most ``LOCK_WAIT_S``."""
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_S}")
        cur.close()
        block_writes(conn)
    except BaseException:
        conn.close()
        raise
    return conn


class ReadLock:
    """The block while this mover holds it (``conn``); ``spec`` gives the server's connection when it is taken."""

    def __init__(self, spec: Callable[[], ConnectionSpec]):
        self._spec = spec
        self.conn = None

    @property
    def held(self) -> bool:
        return self.conn is not None

    def take(self) -> None:
        if self.conn is None:
            self.conn = blocking_connection(self._spec())

    def release(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - the server is gone: so is the lock
                pass
            self.conn = None
