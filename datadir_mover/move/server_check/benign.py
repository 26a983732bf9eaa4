"""When a table that differs after the start is accepted, and when the move halts instead.

The check after the start compares each table's sample or checksum with the one read under
the commit block before the stop.  A difference is damage unless it is proven benign, and
only two causes are: commits that waited on the block at the stop and completed during the
shutdown (``waiting_commits``), and client writes since the start (sample mode only: ``--verify
tables`` holds a read lock from the start).  A difference is accepted only when all of these hold
(docs/relocation.md, "When a difference after the start is accepted"):

1. the table is there and was read (not missing; a checksum, not NULL);
2. the files under the server were proven equal to the stopped source (``FileProof``): read back
   byte for byte (a move without ``--precopy``), the server's own files (a rollback), or the
   whole-file proof of a pre-copied move once it *passed* (it runs after the start: the check
   runs it to the end first when a difference needs it; pending or blocked is no proof);
3. the evidence is about *this* table: a commit waiting at the stop held a lock on it and the
   server named it (a lock the server counted but did not name, or lock names it could not read,
   excuse nothing), or the server wrote rows of it since the start (``tables_written``: its
   in-memory last-change time of the table, set by a commit that changed it).  A row written to
   another table (a heartbeat, a replica's ``gtid_slave_pos``) excuses nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from datadir_mover.move.server_check.waiting_commits import AtStop


class FileProof(StrEnum):
    READ_BACK = "read back"  # no pre-copy: every byte hashed as read from the stopped source and read back
    SOURCE = "source"  # a rollback: the server runs on its own files, nothing was copied
    PASSED = "passed"  # the whole-file proof of a pre-copied move passed
    PENDING = "pending"  # a pre-copied move: the whole-file proof runs after the start (no proof yet)
    NONE = "none"  # nothing proven: no difference is accepted

    @property
    def holds(self) -> bool:
        return self in (FileProof.READ_BACK, FileProof.SOURCE, FileProof.PASSED)


@dataclass
class Evidence:
    at_stop: AtStop = field(default_factory=AtStop)
    file_proof: FileProof = FileProof.NONE

    @classmethod
    def of_move(cls, at_stop: AtStop, precopy: bool, proof: str | None = None,
                on_source: bool = False) -> "Evidence":
        """From the commits SHUTDOWN found waiting at the stop (``step_records.ShutdownRecord.commits_at_stop``);
        ``proof``: the whole-file proof's state when a pre-copied move has one."""
        if on_source:
            fp = FileProof.SOURCE
        elif not precopy:
            fp = FileProof.READ_BACK
        else:
            fp = {"passed": FileProof.PASSED, "pending": FileProof.PENDING, None: FileProof.PENDING}.get(
                proof, FileProof.NONE)  # blocked or failed: no proof
        return cls(at_stop, fp)


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    at_stop: list[str] = field(default_factory=list)  # put down to the commits waiting at the stop
    since_start: list[str] = field(default_factory=list)  # put down to row writes since the start
    pending_proof: bool = False  # a difference the whole-file proof, once passed, may excuse


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


def judge(before: dict[str, Any], after: dict[str, Any], evidence: Evidence,
          written: set[str] | frozenset[str] = frozenset()) -> Verdict:
    """Sort every difference into accepted (and why) or a problem that halts the move; ``written``: the tables the
    server wrote rows of since the start (``tables_written.since_start``)."""
    v = Verdict()
    named = evidence.at_stop.named_tables() if evidence.at_stop.count > 0 else set()
    for name, fatal in differences(before, after):
        changed = f"{name}: {after.get(name)} != {before[name]} before"
        if fatal:
            v.problems.append(fatal)
        elif not evidence.file_proof.holds:
            v.pending_proof = v.pending_proof or evidence.file_proof == FileProof.PENDING
            v.problems.append(f"{changed} (no file-level proof to rule out the copy: {evidence.file_proof.value})")
        elif name in named:
            v.at_stop.append(name)
        elif name in written:
            v.since_start.append(name)
        else:
            v.problems.append(f"{changed} (no commit waiting at the stop named it, no row of it written since the "
                              "start)")
    return v
