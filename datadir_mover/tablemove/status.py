"""``table-move status``: each move's journal, and for a committed move where the table's file is *now*.

A table can leave its tier without innotier: a dump and reload, a ``CREATE TABLE ... LIKE`` and swap, or a
pt-online-schema-change run with ``--remove-data-dir`` land it in the datadir; on MySQL a by-hand ``ALTER
TABLE ... TABLESPACE=innodb_file_per_table``.  (MariaDB 10.11.19 keeps ``DATA DIRECTORY`` through ``ALTER
TABLE ... ALGORITHM=COPY``, ``FORCE`` and ``TRUNCATE``: checked on a sandbox, and 11.8.9 through ``ALGORITHM=COPY``
and ``TRUNCATE``: tests/tablemove/test_table_move_mariadb_11_8.py; older releases differ.)  Status
reads the table's file from the server (``where.table_file``) and reports a table that is no longer where
its committed move put it; the command then exits 1.
"""

from __future__ import annotations

import os

from tuner.core.server import Flavor

from datadir_mover.move.journal import Journal
from datadir_mover.tablemove import store, where
from datadir_mover.tablemove.plan import spec_from_dict


def status_of(j: Journal) -> dict:
    p = j.plan()
    last = j.last()
    row = {"move_id": j.dir.name, "phase": store.phase(j),
           "last": f"{last.state} {last.event}" if last else "-", "where": "", "problem": "", "drifted": False}
    if p.get("kind") == "register-root":
        return {**row, "table": "(register-root)", "to": p["root"]}
    row.update(table=f"{p['schema']}.{p['table']}", to=p.get("root") or "datadir")
    if row["phase"] == "open":
        row["problem"] = (f"unfinished at {row['last']}: `innotier table-move resume --id {j.dir.name}` or "
                          f"`innotier table-move back --id {j.dir.name}`")
    if row["phase"] != "committed":
        return row
    try:
        conn = spec_from_dict(p["connection"]).with_database(None).connect()
        try:
            here = where.table_file(conn, Flavor(p["flavor"]), p["schema"], p["table"])
        finally:
            conn.close()
    except Exception as exc:  # a stopped server or a dropped sandbox: say so, keep listing the others
        row["where"] = f"unknown (server not reachable: {exc.__class__.__name__})"
        return row
    planned_dir = os.path.realpath(os.path.dirname(p["file_after"]))
    if here is None:
        row.update(where="table not found", drifted=True,
                   problem=f"{row['table']} no longer exists on the server (dropped or renamed since the move)")
    elif os.path.realpath(os.path.dirname(here.path)) != planned_dir:
        row.update(where=here.path, drifted=True,
                   problem=f"{row['table']} is no longer where move {j.dir.name} put it: it is in {here.path}, not "
                           f"{planned_dir} (a statement rebuilt it there); move it again with `innotier table-move "
                           "apply`")
    else:
        row["where"] = here.path
    return row
