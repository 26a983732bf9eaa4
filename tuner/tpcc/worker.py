"""A driver worker process: many terminal threads on one Measurement, shipping a snapshot at each tick.

A worker ends with its parent: the kernel sends it SIGKILL when the parent dies (PR_SET_PDEATHSIG), and
it checks the parent is still its parent wherever it waits, for a parent that died before that was set.
It leaves SIGTERM to the parent, which stops the run and so the worker.
"""

from __future__ import annotations

import ctypes
import os
import random
import resource
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tuner.core.measure import Measurement
from tuner.tpcc import mix
from tuner.tpcc.run_plan import schedule
from tuner.tpcc.session import Session, classify
from tuner.tpcc.shard import home_of
from tuner.tpcc.terminal import RunConstants, Terminal
from tuner.tpcc.transaction import MAX_RETRIES, MODULES, describe, run_transaction
from tuner.tpcc.worker_messages import Done, Failed, Lost, Ready, Tick

OUTAGE_LIMIT = 60.0  # seconds the server may stay away before the run ends with a failure
RECONNECT_FIRST_DELAY = 0.05  # seconds; doubled after each failed reconnect attempt ...
RECONNECT_MAX_DELAY = 1.0  # ... up to this
THREAD_STACK_BYTES = 512 * 1024  # terminal threads are shallow; 512 threads x 8 MiB default would be 4 GiB of VM
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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
    parent_pid: int = 0  # the driver process; the worker ends when it is gone


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
    delivery_skipped_districts: int = 0  # clause 2.7.4.2: counted here, from what each Delivery returns

    def record(self, op: str, seconds: float, outcome: str) -> None:
        with self.lock:
            self.m.record(op, seconds, outcome)

    def committed(self, op: str, output) -> None:
        if op == "delivery" and output:
            with self.lock:
                self.delivery_skipped_districts += output

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


def end_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent dies; exit now if the parent is already gone."""
    # A SIGTERM sent to the whole group (`timeout`, a service manager's stop) is the parent's to handle: it
    # stops the run and the workers end with their final snapshot; the parent's handler, inherited through
    # fork, must not run here.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if not parent_alive(parent_pid):
        os._exit(1)


def parent_alive(parent_pid: int) -> bool:
    """False once the parent is gone (this process was re-parented)."""
    return os.getppid() == parent_pid


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
            outcome, message = run_transaction(session, mod, x, procedures, task.max_retries, st.record, stop,
                                               st.committed)
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


def _must_end(task: WorkerTask, abort: Any, st: _WorkerState) -> bool:
    return abort.is_set() or bool(st.lost) or not parent_alive(task.parent_pid)


def _sleep_until(deadline: float, task: WorkerTask, abort: Any, st: _WorkerState) -> None:
    """Sleep until the monotonic deadline, waking early if the parent aborts or is gone, or the run must end."""
    while not _must_end(task, abort, st):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        st.stop.wait(min(left, 0.1))


def _connect_all(task: WorkerTask, out: Any) -> list[Session] | None:
    sessions = []
    try:
        for _ in task.clients:
            sessions.append(Session(task.spec, autocommit=task.mode == "procedures"))
    except Exception as exc:
        for s in sessions:
            s.close()
        out.put(Failed(task.worker, f"{getattr(exc, 'msg', exc)}"))
        return None
    return sessions


def _wait_for_go(task: WorkerTask, go: Any, abort: Any) -> bool:
    while not go.wait(0.2):
        if abort.is_set() or not parent_alive(task.parent_pid):
            return False
    return True


def _terminal_threads(task: WorkerTask, sessions: list[Session], st: _WorkerState) -> list[threading.Thread]:
    threading.stack_size(THREAD_STACK_BYTES)
    rng = random.Random(task.seed)
    threads = []
    for c, s in zip(task.clients, sessions):
        term = Terminal.for_client(c, task.warehouses, task.constants, seed=rng.randrange(1 << 62))
        if task.home_warehouses:
            term.w_id, term.d_id = home_of(c, *task.home_warehouses)
        threads.append(threading.Thread(target=_terminal_loop, args=(task, term, s, st), daemon=True,
                                        name=f"terminal-{c}"))
    return threads


def _ship_ticks(task: WorkerTask, start: float, out: Any, abort: Any, st: _WorkerState) -> None:
    for k, (offset, kind) in enumerate(schedule(task.warmup, task.duration, task.interval)):
        _sleep_until(start + offset, task, abort, st)
        if _must_end(task, abort, st):
            break
        with st.lock:
            if kind == "end":
                st.m.finish()
            snap = st.m.snapshot()
            if kind == "start":
                st.m.start_measuring()
        out.put(Tick(task.worker, k, snap))
        if kind == "end":
            break


def _report_end(task: WorkerTask, out: Any, st: _WorkerState) -> None:
    with st.lock:
        st.m.finish()
        final = st.m.snapshot()
    if st.lost:
        out.put(Lost(task.worker, st.lost[0], final))
        final = None  # the parent merges it from the Lost message
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with st.lock:
        if st.outages and not st.outages[-1][1]:
            st.outages[-1][1] = time.time()  # still down at the end
        info = {"cpu_seconds": ru.ru_utime + ru.ru_stime, "max_rss_bytes": ru.ru_maxrss * 1024,
                "pid": os.getpid(), "final": final, "error_messages": dict(st.error_messages),
                "reconnects": st.reconnects, "outages": st.outages,
                "delivery_skipped_districts": st.delivery_skipped_districts}
    out.put(Done(task.worker, info))


def worker_main(task: WorkerTask, out: Any, go: Any, abort: Any, t0: Any) -> None:
    """Entry point of a worker process: connect, wait for go, run until the end tick, ship snapshots."""
    end_with_parent(task.parent_pid)
    st = _WorkerState(m=Measurement(), lock=threading.Lock(), stop=threading.Event())
    sessions = _connect_all(task, out)
    if sessions is None:
        return
    out.put(Ready(task.worker, os.getpid()))
    if not _wait_for_go(task, go, abort):
        return
    start = t0.value
    if task.warmup <= 0:
        st.m.start_measuring()
    threads = _terminal_threads(task, sessions, st)
    sessions.clear()  # each terminal thread owns (and closes) its session from here on
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    for th in threads:
        th.start()
    _ship_ticks(task, start, out, abort, st)
    st.stop.set()
    for th in threads:  # let in-flight transactions finish first, so the final snapshot holds every attempt
        th.join(timeout=30)
    if parent_alive(task.parent_pid):
        _report_end(task, out, st)
