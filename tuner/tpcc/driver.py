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

Metrics (HammerDB's definitions): NOPM = growth of
sum(D_NEXT_O_ID) per minute over the measured window; TPM = growth of
Com_commit + Com_rollback per minute (server-wide; unknown when the server
restarted inside the window, as the counters restart at 0).  tpmC = completed
(committed + rolled-back) New-Orders per minute counted by the client.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import random
import resource
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from tuner.core.errors import ServerError, UsageError, WorkloadError
from tuner.core.measure import Measurement, RunResult
from tuner.tpcc import delivery, mix, new_order, order_status, payment, procedures, schema, stock_level
from tuner.tpcc.config import RunConfig
from tuner.tpcc.session import Rollback, Session, classify
from tuner.tpcc.shard import home_of
from tuner.tpcc.terminal import RunConstants, Terminal

MODULES = {m.OP: m for m in (new_order, payment, order_status, delivery, stock_level)}
TICK_SECONDS = 1.0
MAX_RETRIES = 100  # retries of one transaction (deadlock / lock-wait timeout) before it counts as an error
OUTAGE_LIMIT = 60.0  # seconds the server may stay away before the run ends with a failure
RECONNECT_FIRST_DELAY = 0.05  # seconds; doubled after each failed reconnect attempt ...
RECONNECT_MAX_DELAY = 1.0  # ... up to this
READY_TIMEOUT = 120.0  # seconds for all workers to connect their terminals
THREAD_STACK_BYTES = 512 * 1024  # terminal threads are shallow; 512 threads x 8 MiB default would be 4 GiB of VM
START_DELAY = 0.3  # seconds between "go" and t0, so every worker sees t0 in the future

SUM_NEXT_O_ID = "SELECT SUM(d_next_o_id) FROM `{db}`.district"
SELECT_LIMITS = "SELECT @@max_connections, @@max_prepared_stmt_count"
STATUS_COUNTERS = ("SHOW GLOBAL STATUS WHERE Variable_name IN "
                   "('Com_commit', 'Com_rollback', 'Threads_connected', 'Prepared_stmt_count', 'Uptime')")


# ---------------------------------------------------------------------------
# Plan


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


def _status(cur) -> dict[str, int]:
    cur.execute(STATUS_COUNTERS)
    return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in cur.fetchall()}


def preflight(spec, cfg: RunConfig) -> RunPlan:
    """Check the server and schema can take this run; refuse with the fix otherwise.  Changes nothing."""
    db = cfg.database
    conn = spec.with_database(None).connect()
    try:
        present = schema.present_tables(conn, db)
        complete = all(t in present for t in schema.TABLES)
        loaded = schema.warehouse_count(conn, db) if complete else 0
        if loaded == 0:
            raise WorkloadError(f"database {db!r} on {spec.describe()} holds no loaded TPC-C schema; "
                                f"load one first with `innotier tpcc load --warehouses N --database {db}`")
        warehouses = cfg.warehouses or loaded
        if warehouses > loaded:
            raise UsageError(f"--warehouses {warehouses} is more than the {loaded} loaded in {db!r}; "
                             f"give --warehouses {loaded} or less, or reload with `innotier tpcc load "
                             f"--warehouses {warehouses} --drop`")
        constants = schema.run_constants(conn, db)
        cur = conn.cursor()
        cur.execute(SELECT_LIMITS)
        max_connections, max_prepared = (int(v) for v in cur.fetchone())
        status = _status(cur)
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
        cur.execute("SELECT VERSION()")
        server = cur.fetchone()[0]
        cur.close()
    finally:
        conn.close()
    clients = cfg.shard.clients(cfg.clients) if cfg.shard else cfg.clients
    home = cfg.shard.warehouses(warehouses) if cfg.shard else None
    workers = cfg.workers or default_workers(clients)
    if workers < 1:
        raise UsageError(f"--workers {workers} is not valid; give 1 or more")
    workers = min(workers, clients)
    return RunPlan(database=db, mode=cfg.mode, clients=clients, warehouses=warehouses, loaded_warehouses=loaded,
                   workers=workers, clients_per_worker=[len(c) for c in client_split(clients, workers)],
                   shard=str(cfg.shard) if cfg.shard else None, home_warehouses=home, start_at=cfg.start_at,
                   warmup=cfg.warmup, duration=cfg.duration, interval=cfg.interval,
                   keying_and_think=cfg.keying_and_think, deck=cfg.deck, max_retries=cfg.max_retries,
                   outage_limit=cfg.outage_limit, max_connections=max_connections,
                   server=str(server), constants=constants.to_dict())


# ---------------------------------------------------------------------------
# Worker process


@dataclass
class WorkerTask:
    worker: int
    spec: Any  # ConnectionSpec (with database)
    mode: str
    clients: list[int]
    warehouses: int
    constants: RunConstants
    warmup: float
    duration: float
    interval: float
    keying_and_think: bool
    seed: int
    home_warehouses: tuple[int, int] | None = None  # a shard's own warehouses (None: all)
    deck: str = mix.DEFAULT_DECK
    max_retries: int = MAX_RETRIES
    outage_limit: float = OUTAGE_LIMIT


@dataclass
class _WorkerState:
    """What a worker's terminal threads share (guarded by ``lock``)."""

    m: Measurement
    lock: threading.Lock
    stop: threading.Event
    lost: list[str] = field(default_factory=list)  # set when the run must end: the server stayed away too long
    error_messages: Counter = field(default_factory=Counter)
    reconnects: int = 0
    down: int = 0  # terminals currently without a connection
    outages: list[list[float]] = field(default_factory=list)  # [wall start, wall end] while any terminal was down

    def record(self, op: str, seconds: float, outcome: str) -> None:
        with self.lock:
            self.m.record(op, seconds, outcome)

    def note_error(self, message: str) -> None:
        with self.lock:
            self.error_messages[message[:160]] += 1

    def disconnected(self) -> None:
        with self.lock:
            if self.down == 0:
                self.outages.append([time.time(), 0.0])
            self.down += 1

    def reconnected(self) -> None:
        with self.lock:
            self.down -= 1
            self.reconnects += 1
            if self.down == 0:
                self.outages[-1][1] = time.time()


def describe(exc: BaseException) -> str:
    errno = getattr(exc, "errno", None)
    msg = getattr(exc, "msg", None) or str(exc)
    return f"{errno} {msg}" if errno else msg


def execute(session: Session, mod, x, procedures: bool):
    """One attempt of one transaction; returns its output row (procedure result set or statements' tuple)."""
    if procedures:
        return session.call(mod.call_sql(x))
    return mod.run_statements(session, x)


def run_transaction(session: Session, mod, x, procedures: bool, max_retries: int,
                    record: Callable[[str, float, str], None], stop: threading.Event | None = None
                    ) -> tuple[str, str | None]:
    """Run one transaction to its end and record it; return (outcome, error message or None).

    Outcomes: commit, rollback (New-Order's unused item), error, or lost (the
    connection is gone; recorded as an error).  A deadlock or lock-wait timeout
    is retried with the same input up to ``max_retries`` times, each retry counted
    as it happens; when they run out the transaction is an error.  The latency
    recorded for the final outcome runs from the first attempt.
    """
    op = mod.OP
    perf = time.perf_counter
    t0 = perf()
    retries = 0
    while True:
        message = None
        try:
            execute(session, mod, x, procedures)
            outcome = "commit"
        except Rollback:
            outcome = "rollback"
        except Exception as exc:  # classified below; nothing is swallowed
            outcome = classify(exc)
            message = None if outcome == "rollback" else describe(exc)
            if outcome == "lost":
                record(op, perf() - t0, "error")
                return "lost", message
            if not procedures:
                try:
                    session.rollback()
                except Exception:  # the connection may be broken; the next statement will tell
                    pass
        if outcome != "retry":
            record(op, perf() - t0, outcome)
            return outcome, message
        if retries >= max_retries:
            record(op, perf() - t0, "error")
            return "error", f"retries exhausted ({retries}): {message}"
        retries += 1
        record(op, 0.0, "retry")
        if stop is not None and stop.is_set():
            return "abandoned", None  # the run ended while this one was being retried (after the window)


def _reconnect(task: WorkerTask, st: _WorkerState) -> Session | None:
    """A new session after the server went away, with backoff; None if the run must end."""
    st.disconnected()
    started = time.monotonic()
    delay = RECONNECT_FIRST_DELAY
    while not st.stop.is_set():
        try:
            session = Session(task.spec, autocommit=task.mode == "procedures")
        except Exception as exc:
            if classify(exc) != "lost":
                st.lost.append(f"reconnecting failed: {describe(exc)}")
                st.stop.set()
                return None
            if time.monotonic() - started > task.outage_limit:
                st.lost.append(f"the server stayed away for more than {task.outage_limit:g} s "
                               f"({describe(exc)})")
                st.stop.set()
                return None
            st.stop.wait(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)
            continue
        st.reconnected()
        return session
    return None


def _terminal_loop(task: WorkerTask, term, session: Session, st: _WorkerState) -> None:
    procedures = task.mode == "procedures"
    think = task.keying_and_think
    deck = mix.Deck(term.rng, mix.deck_mix(task.deck))
    stop = st.stop
    try:
        while not stop.is_set():
            op = deck.draw()
            mod = MODULES[op]
            x = mod.make_input(term)
            if think and stop.wait(mix.keying_seconds(op)):
                return
            outcome, message = run_transaction(session, mod, x, procedures, task.max_retries, st.record, stop)
            if message:
                st.note_error(message)
            if outcome == "lost":
                session.close()
                session = _reconnect(task, st)
                if session is None:
                    return
            if think and stop.wait(mix.think_seconds(op, term.rng)):
                return
    finally:
        if session is not None:
            session.close()


def _sleep_until(deadline: float, abort: Any, st: _WorkerState) -> None:
    """Sleep until the monotonic deadline, waking early if the parent aborts or the run must end."""
    while not (abort.is_set() or st.lost):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        st.stop.wait(min(left, 0.1))


def worker_main(task: WorkerTask, out: Any, go: Any, abort: Any, t0: Any) -> None:
    """Entry point of a worker process: connect, wait for go, run until the end tick, ship snapshots."""

    st = _WorkerState(m=Measurement(), lock=threading.Lock(), stop=threading.Event())
    sessions = []
    try:
        for c in task.clients:
            sessions.append(Session(task.spec, autocommit=task.mode == "procedures"))
    except Exception as exc:
        out.put(("failed", task.worker, f"{getattr(exc, 'msg', exc)}"))
        return
    out.put(("ready", task.worker, os.getpid()))
    while not go.wait(0.2):
        if abort.is_set():
            return
    start = t0.value
    threading.stack_size(THREAD_STACK_BYTES)
    if task.warmup <= 0:
        st.m.start_measuring()
    rng = random.Random(task.seed)
    threads = []
    for c, s in zip(task.clients, sessions):
        term = Terminal.for_client(c, task.warehouses, task.constants, seed=rng.randrange(1 << 62))
        if task.home_warehouses:
            term.w_id, term.d_id = home_of(c, *task.home_warehouses)
        th = threading.Thread(target=_terminal_loop, args=(task, term, s, st), daemon=True, name=f"terminal-{c}")
        threads.append(th)
    sessions.clear()  # each terminal thread owns (and closes) its session from here on
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    for th in threads:
        th.start()
    for k, (offset, kind) in enumerate(schedule(task.warmup, task.duration, task.interval)):
        _sleep_until(start + offset, abort, st)
        if abort.is_set() or st.lost:
            break
        with st.lock:
            if kind == "end":
                st.m.finish()
            snap = st.m.snapshot()
            if kind == "start":
                st.m.start_measuring()
        out.put(("tick", task.worker, k, snap))
        if kind == "end":
            break
    st.stop.set()
    for th in threads:  # let in-flight transactions finish first, so the final snapshot holds every attempt
        th.join(timeout=30)
    with st.lock:
        st.m.finish()
        final = st.m.snapshot()
    if st.lost:
        out.put(("lost", task.worker, st.lost[0], final))
        final = None  # the parent merges it from the "lost" message
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with st.lock:
        if st.outages and not st.outages[-1][1]:
            st.outages[-1][1] = time.time()  # still down at the end
        info = {"cpu_seconds": ru.ru_utime + ru.ru_stime, "max_rss_bytes": ru.ru_maxrss * 1024,
                "pid": os.getpid(), "final": final, "error_messages": dict(st.error_messages),
                "reconnects": st.reconnects, "outages": st.outages}
    out.put(("done", task.worker, info))


# ---------------------------------------------------------------------------
# Parent


@dataclass(frozen=True)
class ServerCounters:
    orders: int  # sum of D_NEXT_O_ID
    transactions: int  # Com_commit + Com_rollback
    uptime: int  # seconds since the server started
    read_at: float  # monotonic


def _server_counters(spec, db: str) -> ServerCounters | None:
    """The server-side counters NOPM and TPM come from, or None if the server cannot be reached."""
    try:
        conn = spec.with_database(None).connect()
    except Exception:
        return None
    try:
        cur = conn.cursor()
        cur.execute(SUM_NEXT_O_ID.format(db=db))
        orders = int(cur.fetchone()[0] or 0)
        st = _status(cur)
        cur.close()
        return ServerCounters(orders, st.get("Com_commit", 0) + st.get("Com_rollback", 0), st.get("Uptime", 0),
                              time.monotonic())
    except Exception:
        return None
    finally:
        try:
            conn.close()
        except Exception:
            pass


class _Run:
    """The parent's side of one run: start workers, merge their ticks, build the result."""

    def __init__(self, spec, cfg: RunConfig, plan: RunPlan, m: Measurement,
                 on_interval: Callable | None, on_tick: Callable | None) -> None:
        self.spec, self.cfg, self.plan, self.m = spec, cfg, plan, m
        self.on_interval, self.on_tick = on_interval, on_tick
        # fork, not spawn: spawn re-imports the caller's __main__ (a script without a main guard would
        # run again in every worker).  Everything a worker needs is imported before the fork.
        self.ctx = mp.get_context("fork")
        self.out = self.ctx.Queue()
        self.go, self.abort = self.ctx.Event(), self.ctx.Event()
        self.t0 = self.ctx.Value("d", 0.0, lock=False)
        self.procs: list[Any] = []
        self.failure: str | None = None
        self.worker_info: dict[int, dict] = {}

    def start_workers(self) -> None:
        rng = random.Random()
        constants = RunConstants(**self.plan.constants)
        for k, clients in enumerate(client_split(self.plan.clients, self.plan.workers)):
            task = WorkerTask(worker=k, spec=self.spec, mode=self.plan.mode, clients=clients,
                              warehouses=self.plan.warehouses, constants=constants, warmup=self.plan.warmup,
                              duration=self.plan.duration, interval=self.plan.interval,
                              keying_and_think=self.plan.keying_and_think, seed=rng.randrange(1 << 62),
                              home_warehouses=self.plan.home_warehouses,
                              deck=self.plan.deck, max_retries=self.plan.max_retries,
                              outage_limit=self.plan.outage_limit)
            p = self.ctx.Process(target=worker_main, args=(task, self.out, self.go, self.abort, self.t0),
                                 name=f"innotier-tpcc-worker-{k}", daemon=True)
            p.start()
            self.procs.append(p)

    def _get(self, timeout: float):
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            return None

    def _dead_worker(self) -> str | None:
        for k, p in enumerate(self.procs):
            if not p.is_alive() and k not in self.worker_info:
                return f"worker process {k} exited with code {p.exitcode}"
        return None

    def wait_ready(self) -> None:
        ready: set[int] = set()
        deadline = time.monotonic() + READY_TIMEOUT + 0.05 * self.plan.clients
        while len(ready) < len(self.procs):
            msg = self._get(0.5)
            if msg is None:
                dead = self._dead_worker()
                if dead or time.monotonic() > deadline:
                    self.abort.set()
                    raise WorkloadError(f"the TPC-C workers could not start ({dead or 'timed out connecting'}); "
                                        "check the server is up and accepts that many connections")
                continue
            if msg[0] == "failed":
                self.abort.set()
                raise ServerError(f"a TPC-C client could not connect to {self.spec.describe()}: {msg[2]}; "
                                  "check the server is running and accepts the connections")
            if msg[0] == "ready":
                ready.add(msg[1])

    def drive(self) -> RunResult:
        plan, m = self.plan, self.m
        sched = schedule(plan.warmup, plan.duration, plan.interval)
        delay = START_DELAY
        if plan.start_at is not None:  # a shard: every shard of the run starts at the same wall-clock time
            delay = plan.start_at - time.time()
            if delay < START_DELAY:
                raise WorkloadError(f"the shared start time passed {-delay:.1f} s before this shard was ready; "
                                    "give a later --start-at (more lead time for connecting)")
        wall0 = time.time() + delay
        self.t0.value = time.monotonic() + delay
        self.go.set()
        if plan.warmup <= 0:
            m.start_measuring()
            m.measure_started = wall0
        counters_start = _server_counters(self.spec, plan.database) if plan.warmup <= 0 else None
        pending: dict[int, dict[int, dict]] = {}
        n = len(self.procs)
        k_next = 0
        ended = False
        while not ended:
            msg = self._get(0.5)
            if msg is None:
                dead = self._dead_worker()
                if dead:
                    self.failure = dead
                    break
                limit = self.t0.value + (sched[k_next][0] if k_next < len(sched) else plan.warmup + plan.duration)
                if time.monotonic() > limit + 30:
                    self.failure = "the workers stopped reporting for 30 s"
                    break
                continue
            kind = msg[0]
            if kind == "tick":
                pending.setdefault(msg[2], {})[msg[1]] = msg[3]
            elif kind == "lost":
                self.failure = (f"the server went away during the run and did not come back: {msg[2]}; the result "
                                "holds the measurements up to that point")
                m.merge(msg[3], measured=m.phase == "measure")
                break
            elif kind == "done":
                self._done(msg)
            while k_next in pending and len(pending[k_next]) == n:
                offset, what = sched[k_next]
                measured = what not in ("warmup", "start")
                for snap in pending.pop(k_next).values():
                    m.merge(snap, measured=measured)
                if what == "start":
                    m.start_measuring()
                    m.measure_started = wall0 + plan.warmup
                    counters_start = _server_counters(self.spec, plan.database)
                elif what in ("interval", "end"):
                    point = m.close_interval()
                    if point is not None and self.on_interval:
                        self.on_interval(point)
                if self.on_tick:
                    self.on_tick(what, offset, m)
                k_next += 1
                if what == "end":
                    ended = True
                    break
        counters_end = _server_counters(self.spec, plan.database)
        self.abort.set()
        if self.failure and m.phase == "measure":
            point = m.close_interval()
            if point is not None and self.on_interval:
                self.on_interval(point)
        end_wall = time.time() if self.failure else wall0 + plan.warmup + plan.duration
        m.finish()
        if m.measure_started is not None:
            m.measure_ended = end_wall
        self.collect_done()
        return self.result(counters_start, counters_end)

    def collect_done(self) -> None:
        deadline = time.monotonic() + 60
        while len(self.worker_info) < len(self.procs) and time.monotonic() < deadline:
            msg = self._get(0.5)
            if msg is None:
                if all(not p.is_alive() for p in self.procs):
                    break
                continue
            if msg[0] == "done":
                self._done(msg)
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)

    def _done(self, msg) -> None:
        """A worker finished: keep its resource use, fold its last attempts into the cumulative counts."""
        info = dict(msg[2])
        final = info.pop("final", None)
        if final:
            self.m.merge(final, measured=False)
        self.worker_info[msg[1]] = info

    def result(self, start: ServerCounters | None, end: ServerCounters | None) -> RunResult:
        plan, m = self.plan, self.m
        secs = m.measured_seconds
        nopm = tpm = None
        notes = []
        if start and end and secs > 0:
            nopm = round((end.orders - start.orders) * 60.0 / secs, 1)
            if end.uptime + 2 >= start.uptime + (end.read_at - start.read_at):
                tpm = round((end.transactions - start.transactions) * 60.0 / secs, 1)
            else:
                notes.append("TPM unknown: the server restarted inside the window (its counters restarted at 0)")
        elif secs > 0:
            notes.append("NOPM and TPM unknown: the server could not be read at the start or end of the window")
        ru_self = resource.getrusage(resource.RUSAGE_SELF)
        worker_cpu = sum(w.get("cpu_seconds", 0.0) for w in self.worker_info.values())
        worker_rss = sum(w.get("max_rss_bytes", 0) for w in self.worker_info.values())
        extra = {
            "plan": plan.to_dict(),
            "server": plan.server,
            "workers": plan.workers,
            "client_cpu_seconds": round(worker_cpu, 3),
            "parent_cpu_seconds": round(ru_self.ru_utime + ru_self.ru_stime, 3),
            "client_rss_bytes": worker_rss,
            "parent_rss_bytes": ru_self.ru_maxrss * 1024,
            "labels": dict(self.cfg.labels),
            # exact, mergeable figures for shards (tuner.fleet.merge): the measured window's latency
            # histograms, every attempt from connect to disconnect, the server counters at the window's ends
            "histograms": {op: h.to_dict() for op, h in m.total.items() if h.count},
            "all_counts": {op: dict(v) for op, v in m.all_counts.items()},
            "server_counters": {"start": [start.orders, start.transactions] if start else None,
                                "end": [end.orders, end.transactions] if end else None},
            "measure_started": m.measure_started,
            "deck": mix.DECK_DESCRIPTIONS[plan.deck],
            "realized_mix": mix.realized_mix(m.counts),
            "new_order_lines": new_order.LINE_ORDER,
            "max_retries": plan.max_retries,
            "error_messages": self._error_messages(),
            "reconnects": sum(w.get("reconnects", 0) for w in self.worker_info.values()),
            "outages": self._outages(),
            "notes": notes,
        }
        if getattr(m, "interval_histograms", None) is not None:
            extra["interval_histograms"] = m.interval_histograms
        if plan.shard:
            extra["shard"] = plan.shard
            extra["home_warehouses"] = list(plan.home_warehouses or ())
            extra["start_at"] = plan.start_at
        return RunResult.from_measurement(
            m, driver="builtin", mode=plan.mode, warehouses=plan.warehouses, clients=plan.clients,
            warmup_seconds=plan.warmup, nopm=nopm, tpm=tpm, complete=self.failure is None,
            failure=self.failure, extra=extra)

    def _error_messages(self) -> dict[str, int]:
        total: Counter = Counter()
        for w in self.worker_info.values():
            total.update(w.get("error_messages", {}))
        return dict(total.most_common(20))

    def _outages(self) -> list[dict[str, float]]:
        """The windows (wall clock) in which at least one terminal had no connection, merged across workers."""
        spans = sorted(tuple(o) for w in self.worker_info.values() for o in w.get("outages", []))
        merged: list[list[float]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return [{"start": round(a, 3), "end": round(b, 3), "seconds": round(b - a, 3)} for a, b in merged]

    def stop(self) -> None:
        self.abort.set()
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


def run(spec, cfg: RunConfig, measurement: Measurement | None = None,
        on_interval: Callable | None = None, *, on_tick: Callable | None = None,
        on_plan: Callable[[RunPlan], None] | None = None) -> RunResult:
    """Run the built-in driver; return the result (``complete=False`` with ``failure`` if the server went away).

    ``on_interval(point)`` is called with each closed IntervalPoint; ``on_tick(kind,
    offset, measurement)`` after each merged tick (warm-up included), for live progress.
    """
    cfg.validate()
    spec = spec.with_database(cfg.database)
    plan = preflight(spec, cfg)
    if on_plan:
        on_plan(plan)
    if plan.mode == "procedures":
        conn = spec.connect()
        try:
            tries = 3 if cfg.shard else 1  # the shards of one fleet run may install at the same moment
            for attempt in range(tries):
                try:
                    procedures.install(conn, plan.database)
                    break
                except ServerError:
                    if attempt == tries - 1:
                        raise
                    time.sleep(0.5 + random.random())
        finally:
            conn.close()
    m = measurement or Measurement()
    r = _Run(spec, cfg, plan, m, on_interval, on_tick)
    try:
        r.start_workers()
        r.wait_ready()
        return r.drive()
    finally:
        r.stop()

