"""Where table moves keep their journals, and finding them: ``$INNOTIER_HOME/table-moves/<move id>/``.

Each move uses the mover's ``Journal`` (append-only, fsynced, longest valid prefix, one worker under flock;
``datadir_mover/move/journal.py``) with the states of ``steps.STATES``; ``plan.json`` is the ``TablePlan``.
"""

from __future__ import annotations

from pathlib import Path

from tuner.core.errors import MoveError
from tuner.core.paths import innotier_home

from datadir_mover.move.journal import Journal


def moves_dir() -> Path:
    return innotier_home() / "table-moves"


def all_journals() -> list[Journal]:
    root = moves_dir()
    if not root.is_dir():
        return []
    return [Journal(p) for p in sorted(root.iterdir(), reverse=True) if (p / "plan.json").exists()]


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
    if move_id:
        j = Journal(moves_dir() / move_id)
        if not (j.dir / "plan.json").exists():
            known = ", ".join(x.dir.name for x in all_journals()) or "none"
            raise MoveError(f"no table move {move_id!r} (known: {known}); see `innotier table-move status`")
        return j
    matching = [j for j in all_journals() if phase(j) in phases and (table is None or _table_of(j) == table)]
    if not matching:
        of = f" for {table}" if table else ""
        raise MoveError(f"no table move{of} is {' or '.join(p.replace('_', ' ') for p in phases)}; "
                        "see `innotier table-move status`")
    if len(matching) > 1:
        raise MoveError(f"{len(matching)} table moves are {' or '.join(phases)} "
                        f"({', '.join(j.dir.name for j in matching)}); name one with --id")
    return matching[0]


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
