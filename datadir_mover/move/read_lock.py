"""The commit block the mover holds on one connection (``block_writes``): taken before the stop's sample, and from
the start until the checksums are compared (``--verify tables``), released by closing the connection (or the stop)."""

from __future__ import annotations

from typing import Callable

from tuner.core.server import ConnectionSpec

LOCK_WAIT_S = 5  # the commit block waits at most this long for a lock (FTWRL queues behind a long query)
SQL_READ_LOCK = "FLUSH TABLES WITH READ LOCK"


# MariaDB 10.4+: block commits without waiting for open transactions to end (FLUSH TABLES WITH READ LOCK
# waits for every table in use, so a client inside a transaction whose next write waits on the lock
# stalls both until a timeout; docs/relocation.md has the figures)
SQL_BLOCK_COMMIT = ("BACKUP STAGE START", "BACKUP STAGE FLUSH", "BACKUP STAGE BLOCK_DDL", "BACKUP STAGE BLOCK_COMMIT")


def block_writes(conn) -> str:
    """Stop every commit on the server for as long as ``conn`` stays open; the statement that did it.

    ``BACKUP STAGE BLOCK_COMMIT`` where the server has it (MariaDB 10.4+): transactions
    already open go on until their commit, which waits, so uncommitted work is rolled back
    by the stop and what a read sees is what the stop keeps.  Elsewhere (MySQL)
    ``FLUSH TABLES WITH READ LOCK``.
    """
    cur = conn.cursor()
    try:
        for sql in SQL_BLOCK_COMMIT:
            cur.execute(sql)
        return SQL_BLOCK_COMMIT[-1]
    except Exception as exc:  # noqa: BLE001 - a server without BACKUP STAGE answers with a syntax error
        if getattr(exc, "errno", None) not in (1064, 1193, 1295):  # parse error, unknown stage, not supported
            raise
        cur.execute(SQL_READ_LOCK)
        return SQL_READ_LOCK
    finally:
        cur.close()


def blocking_connection(spec: ConnectionSpec):
    """A connection holding the commit block (``block_writes``), which waits at most ``LOCK_WAIT_S``."""
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
