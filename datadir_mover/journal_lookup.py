"""Finding one journaled operation: by its id, or as the only one in some phases.

The rule the resume, back/rollback, finalize and status commands share: a named id must exist (the refusal
lists the known ones); without an id, exactly one operation may be in the phases asked for (none or several
is one line naming the fix).  Journals are directories ``<root>/<id>/`` holding a ``plan.json``, newest first
(ids start with a timestamp).  The journal class (anything with ``.dir``) and its phase are passed in, so
this module imports no mover and both movers use it (``datadir_mover.tablemove.store``,
``datadir_mover.move.journal.find``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, TypeVar

from tuner.core.errors import MoveError

J = TypeVar("J")


def journals_in(root: Path, open_journal: Callable[[Path], J]) -> list[J]:
    """Every journal under ``root`` with a plan, newest first."""
    if not root.is_dir():
        return []
    return [open_journal(p) for p in sorted(root.iterdir(), reverse=True) if (p / "plan.json").exists()]


def find(root: Path, move_id: str | None, phases: Iterable[str], *, open_journal: Callable[[Path], J],
         phase_of: Callable[[J], str], noun: str, status_command: str,
         keep: Callable[[J], bool] | None = None, of: str = "") -> J:
    """The journal ``move_id``, or the only one whose phase is in ``phases`` (among those ``keep`` accepts,
    described by ``of``, e.g. " for tpcc.stock").  ``noun`` names the operation ("table move")."""
    phases = tuple(phases)
    if move_id:
        found = root / move_id
        if not (found / "plan.json").exists():
            known = ", ".join(p.name for p in _dirs(root)) or "none"
            raise MoveError(f"no {noun} {move_id!r} (known: {known}); see `{status_command}`")
        return open_journal(found)
    matching = [j for j in journals_in(root, open_journal) if phase_of(j) in phases and (keep is None or keep(j))]
    if not matching:
        raise MoveError(f"no {noun}{of} is {' or '.join(p.replace('_', ' ') for p in phases)}; "
                        f"see `{status_command}`")
    if len(matching) > 1:
        raise MoveError(f"{len(matching)} {noun}s are {' or '.join(phases)} "
                        f"({', '.join(_name(j) for j in matching)}); name one with --id")
    return matching[0]


def _dirs(root: Path) -> list[Path]:
    return journals_in(root, lambda p: p)


def _name(journal) -> str:
    return journal.dir.name
