"""One client connection of the TPC-C driver: the thinnest path to the server mysql-connector offers.

The driver spends its CPU budget here, so a session talks to the C extension's
low-level ``_mysql_connector.MySQL`` object (what ``CMySQLConnection`` wraps)
directly: ``query()`` for a procedure CALL and ``stmt_prepare()`` /
``stmt_execute()`` for client-side prepared statements.  Both release the GIL
while they wait for the server, so one worker process can drive many sessions
from threads.  The connection itself is opened by ``ConnectionSpec.connect()``,
the one place that knows how to authenticate.

Errors come back classified (``classify``): deadlock and lock-wait timeout are
retried by the caller, an unused-item SIGNAL from the New-Order procedure is a
rollback, a lost connection ends the run.
"""

from __future__ import annotations

from typing import Any

# MySQL/MariaDB error numbers (server and client): https://mariadb.com/kb/en/mariadb-error-codes/
ER_LOCK_WAIT_TIMEOUT = 1205
ER_LOCK_DEADLOCK = 1213
ER_CHECKREAD = 1020  # "Record has changed since last read": MariaDB 11.6+ (innodb_snapshot_isolation=ON) aborts
                     # a repeatable-read transaction that would lock a row changed after its snapshot
ER_TABLE_DEF_CHANGED = 1412  # "Table definition has changed, please retry transaction": a read view older than an
                             # online rebuild of a table it reads (a table move), as the message says
ER_SIGNAL_EXCEPTION = 1644  # an unhandled user SIGNAL SQLSTATE '45000' (the New-Order rollback)
RETRYABLE = frozenset({ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK, ER_CHECKREAD, ER_TABLE_DEF_CHANGED})
CONNECTION_LOST = frozenset({
    1053,  # ER_SERVER_SHUTDOWN
    1927,  # ER_CONNECTION_KILLED (MariaDB)
    2002, 2003,  # cannot connect (socket / TCP)
    2006,  # CR_SERVER_GONE_ERROR
    2013,  # CR_SERVER_LOST
    2055,  # CR_SERVER_LOST_EXTENDED
    4031,  # ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
})

UNUSED_ITEM_MESSAGE = "tpcc: item not found, New-Order rolled back"


class Rollback(Exception):
    """The transaction rolled back as TPC-C asks (New-Order's unused item, clause 2.4.2.3)."""


class ConnectionLost(Exception):
    """The server went away; the run cannot go on."""


def classify(exc: BaseException) -> str:
    """Map a driver exception to retry / rollback / lost / error."""
    if isinstance(exc, Rollback):
        return "rollback"
    errno = getattr(exc, "errno", None)
    if errno in RETRYABLE:
        return "retry"
    if errno == ER_SIGNAL_EXCEPTION and UNUSED_ITEM_MESSAGE in str(getattr(exc, "msg", exc)):
        return "rollback"
    if errno in CONNECTION_LOST or isinstance(exc, ConnectionLost):
        return "lost"
    if errno is None and "connect" in str(exc).lower():
        return "lost"
    return "error"


class Session:
    """A connection for one simulated terminal.

    ``autocommit`` is on in procedures mode (each procedure opens and commits its
    own transaction) and off in statements mode (the first statement opens the
    transaction; ``commit()`` ends it), which saves a round trip per transaction.
    """

    def __init__(self, spec, autocommit: bool) -> None:
        self._conn = spec.connect()  # keeps the wrapper (and the socket) alive
        self.low = self._conn._cmysql  # the C extension's MySQL object
        self.low.autocommit(autocommit)
        self._stmts: dict[str, Any] = {}

    # -- text protocol (procedure CALLs, COMMIT/ROLLBACK) ----------------------

    def call(self, sql: bytes) -> None:
        """Run one statement whose results we do not need (a CALL), draining every result."""
        low = self.low
        low.query(sql)
        while True:
            if low.have_result_set:
                low.consume_result()
            if not low.more_results():
                break
            low.next_result()

    def call_rows(self, sql: bytes) -> list[list[tuple]]:
        """Run a CALL and return the rows of every result set it produced (the transaction's output)."""
        low = self.low
        low.query(sql)
        sets: list[list[tuple]] = []
        while True:
            if low.have_result_set:
                rows = []
                row = low.fetch_row()
                while row is not None:
                    rows.append(row)
                    row = low.fetch_row()
                low.free_result()
                sets.append(rows)
            if not low.more_results():
                break
            low.next_result()
        return sets

    def commit(self) -> None:
        self.low.commit()

    def rollback(self) -> None:
        self.low.rollback()

    # -- prepared statements --------------------------------------------------

    def rows(self, sql: str, *args: Any) -> list[tuple]:
        """Execute a prepared statement and return all its rows."""
        st = self._stmts.get(sql)
        if st is None:
            st = self._stmts[sql] = self.low.stmt_prepare(sql.encode())
        st.stmt_execute(*args, query_attrs=[])
        if not st.have_result_set:
            return []
        out = []
        fetch = st.fetch_row
        row = fetch()
        while row:
            out.append(row)
            row = fetch()
        st.free_result()
        return out

    def execute(self, sql: str, *args: Any) -> int:
        """Execute a prepared DML statement; return the affected-row count."""
        st = self._stmts.get(sql)
        if st is None:
            st = self._stmts[sql] = self.low.stmt_prepare(sql.encode())
        st.stmt_execute(*args, query_attrs=[])
        if st.have_result_set:
            st.free_result()
        return self.low.affected_rows()

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # the server may be gone; nothing to release then
            pass
