"""Finalize onto a volatile tier: the source is the only copy that survives a power loss, so keep it unless
a persistence backing holds a fresh consistent copy of the target, or the operator accepts the risk by name."""

from __future__ import annotations

import os
import time

from tuner.core.errors import InnotierError, MoveError

from datadir_mover import persist
from datadir_mover.move.preflight import tier_facts


def _under(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def persistence_problem(target: str, backing: str | None, now: float | None = None) -> str | None:
    """Why ``backing`` does not keep ``target`` (None: it does: the tier is covered and its last copy is fresh)."""
    if not backing:
        return "no persistence backing was given"
    try:
        cfg = persist.load_config(backing)
    except InnotierError as exc:
        return str(exc)
    if not _under(target, cfg.tier):
        return f"the backing {backing} persists {cfg.tier}, not {target}"
    gen = persist.current(backing)
    if gen is None:
        return f"the backing {backing} has no complete copy yet"
    age = (now or time.time()) - gen.finished_at
    if age > cfg.interval_s:
        return f"the backing's last copy is {age:.0f} s old, older than its interval of {cfg.interval_s} s"
    return None


def require_persistence(target: str, move_id: str, backing: str | None, accept_volatile: bool) -> None:
    """Refuse in one line to remove the only persistent copy when the target is on tmpfs, ramfs or zram."""
    tier = tier_facts(target)
    if not tier.volatile or accept_volatile:
        return
    why = persistence_problem(target, backing)
    if why is None:
        return
    raise MoveError(f"{target} is on a volatile tier ({tier.kind}) and {why}: removing the source would leave no "
                    f"copy that survives a power loss; set up persistence (`innotier persist install --tier "
                    f"{tier.mountpoint or target} --backing DIR`, then `innotier move finalize --id {move_id} "
                    f"--persist-backing DIR`) or pass --i-accept-volatile")
