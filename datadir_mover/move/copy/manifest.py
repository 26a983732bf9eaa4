"""What a copy pass wrote: one record per entry of the tree, and the listing of a tree."""

from __future__ import annotations

import os
import stat
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable


@dataclass
class FileRecord:
    """One entry of a copied tree, as it was read from the source."""

    rel: str  # path relative to the tree's root
    kind: str  # "file", "dir" or "symlink"
    size: int = 0
    mode: int = 0
    uid: int = 0
    gid: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    ino: int = 0
    link: str | None = None
    digest: str | None = None  # xxh3-128 of the source content (files)
    read_at_ns: int = 0  # when the copy read the source (wall clock, ns)
    target_mtime_ns: int = 0  # the target's mtime/ctime/ino right after it was verified
    target_ctime_ns: int = 0
    target_ino: int = 0
    verified: bool = False  # target content read back and equal to ``digest``
    lsn_floor: int = 0  # the server's checkpoint LSN read before the pass that read this file (0: unknown)
    log_floor: int = 0  # the server's flushed redo LSN read before that pass (0: unknown; redo_stale_blocks)

    @classmethod
    def of(cls, rel: str, kind: str, st: os.stat_result, **more) -> "FileRecord":
        """A record of ``rel`` with the source's stat."""
        size = st.st_size if kind == "file" else 0
        return cls(rel, kind, size, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                   **more)


@dataclass
class Manifest:
    """What a copy pass wrote: source root, target root and one record per entry."""

    source: str
    target: str
    records: dict[str, FileRecord] = field(default_factory=dict)
    # rel -> block digests of the verified target copy (kept in memory only: a delta pass after a
    # restart of the mover has none, so it copies changed files whole)
    blocks: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    # rel -> per block, the checkpoint LSN read before the pass that last read that block (memory only too):
    # a pass that reads only some blocks of a file (stale_pages) moves only their floors
    floors: dict[str, array] = field(default_factory=dict, repr=False, compare=False)

    @property
    def bytes(self) -> int:
        return sum(r.size for r in self.records.values() if r.kind == "file")

    def to_dict(self) -> dict:
        return {"source": self.source, "target": self.target,
                "records": [asdict(r) for r in sorted(self.records.values(), key=lambda r: r.rel)]}

    @classmethod
    def from_dict(cls, d: dict) -> "Manifest":
        return cls(d["source"], d["target"], {r["rel"]: FileRecord(**r) for r in d.get("records", [])})


@dataclass
class CopyStats:
    files_copied: int = 0
    files_skipped: int = 0  # unchanged since the pre-copy
    bytes_copied: int = 0
    bytes_skipped: int = 0
    files_removed: int = 0  # target files whose source disappeared since the pre-copy
    files_delta: int = 0  # of files_copied: only changed blocks rewritten (bytes_copied counts those)
    seconds: float = 0.0


def walk(root: str | os.PathLike, top_names: Iterable[str] | None = None,
         exclude: Callable[[str, os.stat_result], bool] | None = None) -> list[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every entry under ``root`` (or under the given top-level names), parents first."""
    base = Path(root)
    names = sorted(top_names) if top_names is not None else sorted(os.listdir(base))
    out: list[tuple[str, os.stat_result]] = []
    stack = [n for n in reversed(names)]
    while stack:
        rel = stack.pop()
        try:
            st = os.lstat(base / rel)
        except FileNotFoundError:
            continue  # gone since listed (a temporary file of the running server)
        if exclude and exclude(rel, st):
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue  # sockets, fifos, devices: never data
        out.append((rel, st))
        if stat.S_ISDIR(st.st_mode):
            try:
                children = sorted(os.listdir(base / rel), reverse=True)
            except FileNotFoundError:
                continue
            stack.extend(f"{rel}/{c}" for c in children)
    return out


def allocated_bytes(entries: list[tuple[str, os.stat_result]]) -> int:
    """Space the entries take on disk (holes excluded)."""
    return sum(st.st_blocks * 512 for _, st in entries if stat.S_ISREG(st.st_mode))


def logical_bytes(entries: list[tuple[str, os.stat_result]]) -> int:
    return sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
