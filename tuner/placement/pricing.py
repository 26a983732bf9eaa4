"""A file's measured I/O priced on a tier.

Cost of the same operations on tier T (counts and bytes as measured, unit costs from T's fio figures):
  reads   count x page-size random read latency, plus the bytes beyond one page each at T's sequential read rate;
  writes  count x page-size write latency, plus the bytes beyond one page each at T's sequential write rate;
  misc    count x T's fsync latency (for InnoDB's files, which stay open, misc is the fsyncs).
Saving = the file's wait where it is now minus that cost, kind by kind and never below zero (``saving``).  The wait "where it is now" is the measured
wait, or, for a file only *counted* (MariaDB's redo), the same pricing on the tier it is on now (``here``).
"""

from __future__ import annotations

from tuner.placement.model import FileIo, TierCost


def cost_parts(io: FileIo, tier: TierCost) -> tuple[float, float, float]:
    """Seconds the reads, the writes and the misc operations (fsyncs) would take on ``tier``."""
    page = tier.page_size
    reads = io.reads * tier.randread_s + max(0, io.read_bytes - io.reads * page) / tier.seqread_bps
    writes = io.writes * tier.write_s + max(0, io.write_bytes - io.writes * page) / tier.seqwrite_bps
    return reads, writes, io.misc * tier.fsync_s


def cost_on(io: FileIo, tier: TierCost) -> float:
    return sum(cost_parts(io, tier))


def wait_parts(io: FileIo, here: TierCost | None) -> tuple[float, float, float] | None:
    """Seconds the I/O takes where the file is now: measured, or priced (None: counted, no tier to price on)."""
    if io.timed:
        return io.read_s, io.write_s, io.misc_s
    return None if here is None else cost_parts(io, here)


def wait_here(io: FileIo, here: TierCost | None) -> float | None:
    parts = wait_parts(io, here)
    return None if parts is None else sum(parts)


def saving(io: FileIo, target: TierCost, here: TierCost | None = None) -> float | None:
    """Wait saved by moving the I/O to ``target``, kind by kind, never below zero.

    A kind that waits less now than fio's figure on the target was served by a path fio does not measure
    (an asynchronous write is timed only for its submission, a buffered read may come from the page cache);
    moving the file does not put that wait in the foreground, so it saves nothing rather than costs.
    """
    now = wait_parts(io, here)
    if now is None:
        return None
    return sum(max(0.0, n - c) for n, c in zip(now, cost_parts(io, target)))
