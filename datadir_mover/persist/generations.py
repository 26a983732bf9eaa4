"""The backing directory's generations: one consistent copy each, sealed (fsynced, manifest, COMPLETE), renamed
into place and only then pointed at by ``current.json`` (the flip); the previous one kept one more round."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tuner.core.durable import fsync_dir, write_atomic, write_json_atomic
from tuner.core.errors import TierError
from tuner.core.filelock import try_lock

from datadir_mover.move.copy import FileRecord, digest_file, walk

POINTER = "current.json"
OFFLINE_METHOD = "offline copy (server stopped cleanly)"   # a generation's method when the server was stopped


@dataclass
class Generation:
    id: str
    path: str
    method: str
    started_at: float
    finished_at: float  # the copy holds every commit before this moment (end of the backup or copy, not of --prepare)
    duration_s: float
    bytes: int
    files: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def generations_dir(backing: str) -> Path:
    return Path(backing, "generations")


def current(backing: str) -> Generation | None:
    p = Path(backing, POINTER)
    if not p.exists():
        return None
    return Generation(**json.loads(p.read_text()))


def lock(backing: str, what: str) -> int:
    """One sync or restore at a time on a backing directory (released when the returned fd is closed)."""
    try:
        fd = try_lock(Path(backing, ".lock"))
    except OSError as exc:
        raise TierError(f"cannot open the lock file in {backing}: {exc.strerror}; nothing was done ({what} not "
                        "started): make the backing directory writable") from None
    if fd is None:
        raise TierError(f"another persist sync or restore is running on {backing}; wait for it ({what} not started)")
    return fd


def new_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + f"-{int(time.time() * 1000) % 1000:03d}"


def start(backing: str, gen_id: str) -> Path:
    """A fresh ``.tmp-<id>`` directory for a sync; what an earlier sync left half way is removed first."""
    gdir = generations_dir(backing)
    gdir.mkdir(exist_ok=True)
    for stale in gdir.glob(".tmp-*"):  # a sync that crashed earlier: never complete, never pointed at
        shutil.rmtree(stale, ignore_errors=True)
    tmp = gdir / f".tmp-{gen_id}"
    tmp.mkdir(mode=0o700)
    return tmp


def flip(backing: str, tmp: Path, gen: Generation) -> None:
    """Rename the sealed generation into place, point ``current`` at it, prune all but it and the previous one."""
    gdir = generations_dir(backing)
    os.rename(tmp, gen.path)
    fsync_dir(gdir)
    write_json_atomic(Path(backing, POINTER), gen.to_dict(), mode=0o600)  # the flip
    _prune(backing, keep={gen.id, _previous_id(backing, gen.id)})


def _previous_id(backing: str, newest: str) -> str | None:
    done = sorted(p.name for p in generations_dir(backing).iterdir()
                  if not p.name.startswith(".") and (p / "COMPLETE").exists() and p.name != newest)
    return done[-1] if done else None


def _prune(backing: str, keep: set[str | None]) -> None:
    for p in generations_dir(backing).iterdir():
        if not p.name.startswith(".") and p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)
    fsync_dir(generations_dir(backing))


def seal(gen_dir: Path, copied: dict[str, FileRecord] | None = None) -> tuple[int, int]:
    """fsync every file and directory of a generation and write its manifest; (files, bytes).

    A file in ``copied`` whose copy was read back and matched, and is unchanged since, gets the digest its copy
    recorded; every other file (an online backup's) is read and hashed here."""
    data = gen_dir / "data"
    records = {}
    total = 0
    for rel, st in walk(data):
        p = data / rel
        if stat.S_ISREG(st.st_mode):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            records[rel] = {"size": st.st_size, "digest": _verified_digest((copied or {}).get(rel), st)
                            or digest_file(str(p), drop_cache=False)}
            total += st.st_size
        elif stat.S_ISDIR(st.st_mode):
            records[rel] = {"dir": True}
    for rel, meta in sorted(records.items(), key=lambda x: x[0].count("/"), reverse=True):
        if meta.get("dir"):
            fsync_dir(data / rel)
    fsync_dir(data)
    write_json_atomic(gen_dir / "manifest.json", records, mode=0o600)
    write_atomic(gen_dir / "COMPLETE", f"{time.time()}\n", mode=0o600)
    return sum(1 for m in records.values() if not m.get("dir")), total


def _verified_digest(rec: FileRecord | None, st: os.stat_result) -> str | None:
    """The digest a copy recorded, if its target (the file ``st`` describes) was read back and matched it and has
    not changed since (same size, inode, mtime and ctime as right after the read-back)."""
    if rec is None or rec.kind != "file" or not rec.verified or rec.digest is None:
        return None
    if (rec.size, rec.target_ino, rec.target_mtime_ns, rec.target_ctime_ns) != (
            st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns):
        return None
    return rec.digest


def complete_manifest(gen: Generation) -> dict[str, dict[str, Any]]:
    """The generation's manifest, once its COMPLETE marker says the sync that wrote it finished."""
    g = Path(gen.path)
    if not (g / "COMPLETE").exists():
        raise TierError(f"generation {gen.id} is not complete; it cannot be restored (and `current` should never "
                        "name it): check the backing directory")
    return json.loads((g / "manifest.json").read_text())
