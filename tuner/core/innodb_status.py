"""What `SHOW ENGINE INNODB STATUS` and the error log say about waiting: a parser for both.

The monitor output is text meant for people; its sections differ by server (recorded in
tests/fixtures/recorded/innodb-status/):

- SEMAPHORES: MySQL prints the OS wait array (reservation and signal counts), the spins, rounds and OS
  waits of each rw-lock kind, and a "--Thread N has waited at FILE line L for S seconds the semaphore"
  paragraph per long wait.  MariaDB 10.6+ removed the wait array (MDEV-21452): the section is empty, so
  its counts are None (unknown), never 0.
- FILE I/O: pending fsyncs ("Pending flushes (fsync) log: 0; buffer pool: 0" in MySQL, one total in
  MariaDB), pending reads and writes.
- LOG: the LSN lines; checkpoint age = log sequence number - last checkpoint (what InnoDB must flush
  before it can reuse redo space); MySQL adds "N pending log flushes" on older versions only.
- BUFFER POOL AND MEMORY: size, free buffers, modified pages, pending LRU / flush-list writes.
- TRANSACTIONS: a "TRX HAS BEEN WAITING" line per transaction waiting for a row lock now.

The page cleaner's "intended loop took" warning is not in the monitor output but in the error log:
``page_cleaner_warnings`` reads it (MySQL 5.7 and MariaDB up to 10.4 print "page_cleaner: 1000ms
intended loop took 4316ms", MySQL 8.0.19+ "Page cleaner took 4316ms to flush 21 and evict 0 pages";
MariaDB 10.5+ rewrote the page cleaner and prints neither).

Pure functions of text: they never talk to a server.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

SQL_MONITOR = "SHOW ENGINE INNODB STATUS"
SECTION_RULE = re.compile(r"^-{3,}$")


@dataclass(frozen=True)
class InnodbStatus:
    """The wait-related figures of one `SHOW ENGINE INNODB STATUS` (None: this server does not print it)."""

    os_wait_reservations: int | None  # OS WAIT ARRAY INFO: reservation count (cumulative)
    os_wait_signals: int | None
    rw_spins: int | None  # summed over RW-shared, RW-excl, RW-sx (cumulative)
    rw_spin_rounds: int | None
    rw_os_waits: int | None
    semaphore_waits_now: int  # threads waiting on a semaphore at this moment ("--Thread N has waited at")
    semaphore_wait_seconds_max: float  # the longest of those waits
    lock_waits_now: int  # transactions waiting for a row lock at this moment
    pending_fsyncs: int | None  # data and log files together
    pending_log_fsyncs: int | None  # MySQL splits the log's out
    pending_log_flushes: int | None  # MySQL 5.7 / MariaDB < 10.5: "N pending log flushes, N pending chkp writes"
    pending_reads: int | None
    pending_writes: int | None
    lsn: int | None
    log_flushed: int | None
    pages_flushed_up_to: int | None
    last_checkpoint: int | None
    pool_pages: int | None
    free_pages: int | None
    modified_pages: int | None
    pending_lru_writes: int | None
    pending_flush_list_writes: int | None

    @property
    def checkpoint_age(self) -> int | None:
        """Redo bytes written since the last checkpoint."""
        if self.lsn is None or self.last_checkpoint is None:
            return None
        return self.lsn - self.last_checkpoint

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "checkpoint_age": self.checkpoint_age}


def sections(text: str) -> dict[str, list[str]]:
    """Section title -> its lines.  A title is a line between two rules of dashes."""
    lines = text.splitlines()
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    i = 0
    while i < len(lines):
        if (i + 2 < len(lines) and SECTION_RULE.match(lines[i].strip()) and SECTION_RULE.match(lines[i + 2].strip())
                and lines[i + 1].strip() and not SECTION_RULE.match(lines[i + 1].strip())):
            current = out.setdefault(lines[i + 1].strip(), [])
            i += 3
            continue
        if current is not None:
            current.append(lines[i])
        i += 1
    return out


def _int(pattern: str, lines: list[str]) -> int | None:
    rx = re.compile(pattern)
    for line in lines:
        m = rx.search(line)
        if m:
            return int(m.group(1))
    return None


def _sum(pattern: str, lines: list[str]) -> int | None:
    """The sum of the first group over every matching line (None when none matches)."""
    rx = re.compile(pattern)
    found = [int(m.group(1)) for line in lines for m in [rx.search(line)] if m]
    return sum(found) if found else None


def _bracket_sum(pattern: str, lines: list[str]) -> int | None:
    """'aio reads: [0, 3, 0, 1]' -> 4."""
    rx = re.compile(pattern + r"\s*\[([\d,\s]*)\]")
    for line in lines:
        m = rx.search(line)
        if m:
            return sum(int(x) for x in m.group(1).replace(",", " ").split())
    return None


def _semaphores(lines: list[str]) -> dict[str, Any]:
    waits = [float(m.group(1)) for line in lines
             for m in [re.search(r"has waited at .* for ([\d.]+) seconds the semaphore", line)] if m]
    return {
        "os_wait_reservations": _int(r"OS WAIT ARRAY INFO: reservation count (\d+)", lines),
        "os_wait_signals": _int(r"OS WAIT ARRAY INFO: signal count (\d+)", lines),
        "rw_spins": _sum(r"^RW-\S+ spins (\d+)", lines),
        "rw_spin_rounds": _sum(r"^RW-\S+ spins \d+, rounds (\d+)", lines),
        "rw_os_waits": _sum(r"^RW-\S+ spins \d+, rounds \d+, OS waits (\d+)", lines),
        "semaphore_waits_now": len(waits),
        "semaphore_wait_seconds_max": max(waits, default=0.0),
    }


def _total(*parts: int | None) -> int | None:
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def _file_io(lines: list[str], log: list[str]) -> dict[str, Any]:
    split = next((re.search(r"Pending flushes \(fsync\) log: (\d+); buffer pool: (\d+)", line) for line in lines
                  if "Pending flushes (fsync) log:" in line), None)
    total = _int(r"Pending flushes \(fsync\): (\d+)", lines)
    # MySQL: asynchronous (aio arrays) and synchronous ("8 pending preads, 0 pending pwrites"); MariaDB: one line
    sync_reads = _int(r"^(\d+) pending p?reads", lines)
    sync_writes = _int(r"^\d+ pending p?reads, (\d+) pending p?writes", lines)
    aio_reads = _bracket_sum(r"Pending normal aio reads:", lines)
    aio_writes = _bracket_sum(r"aio writes:", lines)
    return {
        "pending_fsyncs": (int(split.group(1)) + int(split.group(2))) if split else total,
        "pending_log_fsyncs": int(split.group(1)) if split else None,
        "pending_log_flushes": _int(r"^(\d+) pending log flushes", log),
        "pending_reads": _total(sync_reads, aio_reads),
        "pending_writes": _total(sync_writes, aio_writes),
    }


def _log(lines: list[str]) -> dict[str, Any]:
    return {"lsn": _int(r"^Log sequence number\s+(\d+)", lines), "log_flushed": _int(r"^Log flushed up to\s+(\d+)", lines),
            "pages_flushed_up_to": _int(r"^Pages flushed up to\s+(\d+)", lines),
            "last_checkpoint": _int(r"^Last checkpoint at\s+(\d+)", lines)}


def _buffer_pool(lines: list[str]) -> dict[str, Any]:
    pending = next((re.search(r"Pending writes: LRU (\d+), flush list (\d+)", line) for line in lines
                    if line.startswith("Pending writes: LRU")), None)
    return {"pool_pages": _int(r"^Buffer pool size\s+(\d+)", lines), "free_pages": _int(r"^Free buffers\s+(\d+)", lines),
            "modified_pages": _int(r"^Modified db pages\s+(\d+)", lines),
            "pending_lru_writes": int(pending.group(1)) if pending else None,
            "pending_flush_list_writes": int(pending.group(2)) if pending else None}


def parse(text: str) -> InnodbStatus:
    """The monitor output's wait figures; a text that is not monitor output is refused."""
    if "INNODB MONITOR OUTPUT" not in text:
        raise ValueError("not SHOW ENGINE INNODB STATUS output (no 'INNODB MONITOR OUTPUT' header)")
    s = sections(text)
    trx = s.get("TRANSACTIONS", [])
    return InnodbStatus(**_semaphores(s.get("SEMAPHORES", [])),
                        lock_waits_now=sum("TRX HAS BEEN WAITING" in line for line in trx),
                        **_file_io(s.get("FILE I/O", []), s.get("LOG", [])), **_log(s.get("LOG", [])),
                        **_buffer_pool(s.get("BUFFER POOL AND MEMORY", [])))


def fetch(conn) -> str:
    """The monitor output of a live server (the Status column)."""
    cur = conn.cursor()
    try:
        cur.execute(SQL_MONITOR)
        row = cur.fetchone()
    finally:
        cur.close()
    text = row[2] if row else ""
    return text.decode() if isinstance(text, bytes) else str(text)


# ---------------------------------------------------------------------------
# The error log


@dataclass(frozen=True)
class PageCleanerWarning:
    intended_ms: int | None  # the loop's target (1000 ms); None in the MySQL 8.0.19+ wording
    took_ms: int


PAGE_CLEANER = (
    re.compile(r"page_cleaner: (\d+)ms intended loop took (\d+)ms"),  # MySQL 5.7, MariaDB < 10.5
    re.compile(r"Page cleaner took (\d+)\s*ms to flush"),  # MySQL 8.0.19+
)


def page_cleaner_warnings(log_text: str) -> list[PageCleanerWarning]:
    """Every page-cleaner overrun the error log reports, in order."""
    out = []
    for line in log_text.splitlines():
        m = PAGE_CLEANER[0].search(line)
        if m:
            out.append(PageCleanerWarning(int(m.group(1)), int(m.group(2))))
            continue
        m = PAGE_CLEANER[1].search(line)
        if m:
            out.append(PageCleanerWarning(None, int(m.group(1))))
    return out
