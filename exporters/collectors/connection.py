"""One reused connection to the server under test, shared by the server-side collectors of an exporter.

Scrapes may run concurrently (the HTTP server is threaded), so queries take a lock.  A
failed query drops the connection and the next scrape reconnects: an exporter started
before its server, or one whose server restarts, recovers by itself.
"""

from __future__ import annotations

import threading
from typing import Any

from tuner.core.server import ConnectionSpec

CONNECT_TIMEOUT_SECONDS = 3


def server_label(spec: ConnectionSpec) -> str:
    """Which server the series describe: sandbox name, host:port or socket path (never credentials)."""
    if spec.sandbox:
        return f"sandbox:{spec.sandbox}"
    if spec.socket:
        return f"socket:{spec.socket}"
    return f"{spec.host or '127.0.0.1'}:{spec.port or 3306}"


class ServerConnection:
    def __init__(self, spec: ConnectionSpec) -> None:
        self.spec = spec
        self.label = server_label(spec)
        self._conn = None
        self._lock = threading.Lock()

    def query(self, sql: str, params: tuple = ()) -> list[tuple[Any, ...]]:
        """Rows of ``sql``; raises tuner.core.errors.ServerError (or the driver's error) on failure."""
        with self._lock:
            if self._conn is None:
                self._conn = self.spec.connect(connection_timeout=CONNECT_TIMEOUT_SECONDS)
            try:
                cur = self._conn.cursor()
                cur.execute(sql, params) if params else cur.execute(sql)
                rows = cur.fetchall()
                cur.close()
                return rows
            except Exception:
                self._drop()
                raise

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()


def text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
