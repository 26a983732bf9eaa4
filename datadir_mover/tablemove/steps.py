"""Carrying out a table move under its journal: one handler per state, resume, undo.

States, in order: PLAN -> PREPARE -> COPY -> VERIFY -> SWAP -> CLEANUP -> COMMIT; ROLLBACK (``back`` on an
unfinished move) can follow any state before SWAP begins.  The journal is the mover's (``datadir_mover/
move/journal.py``: ``S begin`` is fsynced before S starts, ``S done`` after S is durable; a torn last line
and what follows it are ignored); ``resume`` runs the first state not done, from its start.  Each state is
safe to run again:

- PREPARE: AppArmor rule for the tier root (idempotent write); MySQL ``CREATE TABLESPACE`` unless it exists.
- COPY: MySQL ``ALTER TABLE ... TABLESPACE=`` then ``ANALYZE TABLE`` (the rebuilt table's statistics are an
  empty table's until then).  MariaDB: triggers and shadow of an interrupted run are dropped (triggers first, so clients never
  write through a trigger into a missing table), then pt-online-schema-change runs again.  MySQL: ``ALTER
  TABLE ... TABLESPACE=`` is atomic DDL: it ran or it did not.
- VERIFY: the two tables' row digests in one consistent snapshot (MariaDB) must be equal, and the shadow's
  file must be on the tier; MySQL: the table's file is where the plan says and ``CHECK TABLE`` passes.  A
  mismatch stops the move before the swap; nothing clients see has changed.
- SWAP: MariaDB ``ANALYZE TABLE <shadow>`` (its statistics are an empty table's until then), then
  ``RENAME TABLE t TO <old>, <shadow> TO t`` (atomic; skipped when <old> exists, i.e. it
  ran; both names are unique to the move, ``plan.side_names``); MySQL: the ALTER already swapped.
- CLEANUP: MariaDB drops the triggers, then <old>; MySQL going home drops the emptied tablespace; a move
  home retires the AppArmor rule of the move that took the table to the tier.
- COMMIT: the table's file, read back from the server, is the planned one and exists on disk.

Undo before SWAP: MariaDB drops the triggers and the shadow; MySQL puts the table back in its old
tablespace if the ALTER ran and drops the created one; the AppArmor rule goes.  After SWAP began the
table is on the tier for clients: finish with ``resume`` and bring it home with ``back``.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from tuner.core.errors import MoveError
from tuner.core.server import Flavor

from datadir_mover import apparmor
from datadir_mover.move.journal import Journal
from datadir_mover.tablemove import digest, ptosc, store, where
from datadir_mover.tablemove.plan import TABLESPACE_PREFIX, TablePlan

STATES = ("PLAN", "PREPARE", "COPY", "VERIFY", "SWAP", "CLEANUP", "COMMIT")
# clients keep reading and writing during the rebuild; a server that cannot do it online refuses instead of locking
ONLINE = "ALGORITHM=INPLACE, LOCK=NONE"
ER_WRONG_DIRECTORY = 3121  # MySQL: "The directory is not known to InnoDB" (not in innodb_directories)
ER_LOCK_WAIT_TIMEOUT = 1205  # also a metadata-lock wait that ran past lock_wait_timeout
# A DDL statement waiting for the table's exclusive metadata lock queues every new client statement on the
# table behind it; so it waits at most ptosc.DDL_LOCK_WAIT_S, gives up (changing nothing: DDL is atomic) and
# tries again, as pt-online-schema-change does for its own swap
DDL_LOCK_WAIT_S = ptosc.DDL_LOCK_WAIT_S
DDL_TRIES = 120
ALTER_LOCK_WAIT_S = 5


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class TableMover:
    """One table move: its plan, its journal, and a connection opened per step."""

    def __init__(self, plan: TablePlan, journal: Journal, echo: Callable[[str], None] = lambda m: None):
        self.plan = plan
        self.journal = journal
        self.echo = echo
        self.spec = plan.connection_spec()
        self.flavor = Flavor(plan.flavor)

    @classmethod
    def create(cls, plan: TablePlan, echo=lambda m: None) -> "TableMover":
        j = Journal.create(store.moves_dir() / plan.move_id, plan.to_dict())
        return cls(plan, j, echo)

    @classmethod
    def open(cls, journal: Journal, echo=lambda m: None) -> "TableMover":
        return cls(TablePlan.from_dict(journal.plan()), journal, echo)

    # -- the names ------------------------------------------------------------

    @property
    def t(self) -> str:
        return f"{_q(self.plan.schema)}.{_q(self.plan.table)}"

    def shadow(self) -> str:
        return self.plan.shadow_table

    @property
    def old(self) -> str:
        return self.plan.old_table

    def _sql(self, *statements: str) -> None:
        conn = self.spec.with_database(None).connect()
        try:
            cur = conn.cursor()
            for s in statements:
                cur.execute(s)
                if cur.with_rows:
                    cur.fetchall()
            cur.close()
        finally:
            conn.close()

    def _ddl(self, statement: str, wait_s: int = DDL_LOCK_WAIT_S, after_timeout: str | None = None) -> int:
        """Run one DDL statement on the moving table with a short metadata-lock wait, retried; returns the tries.
        ``after_timeout``: a statement run after each wait that ran out (before the next try)."""
        conn = self.spec.with_database(None).connect()
        try:
            cur = conn.cursor()
            cur.execute(f"SET SESSION lock_wait_timeout = {wait_s}")
            for attempt in range(1, DDL_TRIES + 1):
                try:
                    cur.execute(statement)
                    if cur.with_rows:
                        cur.fetchall()  # ANALYZE TABLE answers with a result set
                    return attempt
                except Exception as exc:
                    if getattr(exc, "errno", None) != ER_LOCK_WAIT_TIMEOUT or attempt == DDL_TRIES:
                        raise
                    self.echo(f"{statement.split(' ')[0]} waited {wait_s} s for the table's metadata lock; "
                              f"trying again ({attempt}/{DDL_TRIES})")
                    if after_timeout:
                        cur.execute(after_timeout)
                        if cur.with_rows:
                            cur.fetchall()
            return DDL_TRIES
        finally:
            conn.close()

    def _read(self, fn):
        conn = self.spec.with_database(None).connect()
        try:
            return fn(conn)
        finally:
            conn.close()

    def location(self, table: str | None = None) -> where.TableFile | None:
        return self._read(lambda c: where.table_file(c, self.flavor, self.plan.schema, table or self.plan.table))

    # -- running ----------------------------------------------------------------

    def next_state(self) -> str | None:
        last = self.journal.last()
        if last is None:
            return "PLAN"
        if last.state not in STATES:
            return None
        i = STATES.index(last.state)
        if last.event == "begin":
            return last.state
        return STATES[i + 1] if i + 1 < len(STATES) else None

    def run(self) -> dict:
        if store.phase(self.journal) != "open":
            raise MoveError(f"table move {self.plan.move_id} is {store.phase(self.journal).replace('_', ' ')}; "
                            "nothing to resume")
        self.journal.lock()
        try:
            while (state := self.next_state()) is not None:
                self.journal.begin(state)
                data = HANDLERS[state](self)
                self.journal.finish(state, **(data or {}))
            return self.result()
        finally:
            self.journal.unlock()

    def result(self) -> dict:
        d = {s: self.journal.data(s) for s in STATES if self.journal.done(s)}
        recs = self.journal.records()
        took = recs[-1].at - recs[0].at if recs else 0.0
        return {"move_id": self.plan.move_id, "table": f"{self.plan.schema}.{self.plan.table}",
                "phase": store.phase(self.journal), "file": d.get("COMMIT", {}).get("file"),
                "seconds": round(took, 3), "copy_s": d.get("COPY", {}).get("seconds"),
                "digest": d.get("VERIFY", {}).get("digest"), "swap_s": d.get("SWAP", {}).get("seconds")}

    # -- states ---------------------------------------------------------------------

    def prepare(self) -> dict:
        if not self.plan.going_home:
            apparmor.apply(self.plan.apparmor_change())
        if self.flavor == Flavor.MYSQL and not self.plan.going_home:
            ts = self.plan.tablespace_after
            exists = self._read(lambda c: _tablespace_exists(c, ts))
            if not exists:
                try:
                    self._sql(f"CREATE TABLESPACE {_q(ts)} ADD DATAFILE '{_lit(self.plan.file_after)}' ENGINE=InnoDB")
                except Exception as exc:
                    if getattr(exc, "errno", None) == ER_WRONG_DIRECTORY:
                        raise MoveError(f"the server does not know {self.plan.root} (ERROR 3121): register it with "
                                        f"`innotier table-move register-root {self.plan.root}`, then `innotier "
                                        f"table-move resume --id {self.plan.move_id}`") from None
                    raise
            return {"tablespace": ts, "created": not exists}
        return {}

    def copy(self) -> dict:
        t0 = time.monotonic()
        if self.flavor == Flavor.MYSQL:
            tries = self._alter(self.plan.tablespace_after)
            seconds = time.monotonic() - t0
            # the rebuilt table starts with an empty table's statistics until InnoDB recalculates them in the
            # background; meanwhile New-Order's UPDATE stock JOIN JSON_TABLE was planned as a scan of stock that
            # locked every row (measured: 67,873 rows locked by one statement, the other terminals waiting 55 s)
            self._ddl(f"ANALYZE TABLE {self.t}")
            return {"seconds": round(seconds, 3), "tries": tries, "analyze_s": round(time.monotonic() - t0 - seconds, 3)}
        if sum(r.state == "COPY" and r.event == "begin" for r in self.journal.records()) > 1:
            self._drop_shadow()  # an interrupted run's triggers and shadow
        with self.spec.client_option_file() as defaults:
            res = ptosc.run(defaults, self.plan.schema, self.plan.table, self.plan.root, self.shadow(),
                            self.journal.dir / "pt-osc.log", self.echo, self.plan.request.get("copy_pause_s") or 0.0)
        return {"new_table": res.new_table, "seconds": round(res.seconds, 3), "tool_output": res.output_tail}

    def verify(self) -> dict:
        t0 = time.monotonic()
        if self.flavor == Flavor.MYSQL:
            here = self.location()
            self._expect_file(here, self.plan.table)
            status = self._read(lambda c: _check_table(c, self.t))
            if status != "OK":
                raise MoveError(f"CHECK TABLE {self.t} says {status!r} after the move; the table stays where it is: "
                                f"inspect it, then `innotier table-move back --id {self.plan.move_id}`")
            return {"check_table": status, "seconds": round(time.monotonic() - t0, 3)}
        new = self.shadow()
        self._expect_file(self.location(new), new)
        cols = self._read(lambda c: where.columns(c, self.plan.schema, self.plan.table))
        a, b = digest.snapshot_digests(self.spec, self.plan.schema, [self.plan.table, new], cols)
        if a != b:
            raise MoveError(f"the copy {new} differs from {self.plan.schema}.{self.plan.table} in the same snapshot "
                            f"({b.text()} against {a.text()}); the tables were not swapped and clients still use the "
                            f"original: `innotier table-move back --id {self.plan.move_id}` removes the copy")
        return {"digest": a.text(), "rows": a.rows, "seconds": round(time.monotonic() - t0, 3)}

    def swap(self) -> dict:
        if self.flavor == Flavor.MYSQL:
            return {"seconds": 0.0, "how": "ALTER TABLE swapped in place"}
        s, new = _q(self.plan.schema), _q(self.shadow())
        if self._read(lambda c: where.exists(c, self.plan.schema, self.old)):
            return {"seconds": 0.0, "how": "already swapped"}
        t0 = time.monotonic()
        # statistics first: the shadow's are an empty table's (pt-online-schema-change 3.2.1 compares versions as
        # strings, so on MariaDB 10+ its --analyze-before-swap is off), and with them a New-Order's UPDATE stock
        # JOIN JSON_TABLE scanned and locked the whole table: measured, every terminal waited up to 34 s
        self._ddl(f"ANALYZE TABLE {s}.{new}")
        analyzed = time.monotonic() - t0
        tries = self._ddl(f"RENAME TABLE {self.t} TO {s}.{_q(self.old)}, {s}.{new} TO {self.t}")
        return {"seconds": round(time.monotonic() - t0 - analyzed, 3), "analyze_s": round(analyzed, 3),
                "how": "RENAME TABLE", "tries": tries}

    def cleanup(self) -> dict:
        if self.flavor == Flavor.MARIADB:
            self._drop_triggers()
            self._ddl(f"DROP TABLE IF EXISTS {_q(self.plan.schema)}.{_q(self.old)}")
        elif self.plan.going_home and self.plan.tablespace_before.startswith(TABLESPACE_PREFIX):
            if self._read(lambda c: _tablespace_exists(c, self.plan.tablespace_before)):
                self._sql(f"DROP TABLESPACE {_q(self.plan.tablespace_before)}")
        if self.plan.going_home:
            apparmor.apply(self.plan.apparmor_change())  # retires the block of the move that went to the tier
            origin = self.plan.request.get("home_of")
            if origin:
                Journal(store.moves_dir() / origin).save_json("home.json", {"by": self.plan.move_id,
                                                                             "at": time.time()})
        return {}

    def commit(self) -> dict:
        here = self.location()
        self._expect_file(here, self.plan.table)
        return {"file": here.path, "tablespace": here.space}

    # -- undo ---------------------------------------------------------------------------

    def undo(self) -> dict:
        phase = store.phase(self.journal)
        if phase != "open":
            raise MoveError(f"table move {self.plan.move_id} is {phase.replace('_', ' ')}; `back` on a committed "
                            "move brings the table home as a new move")
        if self.journal.began("SWAP") or self.journal.began("CLEANUP"):
            raise MoveError(f"table move {self.plan.move_id} has swapped the tables (clients use the copy): finish it "
                            f"with `innotier table-move resume --id {self.plan.move_id}`, then bring the table home "
                            "with `innotier table-move back`")
        self.journal.lock()
        try:
            self.journal.begin("ROLLBACK")
            if self.flavor == Flavor.MARIADB:
                self._drop_shadow()
            else:
                self._undo_tablespace()
            if not self.plan.going_home:
                apparmor.remove(self.plan.apparmor_change())
            self.journal.finish("ROLLBACK")
        finally:
            self.journal.unlock()
        here = self.location()
        return {"move_id": self.plan.move_id, "phase": "rolled_back", "file": here.path if here else None}

    def _undo_tablespace(self) -> None:
        here = self.location()
        if here and here.space == self.plan.tablespace_after and here.space != self.plan.tablespace_before:
            self._alter(self.plan.tablespace_before)
            self._ddl(f"ANALYZE TABLE {self.t}")
        created = self.journal.data("PREPARE").get("created")
        if created and self._read(lambda c: _tablespace_exists(c, self.plan.tablespace_after)):
            self._sql(f"DROP TABLESPACE {_q(self.plan.tablespace_after)}")

    # -- helpers ------------------------------------------------------------------------

    def _alter(self, tablespace: str) -> int:
        """MySQL's online rebuild into ``tablespace``.  It waits longer than other DDL (a try that runs out of
        time at its last metadata lock loses the whole rebuild), and after a try that ran out the table is
        analyzed again: measured, with 1 s waits the tries went on for 100 s while New-Order planned scans of
        stock (an empty table's statistics) that held every terminal up to 98 s."""
        return self._ddl(f"ALTER TABLE {self.t} TABLESPACE={_q(tablespace)}, {ONLINE}", wait_s=ALTER_LOCK_WAIT_S,
                         after_timeout=f"ANALYZE TABLE {self.t}")

    def _drop_triggers(self) -> None:
        s = _q(self.plan.schema)
        for name in ptosc.trigger_names(self.plan.schema, self.plan.table):
            self._ddl(f"DROP TRIGGER IF EXISTS {s}.{_q(name)}")

    def _drop_shadow(self) -> None:
        """Triggers first: a client write must never fire a trigger into a shadow that is gone."""
        self._drop_triggers()
        self._ddl(f"DROP TABLE IF EXISTS {_q(self.plan.schema)}.{_q(self.shadow())}")

    def _expect_file(self, here: where.TableFile | None, table: str) -> None:
        want_dir = os.path.dirname(self.plan.file_after)
        if here is None or os.path.dirname(os.path.realpath(here.path)) != os.path.realpath(want_dir):
            raise MoveError(f"{self.plan.schema}.{table} is in {here.path if here else 'no file'}, not in {want_dir} "
                            f"as planned; the move stops here: `innotier table-move back --id {self.plan.move_id}`")
        if not os.path.exists(here.path):
            raise MoveError(f"the server names {here.path} for {self.plan.schema}.{table} but there is no such file "
                            "on this host; run innotier on the server's host")


def _lit(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _tablespace_exists(conn, name: str) -> bool:
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TABLESPACES WHERE NAME = %s", (name,))
    n = cur.fetchone()[0]
    cur.close()
    return bool(n)


def _check_table(conn, table: str) -> str:
    cur = conn.cursor()
    cur.execute(f"CHECK TABLE {table}")
    rows = cur.fetchall()
    cur.close()
    return next((str(r[3]) for r in rows if str(r[2]).lower() == "status"), str(rows[-1][3]) if rows else "?")


HANDLERS = {"PLAN": lambda m: {}, "PREPARE": TableMover.prepare, "COPY": TableMover.copy,
            "VERIFY": TableMover.verify, "SWAP": TableMover.swap, "CLEANUP": TableMover.cleanup,
            "COMMIT": TableMover.commit}
