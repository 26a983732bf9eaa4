"""A placement's throughput predicted by a closed queueing network (exact mean value analysis).

The measured profile says how many page reads and writes each file made per second while the workload ran
at a known throughput; divided, that is each file's reads and writes per transaction.  A tier serves reads
and writes as two stations, each with the capacity fio measured at depth (``TierCost.randread_iops``,
``randwrite_iops``: 16 KiB random I/O at QD32) and, per operation, the part of its one-at-a-time latency
that capacity does not explain (a device with internal parallelism answers one read in more time than
1 / its IOPS) as a pure delay.  A placement puts each file's operations on its tier's stations; C clients
with no think time circulate through those stations and through the rest of a transaction's time (CPU,
locks, the network), a delay Z.  Z is the one fitted number: it is solved so that "everything on the fast
tier" over "nothing moved" is the ratio the check measured for it, as the calibrated law does.

What this adds to the residence-time law (``check.calibrated``): a tier has a capacity.  When a pick removes
most of the reads, the files left behind (the doublewrite buffer in ibdata, the redo log, the tables not
moved) now see 3 or 4 times the transactions per second, and a slow device that was 60% busy with their
writes is then the bottleneck; the law, which only removes a share of the wait, cannot see that.  On the
goal run of docs/placement.md (a throttled tier: 400 read and 200 write IOPS) the writes left behind bound
the top budget's pick near 3.4x, where the law said 6.35x.

Assumptions, said once: every transaction does the profile's average I/O (the mix is stationary); reads and
writes are separate stations (separate limits on a throttled device, separate queues on most SSDs); the
stations are single FIFO servers (a device's parallelism is folded into its measured capacity); writes are
in the loop (a page the buffer pool must flush before it can be reused, a redo write at commit), which
bounds throughput the way a device's write capacity does even for writes done in the background.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from tuner.placement.model import FileIo, IoProfile, TierCost

QUEUE_DEPTH = 32   # the depth `placement tier` measures a tier's capacity at (tiercost.jobs)


@dataclass(frozen=True)
class Station:
    """One tier's reads or writes: seconds of service per transaction and seconds of pure delay."""

    name: str
    demand_s: float
    delay_s: float


def service(latency_s: float, iops: float | None) -> tuple[float, float]:
    """(seconds the device is busy per operation, seconds of delay beyond that): 1 / capacity, and what is left
    of the one-at-a-time latency.  Without a measured capacity the latency is all service (a device that
    serves one operation at a time: a throttled or a rotating disk)."""
    busy = 1.0 / iops if iops and iops > 0 else latency_s
    return busy, max(0.0, latency_s - busy)


def stations(per_txn: Mapping[str, FileIo], tier_of: Mapping[str, TierCost]) -> list[Station]:
    """Each tier's read and write station, from every file's operations per transaction on its tier."""
    demand: dict[str, list[float]] = {}
    for name, io in per_txn.items():
        tier = tier_of[name]
        page = tier.page_size
        r_busy, r_delay = service(tier.randread_s, tier.randread_iops)
        w_busy, w_delay = service(tier.write_s, tier.randwrite_iops)
        extra_r = max(0.0, io.read_bytes - io.reads * page) / tier.seqread_bps
        extra_w = max(0.0, io.write_bytes - io.writes * page) / tier.seqwrite_bps
        for kind, busy, delay, extra, count in (("read", r_busy, r_delay, extra_r, io.reads),
                                                ("write", w_busy, w_delay, extra_w, io.writes)):
            d = demand.setdefault(f"{tier.mountpoint} {kind}", [0.0, 0.0])
            d[0] += count * busy + extra
            d[1] += count * delay
    return [Station(k, v[0], v[1]) for k, v in sorted(demand.items())]


def mva(demands: Iterable[float], delay_s: float, clients: int) -> float:
    """Throughput of ``clients`` circulating through single-server FIFO stations (service demands per
    transaction) and a delay, by exact mean value analysis (Reiser and Lavenberg, 1980)."""
    d = [x for x in demands if x > 0]
    queue = [0.0] * len(d)
    throughput = 0.0
    for n in range(1, clients + 1):
        residence = [di * (1 + qi) for di, qi in zip(d, queue)]
        total = delay_s + sum(residence)
        if total <= 0:
            return float("inf")
        throughput = n / total
        queue = [throughput * r for r in residence]
    return throughput


@dataclass(frozen=True)
class QueueingModel:
    """The profile's I/O per transaction, the two tiers, the clients and the fitted rest of a transaction."""

    per_txn: Mapping[str, FileIo]       # file -> operations per transaction
    owner: Mapping[str, str]            # file -> the candidate key it belongs to ("" for none)
    slow: TierCost
    fast: TierCost
    clients: int
    rest_s: float                       # Z: a transaction's time outside the two tiers

    def throughput(self, moved: Iterable[str]) -> float:
        keys = set(moved)
        tier_of = {f: (self.fast if self.owner.get(f) in keys else self.slow) for f in self.per_txn}
        st = stations(self.per_txn, tier_of)
        return mva([s.demand_s for s in st], self.rest_s + sum(s.delay_s for s in st), self.clients)

    def ratio(self, moved: Iterable[str]) -> float:
        return self.throughput(moved) / self.throughput(())

    def keys(self) -> set[str]:
        """Every candidate the profile measured: "everything" on the fast tier."""
        return set(self.owner.values())

    def everything(self) -> float:
        return self.ratio(self.keys())


def per_transaction(profile: IoProfile) -> dict[str, FileIo] | None:
    """Each candidate file's operations per transaction (all five TPC-C kinds count), None without a rate."""
    result = profile.workload.get("result") or {}
    tps = float(result.get("tpm") or 0) / 60.0
    if tps <= 0 or profile.seconds <= 0:
        return None
    owned = {f for c in profile.candidates for f in c.files}
    scale = 1.0 / (tps * profile.seconds)
    return {name: FileIo(reads=io.reads * scale, read_bytes=io.read_bytes * scale,
                         writes=io.writes * scale, write_bytes=io.write_bytes * scale)
            for name, io in profile.file_totals().items() if name in owned}


def bound(profile: IoProfile, slow: TierCost, fast: TierCost, moved: Iterable[str]) -> float | None:
    """The ceiling a placement meets, over the measured throughput, with no fitted number: a station busy D seconds
    per transaction serves at most 1 / D transactions per second (the bottleneck law), whatever the clients and
    the rest of a transaction do.  A ceiling at the measured I/O per transaction: at a higher rate InnoDB batches
    more (the doublewrite buffer, group commit), so a little fewer writes per transaction can lift it a little
    (the goal run's 165 MiB pick: ceiling 3.31x, measured 3.36x [3.04, 3.71]).  None without a transaction rate,
    or when nothing is left busy."""
    per_txn = per_transaction(profile)
    if not per_txn:
        return None
    keys = set(moved)
    owner = {f: c.key for c in profile.candidates for f in c.files}
    busiest = max((s.demand_s for s in stations(per_txn, {f: fast if owner.get(f) in keys else slow
                                                          for f in per_txn})), default=0.0)
    tps = float((profile.workload.get("result") or {}).get("tpm") or 0) / 60.0
    return 1.0 / (busiest * tps) if busiest > 0 else None


def fit(profile: IoProfile, slow: TierCost, fast: TierCost, clients: int, everything: float) -> QueueingModel | None:
    """The model whose "everything" over "none" is the measured ``everything`` ratio (Z by bisection on a log
    scale; the ratio falls as Z grows); None when the profile has no rate or the ratio cannot be reached."""
    per_txn = per_transaction(profile)
    if not per_txn or everything is None or everything <= 1 or clients < 1:
        return None
    owner = {f: c.key for c in profile.candidates for f in c.files}
    model = lambda z: QueueingModel(per_txn, owner, slow, fast, clients, z)  # noqa: E731
    lo, hi = 1e-9, 1e3
    if model(lo).everything() < everything:
        return None    # even with nothing else in a transaction the tiers cannot explain that ratio
    for _ in range(200):
        mid = (lo * hi) ** 0.5
        if model(mid).everything() > everything:
            lo = mid
        else:
            hi = mid
    return model((lo * hi) ** 0.5)
