"""Is the source still what the move verified?  Checked at SWITCH, at every START and before a rollback.

If the mover dies after VERIFY and someone starts the server on the source and it takes
writes, starting it on the target would silently drop them; if the source was lost or
refilled with an older copy instead, the verified target is the good copy.  The fingerprint
taken at VERIFY (``source-fingerprint.json``) holds what a server run cannot leave untouched,
for every file the server would use if started on the old placement, not only the moved ones:

- the moved files (the component's files in the source): size, mtime and ctime of each, and
  for InnoDB files their page-0 header LSNs;
- the server's other InnoDB files, wherever they are (the redo log in the source, the datadir
  or its own directory; the system tablespace; the undo and doublewrite files): the redo
  log's checkpoint LSN by content (MariaDB 10.8+ ``ib_logfile0``, MySQL 8.0.30+
  ``#innodb_redo/#ib_redoN``: ``copy/redo.py`` has both layouts; another format: size and
  mtime), the system tablespace's page-0 LSN and flush LSN (MySQL writes the flush LSN at every
  clean shutdown; MariaDB 10.8+ leaves it 0, and page 0's LSN moves only when page 0 changes, so
  there the redo checkpoint and the undo headers are what a short run moves), the page-0 LSN of
  every undo tablespace, and size, mtime and ctime of each (of the buffer pool dump, a text file
  that travels with ibdata, only these).

Every start writes a checkpoint and every write moves an mtime, so a server run moves some LSN
or mtime forward.  ``classify`` sorts what it finds: SAME; AHEAD (an LSN or mtime moved
forward, files appeared: a server ran on the source, which now holds writes the target lacks);
GONE (the source directory missing, empty, or unreadable: a RAM tier after a reboot, a mount
that did not come up, an I/O error); DAMAGED (files vanished, an LSN went back: an older
generation was restored).  The files used by the server on the target too (the redo log of an
ibdata move, say) move on legitimately once it started there, so a later START compares the
moved files only.  A fingerprint written by an older innotier (sizes and the redo checkpoint) is
compared as it was.
"""

from __future__ import annotations

import errno
import os
import stat
from enum import StrEnum
from pathlib import Path

from datadir_mover.move import components, side_files
from datadir_mover.move.copy import walk
from datadir_mover.move.copy.redo import (MYSQL_REDO_CHECKPOINTS, MYSQL_REDO_DIR, MYSQL_REDO_FILE,
                                          MYSQL_REDO_FORMATS, REDO_CHECKPOINTS, REDO_FORMATS)
from datadir_mover.move.journal import Journal
from datadir_mover.move.plan import Plan
from datadir_mover.move.stepbase import model_stub

VERSION = 2
FIL_PAGE_LSN = 16  # the LSN of the page's last change (every InnoDB page)
FIL_PAGE_FILE_FLUSH_LSN = 26  # page 0 of the system tablespace: written at a clean shutdown
INNODB_COMPONENTS = ("redo", "ibdata", "undo", "doublewrite")
LSN_KEYS = ("checkpoint_lsn", "page_lsn", "flush_lsn")


class SourceState(StrEnum):
    SAME = "as at the stop"
    AHEAD = "moved on"  # a server ran on it: it holds writes the target does not have
    GONE = "gone"  # missing, empty or unreadable
    DAMAGED = "not as at the stop"  # files vanished or an LSN went back (an older copy restored)


# ---------------------------------------------------------------------------
# Reading


def _checkpoint_in(path: Path, formats: tuple[int, ...], offsets: tuple[int, ...]) -> int | None:
    """The newest of the checkpoint LSNs at ``offsets`` of a redo file whose format (its first 4 bytes) is one of
    ``formats``; None: absent or another format."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
            if len(head) < 16 or int.from_bytes(head[:4], "big") not in formats:
                return None
            lsns = []
            for off in offsets:
                f.seek(off)
                lsns.append(int.from_bytes(f.read(8), "big"))
            return max(lsns)
    except FileNotFoundError:
        return None


def redo_checkpoint(path: Path) -> int | None:
    """The newest checkpoint LSN of a redo log: MariaDB 10.8+'s ``ib_logfile0``, or MySQL 8.0.30+'s
    ``#innodb_redo`` directory (the newest over its ``#ib_redoN`` files; the ``_tmp`` spares hold stale headers).
    None: absent or another format."""
    path = Path(path)
    if path.name != MYSQL_REDO_DIR:
        return _checkpoint_in(path, REDO_FORMATS, REDO_CHECKPOINTS)
    try:
        files = [path / n for n in os.listdir(path) if MYSQL_REDO_FILE.fullmatch(n)]
    except FileNotFoundError:
        return None
    lsns = [lsn for f in files if (lsn := _checkpoint_in(f, MYSQL_REDO_FORMATS, MYSQL_REDO_CHECKPOINTS)) is not None]
    return max(lsns) if lsns else None


def _header_lsns(path: Path, component: str) -> dict[str, int]:
    """Page 0's LSN (and the system tablespace's flush LSN) of an InnoDB tablespace file."""
    with open(path, "rb") as f:
        head = f.read(FIL_PAGE_FILE_FLUSH_LSN + 8)
    if len(head) < FIL_PAGE_FILE_FLUSH_LSN + 8:
        return {}
    out = {"page_lsn": int.from_bytes(head[FIL_PAGE_LSN:FIL_PAGE_LSN + 8], "big")}
    if component == "ibdata":
        out["flush_lsn"] = int.from_bytes(head[FIL_PAGE_FILE_FLUSH_LSN:FIL_PAGE_FILE_FLUSH_LSN + 8], "big")
    return out


def _facts(path: Path, component: str | None) -> dict[str, int]:
    """What a server run changes in one file (or a redo directory)."""
    st = os.stat(path)
    out = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}
    if component == "redo" or path.name in ("ib_logfile0", MYSQL_REDO_DIR):
        lsn = redo_checkpoint(path)
        if lsn is not None:
            out["checkpoint_lsn"] = lsn
        if stat.S_ISDIR(st.st_mode):  # #innodb_redo: the newest of its files
            sts = [os.stat(path / n) for n in os.listdir(path)] or [st]
            out.update(size=sum(s.st_size for s in sts), mtime_ns=max(s.st_mtime_ns for s in sts),
                       ctime_ns=max(s.st_ctime_ns for s in sts))
    elif component in ("ibdata", "undo") and stat.S_ISREG(st.st_mode) and not _is_dump(path):
        out.update(_header_lsns(path, component))
    return out


def _is_dump(path: str | Path) -> bool:
    """The buffer pool dump travels with ibdata but is a text file of page numbers: it has no header LSNs (read as
    one, its digits gave nonsense "LSNs" that a refusal could name first)."""
    return Path(path).name == components.BUFFER_POOL_DUMP


def _component_of(name: str, plan: Plan) -> str | None:
    model = model_stub(plan)
    return next((c for c in INNODB_COMPONENTS if _matches(c, name, model)), None)


def _matches(component: str, name: str, model) -> bool:
    if component == "redo":
        return bool(components.REDO_FILE.match(name)) or name == MYSQL_REDO_DIR
    if component == "ibdata":
        return name in components.ibdata_names(model)
    if component == "undo":
        return bool(components.UNDO_FILE.match(name))
    return bool(components.DBLWR_FILE.match(name))


def _shared_files(plan: Plan) -> dict[str, str]:
    """path -> component of the server's InnoDB files outside the moved set, wherever they are."""
    model = model_stub(plan)
    locations = plan.server.get("locations") or {}
    src = os.path.realpath(plan.source_dir)
    out = {}
    for c in INNODB_COMPONENTS:
        where = plan.source_dir if c == plan.component else (locations.get(c) or plan.server["datadir"])
        real = os.path.realpath(where)
        if plan.component == "datadir" and (real == src or real.startswith(src + os.sep)):
            continue  # moved with the datadir: among the moved files
        if c == plan.component:
            continue
        for name in components.top_names(c, model, where):
            out[str(Path(where) / name)] = c
    return out


def take(plan: Plan) -> dict:
    """The fingerprint now; raises OSError when the source cannot be read."""
    model = model_stub(plan)
    names = components.top_names(plan.component, model, plan.source_dir)
    moved = {}
    for rel, st in walk(plan.source_dir, names):
        if stat.S_ISREG(st.st_mode) or (stat.S_ISDIR(st.st_mode) and Path(rel).name == MYSQL_REDO_DIR):
            top = Path(rel).name if "/" not in rel else None
            comp = plan.component if plan.component != "datadir" else (top and _component_of(top, plan))
            moved[rel] = _facts(Path(plan.source_dir) / rel, comp)
    shared = {}
    for path, comp in _shared_files(plan).items():
        try:
            shared[path] = _facts(Path(path), comp)
        except FileNotFoundError:
            continue
    return {"version": VERSION, "moved": moved, "shared": shared}


def record(journal: Journal, plan: Plan) -> None:
    journal.save_json(side_files.SOURCE_FINGERPRINT, take(plan))


# ---------------------------------------------------------------------------
# Comparing


def gone_why(plan: Plan) -> str | None:
    """Why the source cannot be read at all (None: it can)."""
    src = Path(plan.source_dir)
    try:
        if not src.is_dir():
            return f"{src} is missing"
        # a tmpdir holds no data to keep (the server empties it at start): an empty one is as it was
        if plan.component != "tmpdir" and not components.top_names(plan.component, model_stub(plan), str(src)):
            mount = " (an unmounted tier?)" if not any(src.iterdir()) else ""
            return f"{src} holds none of the {plan.component} files{mount}"
    except OSError as exc:
        return f"{src} cannot be read ({exc.strerror or exc})"
    return None


def _lsn_moves(was: dict, is_: dict) -> tuple[bool, bool]:
    """(an LSN moved forward, an LSN went back)."""
    fwd = any(is_.get(k, 0) > was[k] for k in LSN_KEYS if k in was and k in is_)
    back = any(is_.get(k, 0) < was[k] for k in LSN_KEYS if k in was and k in is_)
    return fwd, back


def classify(then: dict, now: dict, moved_only: bool = False) -> tuple[SourceState, str]:
    """(state, what differs) of the source fingerprint ``now`` against ``then`` (both version 2)."""
    parts = [("moved", then["moved"], now["moved"])]
    if not moved_only:
        parts.append(("shared", then["shared"], now["shared"]))
    ahead: list[str] = []  # by LSN: the plainest evidence, named first
    written: list[str] = []  # by mtime, or new files
    back: list[str] = []  # an LSN went back: the plainest evidence of an older copy, named first
    damaged: list[str] = []
    for _, was_all, is_all in parts:
        for path, was in sorted(was_all.items()):
            is_ = is_all.get(path)
            if _is_dump(path):  # a fingerprint taken before the dump was told apart holds its digits as LSNs
                was = {k: v for k, v in was.items() if k not in LSN_KEYS}
            if is_ is None:
                damaged.append(f"{path} vanished")
                continue
            fwd, went_back = _lsn_moves(was, is_)
            lsn = next((k for k in LSN_KEYS if k in was and was[k] != is_.get(k)), None)
            if fwd:
                ahead.append(f"{path}: its {lsn.replace('_', ' ').replace('lsn', 'LSN')} moved from {was[lsn]} to "
                             f"{is_.get(lsn)}")
            elif went_back:
                back.append(f"{path}: its {lsn.replace('_', ' ').replace('lsn', 'LSN')} went back from "
                               f"{was[lsn]} to {is_.get(lsn)}")
            elif is_["mtime_ns"] > was["mtime_ns"]:
                written.append(f"{path} was written (mtime moved)")
            elif is_ != was:
                damaged.append(f"{path} changed ({', '.join(k for k in was if was[k] != is_.get(k))})")
        new = sorted(set(is_all) - set(was_all))
        if new:
            written.append(f"files appeared: {', '.join(new[:3])}")
    if ahead or written:
        return SourceState.AHEAD, "; ".join((ahead + written)[:2])
    if back or damaged:
        return SourceState.DAMAGED, "; ".join((back + damaged)[:2])
    return SourceState.SAME, ""


def _classify_v1(then: dict, plan: Plan) -> tuple[SourceState, str]:
    """A fingerprint of an older innotier: file sizes and the redo log's checkpoint (or its size and mtime)."""
    names = components.top_names(plan.component, model_stub(plan), plan.source_dir)
    files = {rel: st.st_size for rel, st in walk(plan.source_dir, names) if stat.S_ISREG(st.st_mode)}
    for path, was in then.get("redo", {}).items():
        p = Path(path)
        lsn = redo_checkpoint(p) if p.exists() else None
        if "checkpoint_lsn" in was and lsn != was["checkpoint_lsn"]:
            return SourceState.AHEAD, f"its redo log's checkpoint LSN moved from {was['checkpoint_lsn']} to {lsn}"
    if files != then.get("files", {}):
        return SourceState.AHEAD, "its files changed (names or sizes)"
    return SourceState.SAME, ""


def state_of(journal: Journal, plan: Plan, moved_only: bool = False) -> tuple[SourceState, str] | None:
    """The source against the fingerprint taken at VERIFY; None: none was taken (VERIFY not done)."""
    then = journal.load_json(side_files.SOURCE_FINGERPRINT)
    if then is None:
        return None
    why = gone_why(plan)
    if why:
        return SourceState.GONE, why
    try:
        if then.get("version") != VERSION:
            return _classify_v1(then, plan)
        return classify(then, take(plan), moved_only)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return SourceState.DAMAGED, f"{exc.filename} vanished while it was read"
        return SourceState.GONE, f"{exc.filename or plan.source_dir} cannot be read ({exc.strerror or exc})"
