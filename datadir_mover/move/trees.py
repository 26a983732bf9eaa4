"""The two trees of a move: the source's entries under the moved names, and the target directory, made with the
server's owner and mode (through a descriptor: a link put in its place is refused, not followed)."""

from __future__ import annotations

import os
from pathlib import Path

from tuner.core.durable import fsync_dir

from datadir_mover.move import components, file_lists
from datadir_mover.move.copy import Tree, walk
from datadir_mover.move.plan import Plan
from datadir_mover.move.stepbase import model_stub


def source_entries(plan: Plan) -> list[tuple[str, os.stat_result]]:
    """(rel, lstat) of what the move copies from the source, parents first."""
    names = components.top_names(plan.component, model_stub(plan), plan.source_dir)
    return walk(plan.source_dir, names)


def moved_in_target(plan: Plan) -> list[str]:
    """What the target holds under the moved names (all of it the move's: preflight): a pass removes what of
    it the source no longer has, such as an interrupted run's copy of a table dropped since."""
    return [rel for rel, _ in file_lists.moved_entries(plan, plan.target_dir)]


def ensure_target(plan: Plan) -> None:
    """Create the target with the server's owner and mode; a directory that existed before the plan is not
    the move's to change (preflight.check_owner made sure the server can write into it), but it must still be
    that directory: planning refused a link there, so a link found now was put in its place (by a user who may
    rename it, in a directory such as /dev/shm) and is refused, never followed."""
    t = Path(plan.target_dir)
    if plan.target_exists:
        if os.path.lexists(t):
            Tree(t, follow_root=False).close()
        return
    if not t.exists():
        t.mkdir(mode=0o700)
        fsync_dir(t.parent)
    o = plan.owner
    with Tree(t, follow_root=False) as made:  # the directory made above, not a link put in its place
        made.set_owner_and_mode(o["uid"], o["gid"], o["mode"])
