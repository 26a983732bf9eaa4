"""Before a built-in TPC-C run starts: the preflight that refuses a run the server or schema cannot take,
and the plan (clients per worker, home warehouses, the tick schedule), printable and decided up front."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tuner.core.errors import UsageError, WorkloadError
from tuner.tpcc import schema
from tuner.tpcc.config import RunConfig
from tuner.tpcc.transaction import MODULES

TICK_SECONDS = 1.0

SELECT_LIMITS = "SELECT @@max_connections, @@max_prepared_stmt_count"
STATUS_COUNTERS = ("SHOW GLOBAL STATUS WHERE Variable_name IN "
                   "('Com_commit', 'Com_rollback', 'Threads_connected', 'Prepared_stmt_count', 'Uptime')")


@dataclass
class RunPlan:
    """What a run will do, decided before anything starts (printable)."""

    database: str
    mode: str
    clients: int
    warehouses: int
    loaded_warehouses: int
    workers: int
    clients_per_worker: list[int]
    warmup: float
    duration: float
    interval: float
    keying_and_think: bool
    deck: str
    max_retries: int
    outage_limit: float
    max_connections: int
    server: str
    constants: dict[str, int]  # NURand C-Run values (clause 2.1.6)
    shard: str | None = None  # "I/N" when this run is one shard of a fleet run (tuner/tpcc/shard.py)
    home_warehouses: tuple[int, int] | None = None  # the shard's first and last home warehouse
    start_at: float | None = None  # shared wall-clock start (epoch seconds) of a sharded run

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def default_workers(clients: int) -> int:
    return max(1, min(clients, os.cpu_count() or 1))


def client_split(clients: int, workers: int) -> list[list[int]]:
    """Client numbers per worker, round-robin (so each worker holds every warehouse)."""
    return [list(range(k, clients, workers)) for k in range(workers)]


def schedule(warmup: float, duration: float, interval: float, tick: float = TICK_SECONDS) -> list[tuple[float, str]]:
    """Offsets from t0 at which workers ship a snapshot, with what the parent does there.

    Kinds: ``warmup`` (warm-up delta), ``start`` (end of warm-up: measuring
    starts after it), ``tick`` (measured delta), ``interval`` (measured delta,
    then close a report interval), ``end`` (last measured delta, close, stop).
    """
    tick = min(tick, interval)
    out: dict[float, str] = {}
    k = 1
    while k * tick < warmup - 1e-9:
        out[round(k * tick, 6)] = "warmup"
        k += 1
    if warmup > 0:
        out[round(warmup, 6)] = "start"
    k = 1
    while k * tick < duration - 1e-9:
        out[round(warmup + k * tick, 6)] = "tick"
        k += 1
    j = 1
    while j * interval < duration - 1e-9:
        out[round(warmup + j * interval, 6)] = "interval"
        j += 1
    out[round(warmup + duration, 6)] = "end"
    return sorted(out.items())


def server_status(cur) -> dict[str, int]:
    cur.execute(STATUS_COUNTERS)
    return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in cur.fetchall()}


@dataclass(frozen=True)
class _ServerFacts:
    loaded: int
    warehouses: int
    constants: Any  # RunConstants
    max_connections: int
    server: str


def _loaded_warehouses(conn, spec, db: str, asked: int | None) -> tuple[int, int]:
    present = schema.present_tables(conn, db)
    complete = all(t in present for t in schema.TABLES)
    loaded = schema.warehouse_count(conn, db) if complete else 0
    if loaded == 0:
        raise WorkloadError(f"database {db!r} on {spec.describe()} holds no loaded TPC-C schema; "
                            f"load one first with `innotier tpcc load --warehouses N --database {db}`")
    warehouses = asked or loaded
    if warehouses > loaded:
        raise UsageError(f"--warehouses {warehouses} is more than the {loaded} loaded in {db!r}; "
                         f"give --warehouses {loaded} or less, or reload with `innotier tpcc load "
                         f"--warehouses {warehouses} --drop`")
    return loaded, warehouses


def _check_limits(cur, cfg: RunConfig) -> int:
    """The server can take the connections (and prepared statements) of the run; returns max_connections."""
    cur.execute(SELECT_LIMITS)
    max_connections, max_prepared = (int(v) for v in cur.fetchone())
    status = server_status(cur)
    in_use = status.get("Threads_connected", 1)
    if cfg.clients + in_use > max_connections:
        raise UsageError(f"--clients {cfg.clients} needs {cfg.clients} connections but the server's "
                         f"max_connections is {max_connections} with {in_use} in use; raise max_connections "
                         f"(SET GLOBAL max_connections = {cfg.clients + in_use + 10}) or use fewer clients")
    if cfg.mode == "statements":
        per_client = sum(len(m.CLIENT_STATEMENTS) for m in MODULES.values())
        need = cfg.clients * per_client + status.get("Prepared_stmt_count", 0)
        if need > max_prepared:
            raise UsageError(f"--mode statements with --clients {cfg.clients} prepares {need} statements but "
                             f"the server's max_prepared_stmt_count is {max_prepared}; raise it (SET GLOBAL "
                             f"max_prepared_stmt_count = {need + 1000}), use fewer clients or --mode procedures")
    return max_connections


def _server_facts(spec, cfg: RunConfig) -> _ServerFacts:
    conn = spec.with_database(None).connect()
    try:
        loaded, warehouses = _loaded_warehouses(conn, spec, cfg.database, cfg.warehouses)
        constants = schema.run_constants(conn, cfg.database)
        cur = conn.cursor()
        max_connections = _check_limits(cur, cfg)
        cur.execute("SELECT VERSION()")
        server = cur.fetchone()[0]
        cur.close()
    finally:
        conn.close()
    return _ServerFacts(loaded, warehouses, constants, max_connections, str(server))


def preflight(spec, cfg: RunConfig) -> RunPlan:
    """Check the server and schema can take this run; refuse with the fix otherwise.  Changes nothing."""
    facts = _server_facts(spec, cfg)
    clients = cfg.shard.clients(cfg.clients) if cfg.shard else cfg.clients
    home = cfg.shard.warehouses(facts.warehouses) if cfg.shard else None
    workers = cfg.workers or default_workers(clients)
    if workers < 1:
        raise UsageError(f"--workers {workers} is not valid; give 1 or more")
    workers = min(workers, clients)
    return RunPlan(database=cfg.database, mode=cfg.mode, clients=clients, warehouses=facts.warehouses,
                   loaded_warehouses=facts.loaded, workers=workers,
                   clients_per_worker=[len(c) for c in client_split(clients, workers)],
                   shard=str(cfg.shard) if cfg.shard else None, home_warehouses=home, start_at=cfg.start_at,
                   warmup=cfg.warmup, duration=cfg.duration, interval=cfg.interval,
                   keying_and_think=cfg.keying_and_think, deck=cfg.deck, max_retries=cfg.max_retries,
                   outage_limit=cfg.outage_limit, max_connections=facts.max_connections,
                   server=facts.server, constants=facts.constants.to_dict())
