"""The AppArmor rule that lets a confined server write its CLONE into the backing's staging directory.

A CLONE is written by the server itself (``clone_staging``), so the profile that confines it (Debian's
``usr.sbin.mysqld`` grants ``/var/lib/mysql/**`` and not a backing directory) must allow
``<backing>/clone-staging/``.  The profile is found as the mover finds it (``datadir_mover.apparmor``: the one
attached to the running server's binary, whatever its file and name); the rule goes in its site-rule include,
in a block named after the backing directory, validated with ``apparmor_parser -Q -K`` before it is written,
and the profile is reloaded where AppArmor is active.  ``persist uninstall`` removes exactly that block.
Where nothing confines the server (no profile attached to it, or the package's empty stub) nothing changes and
the plan says so; a profile with no site-rule include is refused in one line naming the rule and the include to
add, nothing written.  Only a CLONE needs it: mariadb-backup and xtrabackup run as root, outside the profile.
"""

from __future__ import annotations

import re

from tuner.core.errors import MoveError, TierError

from datadir_mover import apparmor
from datadir_mover.persist.clone_staging import staging_dir
from datadir_mover.persist.config import PersistConfig
from datadir_mover.persist.server_process import server_binary


def block_id(backing: str) -> str:
    """The name of the block in the local include: one per backing directory."""
    return "persist-" + (re.sub(r"[^A-Za-z0-9]+", "-", backing).strip("-") or "root")


def plan(cfg: PersistConfig, root: str = "/etc/apparmor.d", sys_root: str = "/sys") -> apparmor.AppArmorChange | None:
    """What ``persist install`` does to AppArmor for ``cfg``; None when its copies are not the server's to write
    (an online backup tool running as root)."""
    if cfg.method != "clone":
        return None
    try:
        return apparmor.plan_change([str(staging_dir(cfg.backing))], cfg.locations.flavor, block_id(cfg.backing),
                                    root=root, sys_root=sys_root, binary=server_binary(cfg.server))
    except MoveError as exc:
        raise TierError(str(exc).replace("plan again", "run `innotier persist install` again")) from None


def describe(change: apparmor.AppArmorChange | None) -> str:
    """One line for the install's output: which profile, which file, which rule (or why nothing)."""
    if change is None:
        return "AppArmor: no change (the backup tool runs as root, outside the server's profile)"
    if change.action == "none":
        return f"AppArmor: no change ({change.reason})"
    rules = " ".join(ln.strip() for ln in change.rules.splitlines()[1:-1])
    return f"AppArmor: `{rules}` for the server's CLONE into {change.local_path}; {change.reason}"


def apply(change: apparmor.AppArmorChange | None, root: str = "/etc/apparmor.d") -> None:
    """Validate (never loading), write the block, reload where active."""
    if change is None or change.action == "none":
        return
    try:
        apparmor.validate(change, root)
        apparmor.apply(change)
    except MoveError as exc:
        raise TierError(str(exc)) from None


def recorded(cfg: PersistConfig) -> apparmor.AppArmorChange | None:
    """The change install made, as persist.json recorded it (None: none)."""
    return apparmor.AppArmorChange.from_dict(cfg.apparmor) if cfg.apparmor else None


def remove(change: apparmor.AppArmorChange | None) -> None:
    if change is None or change.action == "none":
        return
    try:
        apparmor.remove(change)
    except MoveError as exc:
        raise TierError(str(exc)) from None
