"""The built-in TPC-C driver: N terminals over a few worker processes, one shared Measurement.

Shape of a run::

    preflight (schema loaded? warehouses? enough max_connections / prepared statements?)
      -> plan (clients per worker, home warehouses, tick schedule)   [RunPlan, printable]
      -> install procedures (procedures mode)
      -> workers connect every terminal, report ready
      -> t0: warm-up ticks, measured ticks, end             [parent merges snapshots, closes intervals]
      -> RunResult (tpmC from the client counts; NOPM and TPM from the server, as HammerDB defines them)

Concurrency: one Python thread per connection does not scale in one process
(the GIL), and one process per connection costs too much memory at 512 clients.
So ``workers`` processes (default: one per core) each run many terminal threads;
the threads spend their time inside the C extension's blocking calls, which
release the GIL.  Each worker owns a Measurement, guarded by one lock, and ships
delta snapshots to the parent at fixed ticks (1 s, aligned on a shared monotonic
clock) so the parent's timeline and the warm-up boundary are exact.

Outcomes recorded: each transaction ends once, as commit, rollback (New-Order's
1% unused item) or error (anything else, and a deadlock 1213 / lock-wait timeout
1205 whose ``max_retries`` retries ran out), with its latency from the first
attempt; each retry is counted as it happens.  The transactions are drawn from
the TPC-C 5.2.4.2 deck of 23 cards unless ``--deck 100`` asks otherwise; the
result names the deck and the realized mix.

A lost connection (a server restart, a datadir move) does not end the run: the
transaction in flight counts as an error, the terminal reconnects with backoff
and goes on; the result reports the reconnects, the outage windows and the
error messages.  Only a server that stays away longer than ``outage_limit``
ends the run early: the result keeps the partial timeline and says why
(complete=False).

A SIGTERM to the process that runs the driver (what `timeout` or a service manager sends) ends the run
like a server that stays away: the workers stop, the result keeps what was measured (complete=False).
Workers never outlive the driver's process, even when it is killed (tuner/tpcc/worker.py).

Where it lives: run_plan.py (preflight, plan, schedule), worker.py and worker_messages.py (the worker
processes and what they send), transaction.py (one transaction with its retries), run_parent.py (starting,
merging, collecting), run_result.py (server counters, the RunResult).

Metrics (HammerDB's definitions): NOPM = growth of
sum(D_NEXT_O_ID) per minute over the measured window; TPM = growth of
Com_commit + Com_rollback per minute (server-wide; unknown when the server
restarted inside the window, as the counters restart at 0).  tpmC = completed
(committed + rolled-back) New-Orders per minute counted by the client.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from tuner.core.errors import ServerError
from tuner.core.measure import Measurement, RunResult
from tuner.tpcc import procedures
from tuner.tpcc.config import RunConfig
from tuner.tpcc.run_parent import READY_TIMEOUT, START_DELAY, RunParent
from tuner.tpcc.run_plan import TICK_SECONDS, RunPlan, client_split, default_workers, preflight, schedule
from tuner.tpcc.run_result import ServerCounters
from tuner.tpcc.transaction import MAX_RETRIES, MODULES, describe, execute, run_transaction
from tuner.tpcc.worker import OUTAGE_LIMIT, WorkerTask, worker_main

__all__ = ["MAX_RETRIES", "MODULES", "OUTAGE_LIMIT", "READY_TIMEOUT", "START_DELAY", "TICK_SECONDS", "RunPlan",
           "ServerCounters", "WorkerTask", "client_split", "default_workers", "describe", "execute", "preflight",
           "run", "run_transaction", "schedule", "worker_main"]


def _install_procedures(spec, plan: RunPlan, sharded: bool) -> None:
    conn = spec.connect()
    try:
        tries = 3 if sharded else 1  # the shards of one fleet run may install at the same moment
        for attempt in range(tries):
            try:
                procedures.install(conn, plan.database)
                return
            except ServerError:
                if attempt == tries - 1:
                    raise
                time.sleep(0.5 + random.random())
    finally:
        conn.close()


@contextmanager
def _sigterm_ends(parent: RunParent) -> Iterator[None]:
    """While the run lasts, SIGTERM ends it cleanly (and still reaches a handler the caller installed)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) == signal.SIG_IGN):
        yield  # only the main thread may handle signals, and a caller that ignores SIGTERM keeps doing so
        return

    def handler(signum, frame):
        parent.stopped_by = "SIGTERM"
        if callable(previous):
            previous(signum, frame)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(spec, cfg: RunConfig, measurement: Measurement | None = None,
        on_interval: Callable | None = None, *, on_tick: Callable | None = None,
        on_plan: Callable[[RunPlan], None] | None = None) -> RunResult:
    """Run the built-in driver; return the result (``complete=False`` with ``failure`` if the server went away
    or the run was stopped by SIGTERM).

    ``on_interval(point)`` is called with each closed IntervalPoint; ``on_tick(kind,
    offset, measurement)`` after each merged tick (warm-up included), for live progress.
    """
    cfg.validate()
    spec = spec.with_database(cfg.database)
    plan = preflight(spec, cfg)
    if on_plan:
        on_plan(plan)
    if plan.mode == "procedures":
        _install_procedures(spec, plan, sharded=cfg.shard is not None)
    parent = RunParent(spec, cfg, plan, measurement or Measurement(), on_interval, on_tick)
    with _sigterm_ends(parent):
        try:
            parent.start_workers()
            parent.wait_ready()
            return parent.drive()
        finally:
            parent.stop()
