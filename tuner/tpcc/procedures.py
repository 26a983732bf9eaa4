"""Install the five TPC-C stored procedures (procedures mode); idempotent.

Each procedure's text lives in its transaction module (``CREATE_PROCEDURE``).
A procedure is tagged with a COMMENT holding a hash of its text: an installed
procedure with the same tag is left alone, any other version is replaced
(DROP + CREATE), so re-running is cheap and an upgrade is picked up.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tuner.core.errors import ServerError
from tuner.tpcc import delivery, new_order, order_status, payment, stock_level

MODULES = (new_order, payment, order_status, delivery, stock_level)

SELECT_INSTALLED = ("SELECT ROUTINE_NAME, ROUTINE_COMMENT FROM information_schema.ROUTINES "
                    "WHERE ROUTINE_SCHEMA = %s AND ROUTINE_TYPE = 'PROCEDURE'")
DROP_PROCEDURE = "DROP PROCEDURE IF EXISTS `{name}`"


def tag(create_sql: str) -> str:
    return "innotier tpcc " + hashlib.sha256(create_sql.encode()).hexdigest()[:16]


def tagged_text(create_sql: str) -> str:
    """The CREATE PROCEDURE text with its version COMMENT (a characteristic, placed before BEGIN)."""
    head, sep, body = create_sql.partition("\nBEGIN\n")
    return f"{head}\nCOMMENT '{tag(create_sql)}'{sep}{body}"


@dataclass
class InstallResult:
    installed: list[str]
    unchanged: list[str]


def install(conn, database: str) -> InstallResult:
    """Create or replace the procedures in ``database`` on an open connection."""
    cur = conn.cursor()
    try:
        cur.execute(f"USE `{database}`")
        cur.execute(SELECT_INSTALLED, (database,))
        present = {name: comment for name, comment in cur.fetchall()}
        done, same = [], []
        for m in MODULES:
            want = tag(m.CREATE_PROCEDURE)
            if present.get(m.PROCEDURE) == want:
                same.append(m.PROCEDURE)
                continue
            cur.execute(DROP_PROCEDURE.format(name=m.PROCEDURE))
            cur.execute(tagged_text(m.CREATE_PROCEDURE))
            done.append(m.PROCEDURE)
        return InstallResult(installed=done, unchanged=same)
    except Exception as exc:
        msg = getattr(exc, "msg", str(exc))
        raise ServerError(f"cannot install the TPC-C stored procedures in {database}: {msg}; "
                          "the account needs CREATE ROUTINE and the server MariaDB 10.6+ or MySQL 8.0+ "
                          "(JSON_TABLE), or use --mode statements") from None
    finally:
        cur.close()
