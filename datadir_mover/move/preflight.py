"""Checks before anything changes.  Each failure is one sentence naming the problem and the fix.

Run by ``move plan`` (so a bad request never produces a plan) and again by ``move apply``
right before the journal is created (the world may have changed since the plan).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass

from tuner.core.sandbox import SandboxState
from tuner.core.errors import MoveError
from tuner.core.server import ServerModel
from tuner.core.units import PAGE_SIZES, human_size, parse_page_size

from datadir_mover.move import components
from datadir_mover.tiers.detect import tier_for_path  # the tiers area's detector, when present
from tuner.core.probe import mount_of
from datadir_mover.move.journal import all_journals

HEADROOM_FRACTION = 0.10  # free space kept on the target beyond the files' size
HEADROOM_MIN = 16 << 20


@dataclass(frozen=True)
class TierFacts:
    """What the move needs to know about the target's storage (from tiers.detect, else from the probes)."""

    device: str
    mountpoint: str
    fstype: str
    kind: str
    volatile: bool
    o_direct: bool | None
    dax: bool
    free_bytes: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def existing_ancestor(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    return p


def tier_facts(path: str) -> TierFacts:
    """Facts of the file system ``path`` (or its nearest existing parent) lives on."""
    where = existing_ancestor(path)
    vfs = os.statvfs(where)
    free = vfs.f_bavail * vfs.f_frsize
    t = tier_for_path(where)
    return TierFacts(device=str(getattr(t, "device", "") or ""), mountpoint=str(getattr(t, "mountpoint", "") or ""),
                     fstype=str(getattr(t, "fs", "") or ""), kind=str(getattr(t, "kind", "other")),
                     volatile=bool(getattr(t, "volatile", False)), o_direct=getattr(t, "o_direct", None),
                     dax=bool(getattr(t, "dax", False)), free_bytes=free)


def _inside(child: str, parent: str) -> bool:
    c, p = os.path.realpath(child), os.path.realpath(parent)
    return c != p and c.startswith(p.rstrip(os.sep) + os.sep)


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_page_size(requested: str | None, model: ServerModel) -> None:
    if not requested:
        return
    want = parse_page_size(requested)
    if want != model.page_size:
        raise MoveError(f"a move cannot change the page size ({PAGE_SIZES.get(model.page_size)} -> {PAGE_SIZES[want]}): "
                        "innodb_page_size is fixed when the datadir is initialized; create a new server with "
                        f"`innotier sandbox create NAME --page-size {PAGE_SIZES[want]}` and load the data into it")


def check_target_path(component: str, model: ServerModel, source: str, target: str) -> None:
    """Symlinks, nesting and 'already there'."""
    if not os.path.isabs(target):
        raise MoveError(f"target {target} is not an absolute path; give the full path, e.g. /mnt/fast/mysql")
    norm = os.path.normpath(target)
    real = os.path.realpath(norm)
    if os.path.islink(norm):
        raise MoveError(f"target {norm} is a symlink to {os.path.realpath(norm)}; give the real directory "
                        "(the server and AppArmor see real paths) or remove the link")
    if real != norm:
        raise MoveError(f"target {norm} lies under a symlink (it resolves to {real}); give the resolved path {real}")
    if _same(norm, source):
        raise MoveError(f"{component} already lives in {source}; give another --to")
    if component == "datadir":
        if _inside(norm, source):
            raise MoveError(f"target {norm} is inside the datadir {source}; the copy would contain itself: "
                            "choose a directory outside it")
        if _inside(source, norm):
            raise MoveError(f"the datadir {source} is inside the target {norm}; choose a new, empty directory "
                            "that does not contain the datadir")
    else:
        if _inside(norm, model.datadir):
            raise MoveError(f"target {norm} is inside the datadir {model.datadir}: the server would take the "
                            "directory for a schema; choose a directory outside the datadir (or the datadir itself)")
    parent = os.path.dirname(norm)
    if not os.path.isdir(parent):
        raise MoveError(f"the target's parent directory {parent} does not exist; mount the tier or create it first")


def check_target_contents(component: str, model: ServerModel, target: str) -> bool:
    """The target must not hold anything the move would overwrite.  Returns whether it exists."""
    if not os.path.lexists(target):
        return False
    if not os.path.isdir(target):
        raise MoveError(f"target {target} exists and is not a directory; give a directory path")
    names = os.listdir(target)
    if component == "datadir":
        if names:
            shown = ", ".join(sorted(names)[:3]) + ("..." if len(names) > 3 else "")
            raise MoveError(f"target {target} is not empty ({shown}); a datadir must move into a new or empty "
                            "directory (use a subdirectory of the mount point, e.g. {target}/mysql)".replace(
                                "{target}", target.rstrip("/")))
        return True
    clash = [n for n in components.top_names(component, model, target) if n != components.BUFFER_POOL_DUMP]
    if clash:
        raise MoveError(f"target {target} already holds {', '.join(clash)} (left by an earlier move that was not "
                        "finalized, or another server's); finalize or roll back that move "
                        "(`innotier move status`), or choose another directory")
    return True


def check_owner(target: str, server_uid: int, server_user: str) -> None:
    if not os.path.lexists(target):
        return
    st = os.lstat(target)
    if st.st_uid not in (server_uid, 0):
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        raise MoveError(f"target {target} is owned by {owner}, but the server runs as {server_user}; "
                        f"`chown {server_user}: {target}` or choose a directory {server_user} owns")
    if not _writable_by(st, server_uid):
        raise MoveError(f"target {target} exists ({stat.S_IMODE(st.st_mode):04o}) and {server_user} cannot write into "
                        f"it, and the mover changes no directory it did not create; give a new subdirectory "
                        f"(e.g. {target.rstrip('/')}/innotier) or make it writable yourself")


def _writable_by(st: os.stat_result, uid: int) -> bool:
    """Can ``uid`` create files in a directory with this stat (root can; then owner, group, other bits)?"""
    if uid == 0:
        return True
    try:
        pw = pwd.getpwuid(uid)
        groups = {pw.pw_gid, *(g.gr_gid for g in grp.getgrall() if pw.pw_name in g.gr_mem)}
    except KeyError:
        groups = set()
    mode = st.st_mode
    if st.st_uid == uid:
        return mode & 0o300 == 0o300
    if st.st_gid in groups:
        return mode & 0o030 == 0o030
    return mode & 0o003 == 0o003


def check_same_fs(source: str, target: str, allow_same_fs: bool) -> None:
    if allow_same_fs:
        return
    s_dev = os.stat(source).st_dev
    t_dev = os.stat(existing_ancestor(target)).st_dev
    if s_dev == t_dev:
        m = mount_of(source)
        raise MoveError(f"target {target} is on the same file system as {source} ({m.device} on {m.mountpoint}): "
                        "a move would gain nothing; choose a directory on the faster tier "
                        "(or pass --allow-same-fs to move anyway)")


def space_required(allocated: int) -> int:
    return int(allocated + max(allocated * HEADROOM_FRACTION, HEADROOM_MIN))


def check_space(target: str, allocated: int, available: int) -> int:
    need = space_required(allocated)
    if available < need:
        raise MoveError(f"target {target} has {human_size(available)} free but the move needs {human_size(need)} "
                        f"({human_size(allocated)} of files + {int(HEADROOM_FRACTION * 100)}% headroom): "
                        "free space on the tier or choose a larger one")
    return need


def check_source(component: str, model: ServerModel, source: str) -> None:
    if not os.path.isdir(source):
        raise MoveError(f"the {component} directory {source} does not exist or is not readable; run innotier "
                        "on the server's host as a user who can read it (root)")
    present = set(components.top_names(component, model, source))
    for name in components.expected_names(component, model):
        if name not in present:
            raise MoveError(f"{name} is missing from {source}, so there is no {component} to move there; "
                            "check the server's option files (innotier server inspect)")


def check_server_state(state: str, stop_myself: bool, describe: str, stop_hint: str) -> None:
    if state == SandboxState.CRASHED:
        raise MoveError(f"{describe} was not shut down cleanly (crashed or killed); start it so InnoDB recovers, "
                        "then plan the move again")
    if not stop_myself and state == SandboxState.RUNNING:
        raise MoveError(f"{describe} is still running, and --no-shutdown says it should be stopped for the offline "
                        f"steps; stop it first ({stop_hint}) or drop --no-shutdown to let innotier stop it")


def check_no_open_move(server_key: str) -> None:
    for j in all_journals():
        if j.phase == "open" and j.plan().get("server_key") == server_key and j.records():
            raise MoveError(f"move {j.dir.name} on this server is not finished ({j.describe()}); resume or roll it "
                            "back before planning another")


def fs_notes(component: str, model: ServerModel, tier: TierFacts) -> list[str]:
    """Warnings about the target's capabilities against the server's settings (no refusal)."""
    notes = []
    flush = (model.variables.get("innodb_flush_method") or "").upper()
    if tier.o_direct is False and ("O_DIRECT" in flush or flush == ""):
        notes.append(f"{tier.fstype} at {tier.mountpoint} refuses O_DIRECT: InnoDB falls back to buffered I/O "
                     "there (warning 'Failed to set O_DIRECT'), so innodb_flush_method=O_DIRECT has no effect")
    if tier.volatile:
        notes.append(f"the target is volatile ({tier.kind}): a power loss or reboot loses it; keep a consistent copy "
                     "with `innotier persist install --tier ...` before relying on it")
    if tier.dax:
        notes.append("the target is mounted with DAX")
    return notes
