"""The proof of a move: every target file equal, byte for byte, to the stopped source, whatever path copied it.

A pre-copied move infers the final state (stat checks, LSN floors, block digests carried
from earlier passes); any broken assumption would be a silent divergence.  The proof checks
the result, not the reasoning:

- at VERIFY (server stopped, before SWITCH) the mover saves the target's block digests as
  they are at the switch (``target-blocks.json``): the digests the copy verified by reading
  the target back (kept in memory from the passes), or read from the target anew where a
  restarted mover has none;
- the stopped source is frozen until finalize (the server runs on the target), so after the
  start it is hashed whole at a bounded rate (``RATE``) and compared block by block; the file
  lists are compared both ways, the source's now and the target's as saved at the switch
  (``file_lists``).  A difference names the file and its byte ranges.

The path without ``--precopy`` needs no second read: its copy hashed every byte as it read it
from the stopped source and VERIFY read every byte back from the target and compared, so its
proof is recorded as passed from that evidence (``how`` says so).

A proof that cannot read the source (its directory missing or empty, as a RAM tier's after a
reboot or a mount that did not come up; a file gone; an I/O error) is *blocked*, not failed: it
says why, keeps what it compared, and runs again (`move status`, `move verify`, `move
finalize`) once the source is back.  Only a difference in content, size or file list fails it;
a pending or blocked proof is never a passed one.  A source that moved on after VERIFY
(``good_copy``: a server ran on it) invalidates even the offline path's recorded proof.

Who runs it: a detached process (``python -m datadir_mover.move.proof DIR``) started right
after START, so it survives the CLI that made the move (an operator's terminal closing, a
`move apply` in a script) and the server takes its clients meanwhile.  It holds ``proof.lock``
and saves its progress after every file, so when it dies `move status` starts it again and
`move verify` and `move finalize` carry it on in the foreground (after waiting for a live one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tuner.core.errors import MoveError
from tuner.core.filelock import try_lock

from datadir_mover.move import file_lists, side_files, source_fingerprint
from datadir_mover.move.copy import BLOCK, Manifest, file_blocks
from datadir_mover.move.journal import CRASH_ENV, Journal
from datadir_mover.move.plan import Plan

RATE = 64 << 20  # bytes/s of the background proof: a 4.4 GiB datadir in about 70 s, a fraction of one device
CHUNK = 128 * BLOCK  # read and compared at a time (8 MiB)
EVIDENCE = ("offline copy: every byte hashed as it was read from the stopped source and read back from the "
            "target")


@dataclass
class Mismatch:
    file: str
    ranges: list[list[int]] = field(default_factory=list)  # [start, end) byte ranges that differ
    why: str = "content differs"

    def text(self) -> str:
        shown = ", ".join(f"{a}-{b}" for a, b in self.ranges[:4]) + (" ..." if len(self.ranges) > 4 else "")
        return f"{self.file} ({self.why}{': bytes ' + shown if shown else ''})"


@dataclass
class Proof:
    status: str = "pending"  # pending, blocked (the source cannot be read: ``last_error`` says why), passed, failed
    how: str = "hashing the stopped source"
    bytes_total: int = 0
    bytes_done: int = 0
    done: list[str] = field(default_factory=list)  # files compared so far
    mismatches: list[Mismatch] = field(default_factory=list)
    began_at: float = 0.0
    finished_at: float = 0.0
    last_error: str = ""  # the last run stopped on this (the next run carries on)

    @classmethod
    def load(cls, journal: Journal) -> "Proof | None":
        d = journal.load_json(side_files.PROOF)
        if d is None:
            return None
        d["mismatches"] = [Mismatch(**m) for m in d.get("mismatches", [])]
        return cls(**d)

    def save(self, journal: Journal) -> None:
        journal.save_json(side_files.PROOF, asdict(self))

    def text(self) -> str:
        if self.status == "passed":
            return f"passed ({self.how})"
        if self.status == "failed":
            return "failed: " + "; ".join(m.text() for m in self.mismatches[:5])
        if self.status == "blocked":
            return (f"blocked: the source cannot be read ({self.last_error}); it runs again when the source is back "
                    f"({100 * self.bytes_done // max(self.bytes_total, 1)}% compared so far)")
        pct = 100 * self.bytes_done // max(self.bytes_total, 1)
        stopped = f"; stopped on: {self.last_error}" if self.last_error else ""
        return f"pending ({pct}% of {self.bytes_total} bytes hashed{stopped})"


# ---------------------------------------------------------------------------
# At the switch (server stopped)


def _as_read_back(target: Path, rec) -> bool:
    """The target file is still the one read back (its stat did not move since): its digests in memory hold."""
    try:
        st = os.lstat(target / rec.rel)
    except FileNotFoundError:
        return False
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (rec.size, rec.target_mtime_ns,
                                                                        rec.target_ctime_ns, rec.target_ino)


def record_at_switch(journal: Journal, plan: Plan, manifest: Manifest) -> Proof:
    """Save the target's block digests as they are now, and the proof's starting point (under ``proof.lock``: a
    prover of an earlier run of this step may still be at work)."""
    fd = _lock(journal, wait=True)
    try:
        extras = [Mismatch(rel, [], why) for rel, why in file_lists.record(journal, plan, manifest)]
        if not plan.precopy:
            proof = Proof("failed" if extras else "passed", EVIDENCE, manifest.bytes, manifest.bytes,
                          mismatches=extras, finished_at=time.time())
            proof.save(journal)
            return proof
        target = Path(manifest.target)
        blocks = {}
        for rec in manifest.records.values():
            if rec.kind != "file":
                continue
            known = manifest.blocks.get(rec.rel)
            if known is None or len(known) != -(-rec.size // BLOCK) * 16 or not _as_read_back(target, rec):
                known = file_blocks(str(target / rec.rel), drop_cache=True)  # a restarted mover: read the target
            blocks[rec.rel] = known.hex()
        journal.save_json(side_files.TARGET_BLOCKS, blocks)
        proof = Proof(bytes_total=manifest.bytes)
        proof.save(journal)
        return proof
    finally:
        os.close(fd)


def invalidate(journal: Journal, why: str) -> None:
    """The source moved on after VERIFY: whatever the proof says, the target is not the source any more."""
    fd = _lock(journal, wait=True)
    try:
        proof = Proof.load(journal)
        if proof is None or proof.status == "failed":
            return
        proof.status = "failed"
        proof.mismatches.append(Mismatch("(the source)", [], f"the source moved on after VERIFY: {why}"))
        proof.finished_at = time.time()
        proof.save(journal)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# Hashing the stopped source


def _differing_ranges(want: bytes, got: bytes, base: int, size: int) -> list[list[int]]:
    out: list[list[int]] = []
    for i in range(max(len(want), len(got)) // 16):
        if want[i * 16:(i + 1) * 16] != got[i * 16:(i + 1) * 16]:
            a, b = base + i * BLOCK, min(base + (i + 1) * BLOCK, size)
            if out and out[-1][1] == a:
                out[-1][1] = b
            else:
                out.append([a, b])
    return out


class SourceUnreadable(Exception):
    """The source cannot be read: the proof is blocked, not failed."""


def _compare_file(path: Path, want: bytes, size: int, pace: Callable[[int], None]) -> Mismatch | None:
    try:
        now = os.stat(path).st_size
    except FileNotFoundError:
        raise SourceUnreadable(f"{path} is missing") from None
    ranges: list[list[int]] = []
    for a in range(0, size, CHUNK):
        b = min(a + CHUNK, size)
        got = file_blocks(str(path), drop_cache=True, ranges=[(a, b)])
        ranges += _differing_ranges(want[a // BLOCK * 16:-(-b // BLOCK) * 16], got, a, size)
        pace(b - a)
    if now != size:
        return Mismatch("", ranges, f"the source is {now} bytes, the target {size}")
    return Mismatch("", ranges) if ranges else None


class _Pacer:
    """Sleep so that reading stays under ``rate`` bytes a second (0: as fast as the device goes)."""

    def __init__(self, rate: int, advance: Callable[[int], None]):
        self.rate, self.advance, self.t0, self.n = rate, advance, time.monotonic(), 0

    def __call__(self, n: int) -> None:
        self.n += n
        self.advance(n)
        if self.rate:
            ahead = self.n / self.rate - (time.monotonic() - self.t0)
            if ahead > 0:
                time.sleep(ahead)


def _hash_source(journal: Journal, plan: Plan, proof: Proof, rate: int) -> Proof:
    manifest = Manifest.from_dict(journal.load_json(side_files.COPY_MANIFEST))
    blocks = journal.load_json(side_files.TARGET_BLOCKS) or {}
    proof.began_at = proof.began_at or time.time()
    why = source_fingerprint.gone_why(plan)
    if why:
        raise SourceUnreadable(why)
    pace = _Pacer(rate, lambda n: None)
    for rec in sorted((r for r in manifest.records.values() if r.kind == "file"), key=lambda r: r.rel):
        if rec.rel in proof.done:
            continue
        if rec.rel not in blocks:
            bad: Mismatch | None = Mismatch(rec.rel, [], "no digest of the target was taken at the switch")
        else:
            bad = _compare_file(Path(plan.source_dir) / rec.rel, bytes.fromhex(blocks[rec.rel]), rec.size, pace)
        if bad is not None:
            bad.file = rec.rel
            proof.mismatches.append(bad)
        proof.done.append(rec.rel)
        proof.bytes_done += rec.size
        proof.save(journal)
    proof.mismatches += [Mismatch(rel, [], why) for rel, why in file_lists.differences(journal, plan, manifest)]
    proof.status = "failed" if proof.mismatches else "passed"
    proof.last_error = ""
    proof.finished_at = time.time()
    proof.save(journal)
    return proof


def _lock(journal: Journal, wait: bool) -> int | None:
    return try_lock(journal.dir / side_files.PROOF_LOCK, wait)


def pending(journal: Journal) -> bool:
    """The proof has still to run (pending, or blocked on a source that is back)."""
    proof = Proof.load(journal)
    if proof is None or proof.status not in ("pending", "blocked"):
        return False
    return proof.status == "pending" or source_fingerprint.gone_why(Plan.from_dict(journal.plan())) is None


def prover_alive(journal: Journal) -> bool:
    fd = _lock(journal, wait=False)
    if fd is None:
        return True
    os.close(fd)
    return False


def run(journal: Journal, rate: int = 0, wait: bool = True) -> Proof | None:
    """Run (or carry on) the proof; with ``wait``, first wait for a prover already at work.  None: one is busy."""
    fd = _lock(journal, wait)
    if fd is None:
        return None
    try:
        proof = Proof.load(journal)
        if proof is None or proof.status not in ("pending", "blocked"):
            return proof
        plan = Plan.from_dict(journal.plan())
        try:
            return _hash_source(journal, plan, proof, rate)
        except (SourceUnreadable, OSError) as exc:  # keep the progress, say why; the next run carries on
            proof.status = "blocked"
            proof.last_error = (f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename
                                else str(exc))
            proof.save(journal)
            return proof
    finally:
        os.close(fd)


def start_background(journal: Journal, rate: int = RATE) -> None:
    """Start a detached prover (its own session: it outlives this process and its terminal)."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    with open(journal.dir / side_files.PROOF_LOG, "ab") as log:
        subprocess.Popen([sys.executable, "-m", "datadir_mover.move.proof", str(journal.dir), str(rate)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
                         close_fds=True)


def main(argv: list[str]) -> int:
    journal = Journal(argv[0])
    try:
        run(journal, int(argv[1]) if len(argv) > 1 else RATE, wait=False)
    except MoveError as exc:
        print(f"innotier: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
