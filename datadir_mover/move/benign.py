"""When a table that differs after the start is accepted, and when the move halts instead.

The check after the start compares each table's sample or checksum with the one read under
the commit block before the stop.  A difference is damage unless it is proven benign, and
only two causes are: commits that waited on the block at the stop and completed during the
shutdown (``atstop.py``), and client writes since the start (sample mode only: ``--verify
tables`` holds a read lock from the start).  A difference is accepted only when all of these hold
(docs/relocation.md, "When a difference after the start is accepted"):

1. the table is there and was read (not missing; a checksum, not NULL);
2. the files under the server were proven equal to the stopped source (``FileProof``): read back
   byte for byte (a move without ``--precopy``), the server's own files (a rollback), or the
   whole-file proof of a pre-copied move, which runs after the start: then the acceptance waits
   for it, as finalize does;
3. the cause explains *this* table: a commit waiting at the stop held a lock on it (named by the
   server, or within the count of its locked tables the server did not name), or rows were written
   since the start (row writes, never reads: ``sample.row_writes``), one table at most per row written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from datadir_mover.move.atstop import AtStop


class FileProof(StrEnum):
    READ_BACK = "read back"  # no pre-copy: every byte hashed as read from the stopped source and read back
    SOURCE = "source"  # a rollback: the server runs on its own files, nothing was copied
    PASSED = "passed"  # the whole-file proof of a pre-copied move passed
    PENDING = "pending"  # a pre-copied move: the whole-file proof runs after the start
    NONE = "none"  # nothing proven: no difference is accepted

    @property
    def holds(self) -> bool:
        return self in (FileProof.READ_BACK, FileProof.SOURCE, FileProof.PASSED, FileProof.PENDING)


@dataclass
class Evidence:
    at_stop: AtStop = field(default_factory=AtStop)
    file_proof: FileProof = FileProof.NONE

    @classmethod
    def of_move(cls, shutdown: dict[str, Any] | None, precopy: bool, proof: str | None = None,
                on_source: bool = False) -> "Evidence":
        """From the SHUTDOWN step's record; ``proof``: the whole-file proof's state when a pre-copied move has one."""
        if on_source:
            fp = FileProof.SOURCE
        elif not precopy:
            fp = FileProof.READ_BACK
        else:
            fp = FileProof.PASSED if proof == "passed" else FileProof.PENDING
        return cls(AtStop.from_journal(shutdown), fp)


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    at_stop: list[str] = field(default_factory=list)  # put down to the commits waiting at the stop
    since_start: list[str] = field(default_factory=list)  # put down to row writes since the start
    pending_proof: bool = False  # something was accepted that the whole-file proof has still to confirm


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(table, what is wrong when it cannot be benign, or None when it merely differs) for every table not equal."""
    out: list[tuple[str, str | None]] = []
    for name, value in sorted(before.items()):
        if name not in after:
            out.append((name, f"{name} is missing"))
        elif after[name] is None and value is not None:
            out.append((name, f"{name} could not be read (checksum NULL, {value} before)"))
        elif after[name] != value:
            out.append((name, None))
    return out


def judge(before: dict[str, Any], after: dict[str, Any], evidence: Evidence, row_writes: int = 0) -> Verdict:
    """Sort every difference into accepted (and why) or a problem that halts the move."""
    v = Verdict()
    named = evidence.at_stop.named_tables() if evidence.at_stop.count > 0 else set()
    unnamed = evidence.at_stop.unnamed_tables() if evidence.at_stop.count > 0 else 0
    writes = max(0, row_writes)
    for name, fatal in differences(before, after):
        changed = f"{name}: {after.get(name)} != {before[name]} before"
        if fatal:
            v.problems.append(fatal)
        elif not evidence.file_proof.holds:
            v.problems.append(f"{changed} (no file-level proof to rule out the copy)")
        elif name in named:
            v.at_stop.append(name)
        elif unnamed > 0:
            unnamed -= 1
            v.at_stop.append(name)
        elif writes > 0:
            writes -= 1
            v.since_start.append(name)
        else:
            v.problems.append(f"{changed} (no commit waiting at the stop held it, no row written since the start)")
    v.pending_proof = evidence.file_proof == FileProof.PENDING and bool(v.at_stop or v.since_start)
    return v
