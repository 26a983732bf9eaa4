"""A restore: every InnoDB location replaced with ``current``'s generation, all together, while no server runs.

It stages every destination (datadir, ibdata, redo, undo directories, as the server's option files place them
now) beside itself in one read of the generation, hashing the bytes as it copies them, checks those digests
and the set of files against the manifest, and only then swaps them in: data files and redo always come from
the same generation (MariaDB 10.8+ refuses to start without ib_logfile0, MDEV-27199; a mix of generations
would start and be silently corrupt).  It refuses while a server process exists (one that refuses
connections included), and while a missed sync at shutdown is recorded, unless the loss is accepted.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from tuner.core.durable import fsync_dir, write_json_atomic
from tuner.core.errors import TierError
from tuner.core.units import format_duration

from datadir_mover.move.copy import Manifest, copy_tree, digest_file, walk
from datadir_mover.persist import locations, missed_sync, server_process
from datadir_mover.persist.config import load_config, require_tier_mounted
from datadir_mover.persist.generations import Generation, complete_manifest, current, lock
from datadir_mover.persist.locations import Locations
from datadir_mover.persist.server_process import ServerState

# metadata files mariadb-backup / xtrabackup leave in a backup: never restored into a datadir
BACKUP_METADATA = re.compile(r"^(backup-my\.cnf|xtrabackup_.*|mariadb_backup_.*|ib_buffer_pool|aria_log_control\.tmp)$")
RESTORE_STATE = "restore-state.json"


def restore_needed(backing: str, loc: Locations) -> bool:
    """The tier lost the server's files (missing datadir, ibdata or redo) or a restore was interrupted."""
    if Path(backing, RESTORE_STATE).exists():
        return True
    must = [os.path.join(loc.ibdata_dir, sorted(loc.ibdata_names())[0])]
    must.append(os.path.join(loc.redo_dir, "#innodb_redo" if os.path.isdir(os.path.join(loc.redo_dir, "#innodb_redo"))
                             else "ib_logfile0"))
    return not os.path.isdir(loc.datadir) or not all(os.path.exists(p) for p in must)


def _damaged(gen: Generation, rel: str) -> TierError:
    return TierError(f"generation {gen.id} is damaged ({rel} does not match its manifest); nothing was "
                     "restored: restore the previous generation by hand or take a new copy")


def _check_file(gen: Generation, rel: str, meta: dict[str, Any]) -> None:
    p = Path(gen.path, "data", rel)
    if not p.exists() or p.stat().st_size != meta["size"] or digest_file(str(p), drop_cache=False) != meta["digest"]:
        raise _damaged(gen, rel)


def _check_staged(gen: Generation, manifest: dict[str, dict[str, Any]], staged: list[Manifest]) -> None:
    """What the staging copies read from the generation is exactly its manifest: the same files and directories,
    each file's size and digest (taken from the bytes read, which are the bytes written to the stage) equal to
    the manifest's.  The backup metadata a restore leaves out is read and checked here on its own."""
    read = {rel: rec for m in staged for rel, rec in m.records.items() if rec.kind in ("file", "dir")}
    expected = {}
    for rel, meta in manifest.items():
        if not BACKUP_METADATA.match(rel.split("/")[0]):
            expected[rel] = meta
        elif not meta.get("dir"):
            _check_file(gen, rel, meta)
    for rel in sorted(set(expected) ^ set(read)):   # missing from the generation, or not in its manifest
        raise _damaged(gen, rel)
    for rel, rec in sorted(read.items()):
        meta = expected[rel]
        if bool(meta.get("dir")) != (rec.kind == "dir") or (
                rec.kind == "file" and (rec.size, rec.digest) != (meta["size"], meta["digest"])):
            raise _damaged(gen, rel)


def _refuse_silent_loss(backing: str, gen: Generation) -> None:
    """One line naming the generation a restore would bring back and the commits it would lose, when the sync at
    the last shutdown did not happen."""
    missed = missed_sync.read(backing)
    if missed is None:
        return
    lost = max(0.0, missed["failed_at"] - gen.finished_at)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(missed["failed_at"]))
    why = str(missed.get("reason", "")).split(";")[0]
    raise TierError(f"the sync at the last shutdown ({when}) did not happen ({why}): restoring generation {gen.id}, "
                    f"taken {format_duration(lost, compact=True)} before that shutdown, would lose the commits of "
                    f"those {format_duration(lost, compact=True)}; to go on with that loss run `innotier persist "
                    f"restore --backing {backing} --accept-loss`")


def restore(backing: str, echo: Callable[[str], None] = lambda s: None, if_needed: bool = False,
            accept_loss: bool = False) -> dict[str, Any]:
    """Replace every InnoDB location with the current generation, all together; no server process may exist."""
    cfg = load_config(backing)
    require_tier_mounted(cfg.tier)
    loc = locations.current(cfg.server, cfg.locations, None)
    # --if-needed first: `persist install` starts the restore unit on a live server whose tier is intact
    if if_needed and not restore_needed(backing, loc):
        return {"restored": False, "reason": "the tier still holds the server's files"}
    if server_process.state(cfg.server, cfg.watched_unit()) == ServerState.RUNNING:
        raise TierError("the server is running (its process is there, whether or not it takes connections); a "
                        "restore replaces its files: stop it first (a restore is for a server whose tier was lost)")
    gen = current(backing)
    if gen is None:
        raise TierError(f"no consistent copy in {backing} yet; nothing to restore (take one with `innotier persist sync`)")
    if not accept_loss:
        _refuse_silent_loss(backing, gen)
    fd = lock(backing, "restore")
    try:
        staged = _stage(gen, complete_manifest(gen), _plan(gen, loc), loc, echo)
        kept = _swap(backing, gen, staged)
        missed_sync.clear(backing)   # restored as asked: the loss, if any, was accepted
        return {"restored": True, "generation": gen.id, "finished_at": gen.finished_at, "dirs": sorted(staged),
                "kept_previous_contents": kept}
    finally:
        os.close(fd)


def _plan(gen: Generation, loc: Locations) -> dict[str, list[str]]:
    """Which top-level entries of the generation go into which of the server's directories."""
    plan: dict[str, list[str]] = {d: [] for d in loc.dirs()}
    for name in sorted(os.listdir(Path(gen.path, "data"))):
        if not BACKUP_METADATA.match(name):
            plan[loc.destination(name)].append(name)
    return plan


def _swap(backing: str, gen: Generation, staged: dict[str, Path]) -> list[str]:
    """Put every staged directory in place; the previous contents are kept aside.  From the first rename the
    server's directories change: an interrupted swap makes the next --if-needed restore."""
    write_json_atomic(Path(backing, RESTORE_STATE), {"generation": gen.id, "dirs": sorted(staged),
                                                     "phase": "swapping"}, mode=0o600)
    kept = []
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for d, stage in staged.items():
        dp = Path(d)
        if os.path.ismount(dp):
            raise TierError(f"{d} is a mount point; keep the server's directories below the mount "
                            f"(e.g. {d}/mysql) so a restore can swap them")
        if dp.exists():
            if any(dp.iterdir()):
                old = dp.parent / f".{dp.name}.innotier-pre-restore-{stamp}"
                os.rename(dp, old)
                kept.append(str(old))
            else:
                dp.rmdir()
        os.rename(stage, dp)
        fsync_dir(dp.parent)
    Path(backing, RESTORE_STATE).unlink()
    fsync_dir(backing)
    return kept


def _stage(gen: Generation, manifest: dict[str, dict[str, Any]], plan: dict[str, list[str]], loc: Locations,
           echo: Callable[[str], None]) -> dict[str, Path]:
    """Copy the generation into a staging directory beside each destination, in one read of the generation: the
    copies hash what they read, and that is checked against the manifest before anything else is touched.  On
    any failure the staging directories are removed; nothing outside them was written."""
    src = Path(gen.path, "data")
    staged: dict[str, Path] = {}
    try:
        read = []
        for d, names in plan.items():
            stage = Path(os.path.dirname(d.rstrip("/")), f".{os.path.basename(d.rstrip('/'))}.innotier-restore")
            if stage.exists():
                shutil.rmtree(stage)
            Path(stage.parent).mkdir(parents=True, exist_ok=True)
            stage.mkdir(mode=0o750)
            staged[d] = stage
            echo(f"staging {len(names)} entries of generation {gen.id} for {d}")
            read.append(copy_tree(src, stage, walk(src, names), verify=True)[0])
            _chown_tree(stage, loc.uid, loc.gid)
        _check_staged(gen, manifest, read)
    except BaseException:
        for stage in staged.values():
            shutil.rmtree(stage, ignore_errors=True)
        raise
    return staged


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)
