"""Whether a MariaDB table copy fits in the redo log's free room: the note a plan prints before the copy.

pt-online-schema-change copies with INSERT ... SELECT, so every row goes through the redo log: up to the
table's size of it (measured: while it copied a 36 MiB table in 1.4 s, 46 MiB of redo was written, about
19 MiB of it the TPC-C clients' own).  A server whose clients already keep the redo log close to its checkpoint
limit must then flush pages hard to free room, and commits wait meanwhile: the clients' p99 during a move
under TPC-C fell when the redo log grew from 96 MiB to 1 GiB (docs/table-moves.md, "Redo").
MySQL's ALTER TABLE ... TABLESPACE is an in-place rebuild that logs almost no redo (MySQL 9.7, the 33 MiB
stock table: 0.1 MiB rebuilt in place, 40 MiB copied by INSERT ... SELECT), so the note is the MariaDB
copier's only.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.core import innodb_status
from tuner.core.server import Flavor, Version
from tuner.core.units import human_size

# The share of the redo log InnoDB fills before it flushes pages hard to move the checkpoint (its asynchronous
# flush point is 7/8 of the usable log in MariaDB and MySQL; three quarters is below it on both): the copy fits
# when the room left under it holds the copy's redo.  Clients' checkpoint age settles near this point whatever
# the size (measured under TPC-C: 72 of 96 MiB, 184 of 256 MiB, 690 of 1024 MiB after 90 s), so what decides is
# the room left, the larger the log the more of it
FLUSH_SHARE = 0.75
MIB = 1 << 20


@dataclass(frozen=True)
class RedoRoom:
    capacity: int  # bytes of redo log
    checkpoint_age: int  # bytes written since the last checkpoint, when the plan was made
    copy_bytes: int  # redo the copy writes: about the table's size

    @property
    def room(self) -> int:
        """Redo bytes the server can take before it flushes pages hard (negative: it does already)."""
        return int(FLUSH_SHARE * self.capacity) - self.checkpoint_age

    @property
    def crowded(self) -> bool:
        return self.copy_bytes > self.room

    def suggested_capacity(self) -> int:
        """The smallest power-of-two MiB size whose room, at today's checkpoint age, holds the copy."""
        need = (self.checkpoint_age + self.copy_bytes) / FLUSH_SHARE
        size = 64 * MIB
        while size < need:
            size *= 2
        return size


def capacity(variables: dict[str, str]) -> int | None:
    """The redo log's size from the server's variables (MySQL 8.0.30+: innodb_redo_log_capacity)."""
    if variables.get("innodb_redo_log_capacity"):
        return int(variables["innodb_redo_log_capacity"])
    size = variables.get("innodb_log_file_size")
    if not size:
        return None
    return int(size) * int(variables.get("innodb_log_files_in_group") or 1)


def read(conn, variables: dict[str, str], copy_bytes: int) -> RedoRoom | None:
    """The room now (None: the server does not say its checkpoint age or its redo size)."""
    size = capacity(variables)
    age = innodb_status.parse(innodb_status.fetch(conn)).checkpoint_age
    if size is None or age is None:
        return None
    return RedoRoom(size, age, copy_bytes)


def resize_words(flavor: Flavor, version: Version, size: int) -> str:
    """How this server grows its redo log: online where it can."""
    mib = f"{size // MIB}M"
    if flavor == Flavor.MARIADB and version >= Version(10, 9):
        return (f"SET GLOBAL innodb_log_file_size = {size} (online in MariaDB 10.9+; put "
                f"innodb_log_file_size = {mib} in my.cnf too)")
    if flavor == Flavor.MYSQL and version >= Version(8, 0, 30):
        return f"SET PERSIST innodb_redo_log_capacity = {size} (online in MySQL 8.0.30+)"
    return f"innodb_log_file_size = {mib} in my.cnf (a restart)"


def note(room: RedoRoom, flavor: Flavor, version: Version) -> str | None:
    """The plan's line when the copy crowds the redo log; None when it fits."""
    if not room.crowded:
        return None
    size = room.suggested_capacity()
    return (f"redo: the copy writes about {human_size(room.copy_bytes)} of redo into a {human_size(room.capacity)} "
            f"redo log with {human_size(room.checkpoint_age)} not yet checkpointed: InnoDB will flush pages hard to "
            "make room and clients' commits wait meanwhile (measured under TPC-C: docs/table-moves.md, \"Redo\"); "
            f"to soften it, grow the redo log to {human_size(size)} or more first ({resize_words(flavor, version, size)}), "
            "let the clients run a while and plan again: the part not yet checkpointed grows with the log; or spread "
            "the copy out (`--pace 0.1`: about 6x as long)")
