"""What a TPC-C run is asked to do: the one config every driver (built-in or adapter) takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.core.errors import UsageError

MODES = ("procedures", "statements")
DECKS = ("23", "100")  # tuner.tpcc.mix.DECKS (kept here so the CLI's --help needs no import of the workload)


@dataclass
class RunConfig:
    clients: int = 8
    warmup: float = 10.0  # seconds, excluded from results
    duration: float = 60.0  # measured seconds
    mode: str = "procedures"  # procedures (server-side, as HammerDB) or statements (client-side prepared)
    interval: float = 10.0  # report interval, seconds
    warehouses: int | None = None  # None: read from the loaded schema
    database: str = "tpcc"
    keying_and_think: bool = False  # TPC-C keying and think times (off by default, as the peers)
    driver: str = "builtin"  # builtin, hammerdb, tpcc-mysql, sysbench-tpcc, go-tpc
    tool_path: str | None = None  # external driver's path (adapters)
    workers: int | None = None  # client processes (default: chosen from clients and cores)
    labels: dict[str, str] = field(default_factory=dict)  # run info for results and exporter (tier, profile...)
    shard: Any = None  # tuner.tpcc.shard.Shard: this run is shard I of N (clients is then the fleet's total)
    start_at: float | None = None  # shared wall-clock start of a sharded run (epoch seconds)
    deck: str = "23"  # the mix deck: 23 (TPC-C 5.2.4.2, default) or 100 (45/43/4/4/4, reported as such)
    max_retries: int = 100  # retries of a deadlocked / lock-wait-timed-out transaction before it is an error
    outage_limit: float = 60.0  # seconds the server may stay away before the run ends with a failure

    def validate(self) -> "RunConfig":
        if self.clients < 1:
            raise UsageError(f"--clients {self.clients} is not valid; give 1 or more")
        if self.duration <= 0:
            raise UsageError(f"--duration {self.duration:g} is not valid; give a positive number of seconds")
        if self.warmup < 0:
            raise UsageError(f"--warmup {self.warmup:g} is negative; give 0 or more seconds")
        if self.interval <= 0:
            raise UsageError(f"--interval {self.interval:g} is not valid; give a positive number of seconds")
        if self.mode not in MODES:
            raise UsageError(f"--mode {self.mode!r} is unknown; use procedures or statements")
        if self.deck not in DECKS:
            raise UsageError(f"--deck {self.deck!r} is unknown; use {' or '.join(DECKS)}")
        if self.max_retries < 0:
            raise UsageError(f"--max-retries {self.max_retries} is negative; give 0 or more")
        if self.outage_limit <= 0:
            raise UsageError(f"--outage-limit {self.outage_limit:g} is not valid; give a positive number of seconds")
        if self.warehouses is not None and self.warehouses < 1:
            raise UsageError(f"--warehouses {self.warehouses} is not valid; give 1 or more")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
