"""Where table moves keep their journals, and finding them: ``$INNOTIER_HOME/table-moves/<move id>/``.

Each move uses the mover's ``Journal`` (append-only, fsynced, longest valid prefix, one worker under flock;
``datadir_mover/move/journal.py``) with the states of ``steps.STATES``; ``plan.json`` is the ``TablePlan``.
"""

from __future__ import annotations

from pathlib import Path

from tuner.core.errors import MoveError
from tuner.core.paths import innotier_home

from datadir_mover import journal_lookup
from datadir_mover.move.journal import Journal


def moves_dir() -> Path:
    return innotier_home() / "table-moves"


def all_journals() -> list[Journal]:
    return journal_lookup.journals_in(moves_dir(), Journal)


def phase(j: Journal) -> str:
    """open, committed, rolled_back, or home (a committed move home, or one whose table a later move brought
    home): ``back`` without --id looks among the open and committed ones."""
    if j.done("ROLLBACK"):
        return "rolled_back"
    if j.done("COMMIT") and j.plan().get("kind") == "register-root":
        return "registered"
    if j.done("COMMIT"):
        going_home = j.plan().get("kind") != "register-root" and not j.plan().get("root")
        return "home" if going_home or j.load_json("home.json") else "committed"
    return "open"


def find(move_id: str | None, phases: tuple[str, ...], table: str | None = None) -> Journal:
    """The table move named ``move_id``, or the only one in one of ``phases`` (of ``table``, schema.table, when
    given: moves of other tables and other servers do not make the choice ambiguous)."""
    return journal_lookup.find(moves_dir(), move_id, phases, open_journal=Journal, phase_of=phase,
                               noun="table move", status_command="innotier table-move status",
                               keep=None if table is None else (lambda j: _table_of(j) == table),
                               of=f" for {table}" if table else "")


def _table_of(j: Journal) -> str:
    p = j.plan()
    return f"{p.get('schema')}.{p.get('table')}"


def refuse_open_move(schema: str, table: str, server_key: str) -> None:
    for j in all_journals():
        p = j.plan()
        if (p["schema"], p["table"]) == (schema, table) and p.get("server_key") == server_key and phase(j) == "open":
            raise MoveError(f"table move {j.dir.name} of {schema}.{table} is unfinished; resume it "
                            f"(`innotier table-move resume --id {j.dir.name}`) or undo it (`innotier table-move back "
                            f"--id {j.dir.name}`) first; nothing was changed")
