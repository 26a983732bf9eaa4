"""The tree copy and its verification: every entry of a tree copied, each copy read back before it is trusted.

Every copied file is fsynced, then every directory it lives in (so the names are durable
too); ownership, mode and modification time are kept.  Small files are copied whole, several
at a time; large ones in parallel pieces.

Two passes make the online pre-copy work (as rsync's quick check, with git's "racily clean"
rule): ``copy_tree(..., previous=manifest_of_the_precopy)`` keeps a file's earlier copy only
when its size, mtime, ctime and inode are the same as when the pre-copy read it, its mtime was
at least ``RACY_MARGIN_NS`` older than that read (a write in the same clock tick as the read
cannot be missed), the target copy is unchanged since it was verified, and the file is not one
the server may write through a shared mapping (``redo.SERVER_MAPPED_NAME``: those are compared
by content or LSN range on every pass).  Everything else is copied again, as a delta
(``delta``) where the earlier copy's block digests are known.  docs/relocation.md lists what is
trusted by stat and why.

Both trees are reached through ``safe_fs.Tree``: the server's user can write into them while root
copies, so no link is followed below either root, and a link where a directory should be is refused.
A pass ends by removing from the target what the source no longer has (what the previous pass
wrote, or what an interrupted run left: ``owned``), after every file that stays has its verified
copy; a removal that fails is an error.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from array import array
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from tuner.core.errors import MoveError
from tuner.core.probe import mount_of

from datadir_mover.move.copy.blocks import (BLOCK, DIGEST, PIECE, WORKERS, Progress, digest_file, file_blocks,
                                            merge_into_pieces, on_memory_fs, results)
from datadir_mover.move.copy.delta import SkipRule, floors_after, floors_of, skip_rule
from datadir_mover.move.copy.file import FileCopy, ReadBackMismatch, copy_file
from datadir_mover.move.copy.manifest import CopyStats, FileRecord, Manifest
from datadir_mover.move.copy.redo import trusted_by_stat
from datadir_mover.move.copy.safe_fs import Tree, UnsafePath, remove_all

RACY_MARGIN_NS = 2_000_000_000  # a file modified less than 2 s before the pre-copy read it is copied again

Todo = tuple[str, os.stat_result, bytes | None, SkipRule | None]  # rel, stat, old block digests, skip rule


def copy_tree(source: str | os.PathLike, target: str | os.PathLike, entries: list[tuple[str, os.stat_result]],
              previous: Manifest | None = None, progress: Progress | None = None,
              after_file: Callable[[str], None] | None = None, verify: bool = True,
              workers: int = WORKERS, lsn_floor: int = 0, page_size: int = 0,
              stable: bool = False, log_floor: int = 0, log_now: int = 0,
              owned: Iterable[str] = (), follow_target_root: bool = True) -> tuple[Manifest, CopyStats]:
    """Copy ``entries`` (from ``walk``) from ``source`` into ``target``; with ``verify`` read each copy back.

    ``target`` must exist.  With ``previous`` (the pre-copy's manifest) unchanged files
    are kept.  Target entries named in ``previous`` or ``owned`` (what an interrupted earlier run
    may have written: the target's listing of the moved names) whose source entry is gone are
    removed once the copies are verified.  With ``verify`` each
    copy is read back from the target's medium once it is written and fsynced, while other
    files are still being copied; ``verify_tree`` (the mover's VERIFY step) then reads again
    only a copy changed since.  Without ``verify`` the caller runs ``verify_tree``.  ``workers``
    pieces are in flight at once.  ``lsn_floor`` and ``log_floor``: the server's checkpoint
    and flushed LSNs read before this pass began, recorded with every file read; ``log_now``:
    its current LSN read with them (online).  ``page_size`` (with ``previous``): a changed
    file is read only where its skip rule says it may differ (``delta.skip_rule``).
    ``stable``: nothing writes to the source during this call (server stopped), so a redo
    log's end LSN is final (its checkpoint block says it), and a file copied whole reads its
    uncached pages with ``O_DIRECT`` (``blocks.Source``).  ``follow_target_root=False``: ``target`` is a real
    directory path (the mover's planning refuses a link there), so a link put in its place since is refused.
    """
    t0 = time.monotonic()
    owned = set(owned)
    with Tree(source) as src, Tree(target, follow_root=follow_target_root) as dst:
        manifest = Manifest(src.root, dst.root)
        stats = CopyStats()
        dirs: list[tuple[str, os.stat_result]] = []
        todo: list[Todo] = []
        earlier: dict[str, array] = {}  # rel -> per-block floors of the previous copy (changed files)
        for rel, st in entries:
            if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                manifest.records[rel] = _place_entry(src, dst, rel, st)
                if stat.S_ISDIR(st.st_mode):
                    dirs.append((rel, st))
                continue
            prev = previous.records.get(rel) if previous else None
            if prev is not None and _unchanged_since(prev, st, dst):
                _keep(manifest, previous, prev, stats, progress)
                continue
            old = previous.blocks.get(rel) if prev is not None and _target_intact(prev, dst) else None
            floors = floors_of(previous, prev) if old is not None else None  # only for the same file (see skip_rule)
            todo.append((rel, st, old, skip_rule(rel, st, prev, old, page_size, floors, stable, log_now)))
            if floors is not None:
                earlier[rel] = floors
        for rec, fc in _copy_files(src, dst, todo, progress, after_file, verify, workers, stable):
            rec.lsn_floor, rec.log_floor = lsn_floor, log_floor
            manifest.records[rec.rel] = rec
            manifest.blocks[rec.rel] = fc.blocks
            manifest.floors[rec.rel] = floors_after(fc.st.st_size, fc.read_blocks, earlier.get(rec.rel), lsn_floor)
            rec.lsn_floor = min(manifest.floors[rec.rel], default=lsn_floor)  # the file's floor: its oldest block's
            stats.files_copied += 1
            stats.bytes_copied += fc.bytes_written
            stats.files_delta += int(fc.delta)
        before = owned | (set(previous.records) if previous is not None else set())
        stats.files_removed = remove_all(dst, sorted(before - set(manifest.records)))
        _sync_dirs(dst, dirs)
        stats.seconds = time.monotonic() - t0
        return manifest, stats


def _place_entry(src: Tree, dst: Tree, rel: str, st: os.stat_result) -> FileRecord:
    """Make a directory or a symlink on the target as the source has it (through checked descriptors); its record."""
    if stat.S_ISDIR(st.st_mode):
        dst.make_dir(rel, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
        return FileRecord.of(rel, "dir", st, verified=True)
    link = src.readlink(rel)
    try:
        dst.make_symlink(link, rel, st.st_uid, st.st_gid)
    except IsADirectoryError:  # an earlier pass copied a directory there: the source's was swapped for a link
        raise UnsafePath(f"{os.path.join(src.root, rel)} is a symbolic link (to {link}) where an earlier pass "
                         f"copied a directory (something changed {src.root} while the move ran: the server's "
                         "user?); the mover follows no link there: put the directory back or remove the link, "
                         "then run the step again") from None
    return FileRecord.of(rel, "symlink", st, link=link, verified=True)


def _keep(manifest: Manifest, previous: Manifest, prev: FileRecord, stats: CopyStats,
          progress: Progress | None) -> None:
    """Keep the pre-copy's verified copy of an unchanged file."""
    manifest.records[prev.rel] = prev
    if prev.rel in previous.blocks:
        manifest.blocks[prev.rel] = previous.blocks[prev.rel]
    if prev.rel in previous.floors:
        manifest.floors[prev.rel] = previous.floors[prev.rel]
    stats.files_skipped += 1
    stats.bytes_skipped += prev.size
    if progress:
        progress(prev.size)


def _sync_dirs(dst: Tree, dirs: list[tuple[str, os.stat_result]]) -> None:
    """fsync directories deepest first (their entries are now durable), then keep their mtimes."""
    for rel, st in sorted(dirs, key=lambda x: x[0].count("/"), reverse=True):
        dst.fsync_dir(rel)
        dst.set_dir_times(rel, st.st_atime_ns, st.st_mtime_ns)
    dst.fsync_dir()


def _unchanged_since(prev: FileRecord, st: os.stat_result, target: Tree) -> bool:
    """True when the pre-copy's verified copy of this file is still exact (see the module docstring)."""
    if prev.kind != "file" or not prev.verified or prev.digest is None or not trusted_by_stat(prev.rel):
        return False
    if (prev.size, prev.mtime_ns, prev.ctime_ns, prev.ino) != (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
        return False
    if prev.mtime_ns > prev.read_at_ns - RACY_MARGIN_NS or prev.ctime_ns > prev.read_at_ns - RACY_MARGIN_NS:
        return False  # racily clean: modified too close to the read to trust the timestamps
    return _target_intact(prev, target)


def _target_intact(prev: FileRecord, target: Tree) -> bool:
    """The target copy is still the one verified in the previous pass (so its block digests still hold)."""
    if prev.kind != "file" or not prev.verified:
        return False
    try:
        tst = target.lstat(prev.rel)
    except FileNotFoundError:
        return False
    return (tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino) == (prev.target_mtime_ns, prev.target_ctime_ns,
                                                               prev.target_ino)


def _copy_files(src: Tree, dst: Tree, todo: list[Todo], progress: Progress | None,
                after_file: Callable[[str], None] | None, verify: bool,
                workers: int, stopped: bool = False) -> list[tuple[FileRecord, FileCopy]]:
    """Copy (and with ``verify`` read back) files: small ones whole, large ones in parallel pieces (``_each_file``).

    A delta copy (only changed blocks rewritten) is always read back at once, the
    rewritten blocks only: the rest was read back when it was written.  On tmpfs or ramfs a new copy is read back
    chunk by chunk as it is written (``file.copy_file(read_back=True)``).
    """
    memory = on_memory_fs(dst.root) if todo else False
    in_memory = memory or (bool(todo) and mount_of(dst.root).dax)  # the target's pages are its medium

    def one(rel: str, old: bytes | None, rule: SkipRule | None,
            pool: ThreadPoolExecutor | None) -> tuple[FileRecord, FileCopy]:
        read_at = time.time_ns()
        try:
            fc = copy_file(src.path(rel), dst.path(rel), progress, pool, old, rule, in_memory, stopped,
                           verify and memory)
        except ReadBackMismatch as exc:
            raise MoveError(f"the copy {os.path.join(dst.root, rel)} differs from its source at byte {exc.offset} "
                            "when read back right after it was written; the target storage returned different data: "
                            "check it (dmesg) and run the move again") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):  # a link planted in place of a file: refused, not followed
                raise UnsafePath(f"{os.path.join(src.root if exc.filename == src.path(rel) else dst.root, rel)}: "
                                 f"{exc.strerror}; something changed the tree while the move ran (the server's "
                                 "user?): remove it and run the step again") from None
            raise
        rec = FileRecord.of(rel, "file", fc.st, digest=fc.digest, read_at_ns=read_at)
        if fc.delta:
            _verify_ranges(dst, rec, fc, memory, pool)
        elif fc.read_back is not None:
            _verified_as_written(dst, rec, fc, memory, pool)
        elif verify:
            _verify_record(dst, rec, memory, pool)
        if after_file:
            after_file(rel)
        return rec, fc

    return _each_file(todo, lambda t: t[1].st_size, lambda t, pool: one(t[0], t[2], t[3], pool), workers, "copy")


def _each_file(items: list, size_of: Callable, fn: Callable, workers: int, name: str) -> list:
    """fn(item, pool) for every item (a file), results in order: files of at most a piece whole in a pool of
    ``workers`` threads (pool None), larger ones up to ``workers`` at a time, largest first, their pieces in
    the same pool: a file busy with its allocation, fsync or read-back leaves no worker idle, and no file
    waits for the one before.

    Every call has finished before this returns or raises.
    """
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix=f"innotier-{name}") as pool, \
            ThreadPoolExecutor(max(1, workers), thread_name_prefix=f"innotier-{name}-file") as files:
        large = {i: files.submit(fn, it, pool)
                 for i, it in sorted(enumerate(items), key=lambda x: -size_of(x[1])) if size_of(it) > PIECE}
        small = {i: pool.submit(fn, it, None) for i, it in enumerate(items) if i not in large}
        try:
            results(list(small.values()))
        finally:
            results(list(large.values()))
    return [(large.get(i) or small[i]).result() for i in range(len(items))]


def _verify_ranges(dst: Tree, rec: FileRecord, fc: FileCopy, memory: bool,
                   pool: ThreadPoolExecutor | None = None) -> None:
    """Read back the blocks a delta copy rewrote and compare them with the source's; raise on a difference."""
    p = os.path.join(dst.root, rec.rel)
    ranges = merge_into_pieces(fc.written)
    got = file_blocks(dst.path(rec.rel), True, pool, memory, ranges) if ranges else b""
    want = b"".join(fc.blocks[a // BLOCK * DIGEST:-(-b // BLOCK) * DIGEST] for a, b in ranges)
    if got != want:
        raise MoveError(f"the blocks rewritten in the copy {p} differ from their source when read back; "
                        "the target storage returned different data: check it (dmesg) and run the move again")
    _mark_verified(dst, rec)


def _verified_as_written(dst: Tree, rec: FileRecord, fc: FileCopy, memory: bool,
                         pool: ThreadPoolExecutor | None = None) -> None:
    """A copy read back chunk by chunk as it was written is verified as it was after its fsync, unless its stat
    moved since (something wrote it after the copy): then it is read back whole."""
    tst = dst.lstat(rec.rel)
    was = fc.read_back
    if (tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino) != (was.st_mtime_ns, was.st_ctime_ns, was.st_ino):
        _verify_record(dst, rec, memory, pool)
        return
    _mark_verified(dst, rec, tst)


def _mark_verified(dst: Tree, rec: FileRecord, tst: os.stat_result | None = None) -> None:
    tst = tst or dst.lstat(rec.rel)
    rec.target_mtime_ns, rec.target_ctime_ns, rec.target_ino = tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino
    rec.verified = True


def _verify_record(dst: Tree, rec: FileRecord, memory: bool, pool: ThreadPoolExecutor | None = None) -> None:
    """Read one copy back from the target's medium and compare with the source digest; raise on a difference."""
    p = os.path.join(dst.root, rec.rel)
    got = digest_file(dst.path(rec.rel), drop_cache=True, pool=pool, memory=memory)
    if got != rec.digest:
        raise MoveError(f"checksum of the copy {p} ({got}) differs from its source ({rec.digest}); "
                        "the target storage returned different data: check it (dmesg) and run the move again")
    _mark_verified(dst, rec)


def verify_tree(manifest: Manifest, workers: int = WORKERS, follow_target_root: bool = True) -> None:
    """Read every copy back from the target's medium and compare checksums, raise on a difference; a copy read
    back by ``copy_tree`` is read again only when its target changed since (``_target_intact``).
    ``follow_target_root``: as for ``copy_tree``."""
    with Tree(manifest.target, follow_root=follow_target_root) as dst:
        todo = [r for r in manifest.records.values() if r.kind == "file" and not _target_intact(r, dst)]
        memory = on_memory_fs(dst.root) if todo else False
        _each_file(todo, lambda r: r.size, lambda r, pool: _verify_record(dst, r, memory, pool), workers, "verify")


def recheck_sources(manifest: Manifest) -> list[str]:
    """Source files whose size/mtime/ctime/inode changed since they were copied (nothing may write during COPY)."""
    with Tree(manifest.source) as src:
        return [rec.rel for rec in manifest.records.values() if rec.kind == "file" and _changed(src, rec)]


def _changed(src: Tree, rec: FileRecord) -> bool:
    try:
        st = src.lstat(rec.rel)
    except FileNotFoundError:
        return True
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != (rec.size, rec.mtime_ns, rec.ctime_ns, rec.ino)
