"""The placement advisor's records: measured I/O per file, candidates, a tier's costs, the advice.

They flow one way: snapshots -> IoProfile (intervals of per-file deltas, candidates with sizes) ->
TierCost (a tier in the same terms) -> Advice.  Times are seconds, sizes bytes; performance_schema's
picoseconds are converted once, where they are read (measure.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

# the kinds of candidate: a table or partition's own .ibd, or a component the mover knows
TABLE_KINDS = ("table", "partition")
COMPONENT_KINDS = ("redo", "undo", "doublewrite", "tmpdir", "ibdata")


@dataclass(frozen=True)
class FileIo:
    """One file's I/O over a span, from performance_schema.file_summary_by_instance.

    ``misc`` is everything that is neither a read nor a write (fsync, open, close, stat); InnoDB keeps its
    files open, so for its files it is almost only fsync, and it is priced as such.
    """

    reads: int = 0
    read_bytes: int = 0
    read_s: float = 0.0
    writes: int = 0
    write_bytes: int = 0
    write_s: float = 0.0
    misc: int = 0
    misc_s: float = 0.0
    # False: counted by a weaker source without wait times (MariaDB's redo: SHOW GLOBAL STATUS); its time
    # on the tier it lives on now is then priced from that tier's costs, like its time on the target
    timed: bool = True

    @property
    def wait_s(self) -> float:
        return self.read_s + self.write_s + self.misc_s

    @property
    def ops(self) -> int:
        return self.reads + self.writes + self.misc

    def __add__(self, other: "FileIo") -> "FileIo":
        return FileIo(*(getattr(self, f.name) + getattr(other, f.name) for f in COUNTERS),
                      timed=self.timed and other.timed)

    def since(self, before: "FileIo | None") -> "FileIo":
        """The delta from ``before``; a counter that went backwards means the file was recreated in between
        (temporary files), and then everything counted now happened since."""
        if before is None:
            return self
        delta = FileIo(*(getattr(self, f.name) - getattr(before, f.name) for f in COUNTERS), timed=self.timed)
        if any(getattr(delta, f.name) < 0 for f in COUNTERS):
            return self
        return delta

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FileIo":
        return cls(**{f.name: d.get(f.name, 0) for f in fields(cls)})


COUNTERS = tuple(f for f in fields(FileIo) if f.name != "timed")


def sum_io(items) -> FileIo:
    total = FileIo()
    for io in items:
        total = total + io
    return total


@dataclass(frozen=True)
class TableRows:
    """One table's row activity (performance_schema.table_io_waits_summary_by_table)."""

    fetch: int = 0
    insert: int = 0
    update: int = 0
    delete: int = 0
    wait_s: float = 0.0

    def since(self, before: "TableRows | None") -> "TableRows":
        if before is None:
            return self
        delta = TableRows(*(getattr(self, f.name) - getattr(before, f.name) for f in fields(self)))
        return self if any(getattr(delta, f.name) < 0 for f in fields(delta)) else delta

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TableRows":
        return cls(**{f.name: d.get(f.name, 0) for f in fields(cls)})


@dataclass(frozen=True)
class Snapshot:
    """The server's cumulative counters at one moment (``at``: time.monotonic())."""

    at: float
    files: Mapping[str, FileIo]
    tables: Mapping[str, TableRows]


@dataclass(frozen=True)
class Interval:
    """What each file did between two snapshots."""

    seconds: float
    files: Mapping[str, FileIo]

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "files": {k: asdict(v) for k, v in sorted(self.files.items())}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Interval":
        return cls(float(d["seconds"]), {k: FileIo.from_dict(v) for k, v in d["files"].items()})


@dataclass(frozen=True)
class Candidate:
    """Something that can be placed on a tier as one unit: a table, a partition, or a component."""

    key: str                 # "tpcc.stock", "tpcc.orders#P#p0", "redo", ...
    kind: str                # TABLE_KINDS or COMPONENT_KINDS
    label: str               # for people
    files: tuple[str, ...]   # the measured files that belong to it
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"files": list(self.files)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Candidate":
        return cls(d["key"], d["kind"], d["label"], tuple(d["files"]), int(d["size_bytes"]))


@dataclass(frozen=True)
class IoProfile:
    """Where a workload's file I/O went, interval by interval, and what could be placed elsewhere."""

    profile_id: str
    taken_at: str                       # ISO 8601 UTC, the start of the window
    server: Mapping[str, Any]           # flavor, version, sandbox, datadir, page_size
    workload: Mapping[str, Any]         # what ran during the window (TPC-C settings and result, or "observed")
    intervals: tuple[Interval, ...]
    candidates: tuple[Candidate, ...]
    other_files: tuple[str, ...]        # measured but not placeable alone (ibtmp1, .frm, Aria logs, binlogs)
    tables: Mapping[str, TableRows]     # row activity over the whole window
    notes: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(i.seconds for i in self.intervals)

    @property
    def page_size(self) -> int:
        return int(self.server.get("page_size") or 16384)

    def file_totals(self) -> dict[str, FileIo]:
        out: dict[str, FileIo] = {}
        for interval in self.intervals:
            for name, io in interval.files.items():
                out[name] = out.get(name, FileIo()) + io
        return out

    def candidate(self, key: str) -> Candidate:
        for c in self.candidates:
            if c.key == key:
                return c
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        return {"profile_id": self.profile_id, "taken_at": self.taken_at, "server": dict(self.server),
                "workload": dict(self.workload), "intervals": [i.to_dict() for i in self.intervals],
                "candidates": [c.to_dict() for c in self.candidates], "other_files": list(self.other_files),
                "tables": {k: asdict(v) for k, v in sorted(self.tables.items())}, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "IoProfile":
        return cls(d["profile_id"], d["taken_at"], d["server"], d["workload"],
                   tuple(Interval.from_dict(i) for i in d["intervals"]),
                   tuple(Candidate.from_dict(c) for c in d["candidates"]), tuple(d["other_files"]),
                   {k: TableRows.from_dict(v) for k, v in d["tables"].items()}, tuple(d.get("notes", ())))


@dataclass(frozen=True)
class TierCost:
    """A tier in the terms a file's I/O is priced in (fio, tuner/placement/tiercost.py)."""

    tier_id: str
    mountpoint: str
    kind: str
    fs: str | None
    volatile: bool
    io_mode: str              # "O_DIRECT" or "buffered (...)"
    page_size: int            # the block size of the random jobs
    randread_s: float         # mean latency of one page-size random read, one at a time
    write_s: float            # mean latency of one page-size write (the write call, before its fsync)
    fsync_s: float            # mean latency of the fsync after each write
    seqread_bps: float        # sequential read, bytes per second
    seqwrite_bps: float       # sequential write, bytes per second
    free_bytes: int | None
    measured_at: str
    fio_version: str
    notes: tuple[str, ...] = ()
    # capacity: page-size random reads and writes per second at depth (libaio QD32); None in costs stored
    # before it was measured (the queueing model then takes the one-at-a-time latency as all service)
    randread_iops: float | None = None
    randwrite_iops: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TierCost":
        return cls(**{f.name: d.get(f.name) for f in fields(cls)} | {"notes": tuple(d.get("notes", ()))})


@dataclass(frozen=True)
class Pick:
    """A set of candidates and what moving them is predicted to save (seconds of I/O wait per second)."""

    name: str                 # "advisor", "largest tables", "redo alone", "everything"
    keys: tuple[str, ...]
    size_bytes: int
    saving: float             # predicted wait saved, seconds per second of workload
    low: float | None         # bootstrap 95% interval over the measured intervals (None: fewer than 2)
    high: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"keys": list(self.keys)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Pick":
        return cls(d["name"], tuple(d["keys"]), int(d["size_bytes"]), float(d["saving"]), d.get("low"), d.get("high"))


@dataclass(frozen=True)
class Advice:
    """The advisor's plan for one budget on one tier, with the comparisons and the whole curve."""

    profile_id: str
    tier_id: str
    budget_bytes: int
    method: str                                  # "exact (0/1 knapsack, MiB units)" or "greedy by gain per byte"
    pick: Pick
    naive: tuple[Pick, ...]
    curve: tuple[tuple[int, float], ...]          # (budget bytes, best predicted saving), from 0 to everything
    curve_method: str
    measured_wait: float                          # all measured file wait, seconds per second
    gains: Mapping[str, float] = field(default_factory=dict)   # candidate -> predicted saving (s/s)
    notes: tuple[str, ...] = ()
    # pick name -> the most it can buy over the measured throughput (the bottleneck law on the two tiers'
    # capacities: ``queueing.bound``); empty without the tier the files are on now (--here)
    bounds: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"profile_id": self.profile_id, "tier_id": self.tier_id, "budget_bytes": self.budget_bytes,
                "method": self.method, "pick": self.pick.to_dict(), "naive": [p.to_dict() for p in self.naive],
                "curve": [list(p) for p in self.curve], "curve_method": self.curve_method,
                "measured_wait": self.measured_wait, "gains": dict(self.gains), "notes": list(self.notes),
                "bounds": dict(self.bounds)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Advice":
        return cls(d["profile_id"], d["tier_id"], int(d["budget_bytes"]), d["method"], Pick.from_dict(d["pick"]),
                   tuple(Pick.from_dict(p) for p in d["naive"]), tuple((int(b), float(g)) for b, g in d["curve"]),
                   d["curve_method"], float(d["measured_wait"]), dict(d.get("gains") or {}),
                   tuple(d.get("notes") or ()), dict(d.get("bounds") or {}))


@dataclass(frozen=True)
class StoredAdvice:
    """An advice as `placement advise` stored it: what `placement check` measures."""

    advice_id: str
    created_at: str                  # ISO 8601 UTC
    advice: Advice
    here_tier_id: str | None         # the tier the files were priced on where they are now (--here)

    def to_dict(self) -> dict[str, Any]:
        return {"advice_id": self.advice_id, "created_at": self.created_at, "advice": self.advice.to_dict(),
                "here_tier_id": self.here_tier_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StoredAdvice":
        return cls(d["advice_id"], d["created_at"], Advice.from_dict(d["advice"]), d.get("here_tier_id"))
