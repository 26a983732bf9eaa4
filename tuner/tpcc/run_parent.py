"""The parent's side of a built-in TPC-C run: start the worker processes, wait until they are ready, merge
their ticks into the one Measurement on a shared clock, collect what they report at the end."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import random
import time
from typing import Any, Callable

from tuner.core.errors import ServerError, WorkloadError
from tuner.core.measure import Measurement, RunResult
from tuner.tpcc.config import RunConfig
from tuner.tpcc.run_plan import RunPlan, client_split, schedule
from tuner.tpcc.run_result import ServerCounters, build_result, server_counters
from tuner.tpcc.terminal import RunConstants
from tuner.tpcc.worker import WorkerTask, worker_main
from tuner.tpcc.worker_messages import Done, Failed, Lost, Ready, Tick

READY_TIMEOUT = 120.0  # seconds for all workers to connect their terminals
START_DELAY = 0.3  # seconds between "go" and t0, so every worker sees t0 in the future
SILENCE_LIMIT = 30.0  # seconds the workers may stay silent past a tick before the run is given up


class RunParent:
    """Start workers, merge their ticks, build the result."""

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
        self.stopped_by: str | None = None  # set by a signal handler: end the run now, keep what was measured
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
                              outage_limit=self.plan.outage_limit, parent_pid=os.getpid())
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
            if self.stopped_by:
                raise WorkloadError(f"the run was stopped by {self.stopped_by} before it started")
            msg = self._get(0.5)
            if msg is None:
                dead = self._dead_worker()
                if dead or time.monotonic() > deadline:
                    self.abort.set()
                    raise WorkloadError(f"the TPC-C workers could not start ({dead or 'timed out connecting'}); "
                                        "check the server is up and accepts that many connections")
            elif isinstance(msg, Failed):
                self.abort.set()
                raise ServerError(f"a TPC-C client could not connect to {self.spec.describe()}: {msg.message}; "
                                  "check the server is running and accepts the connections")
            elif isinstance(msg, Ready):
                ready.add(msg.worker)

    def _go(self) -> float:
        """Tell the workers when t0 is; return t0 on the wall clock."""
        delay = START_DELAY
        if self.plan.start_at is not None:  # a shard: every shard of the run starts at the same wall-clock time
            delay = self.plan.start_at - time.time()
            if delay < START_DELAY:
                raise WorkloadError(f"the shared start time passed {-delay:.1f} s before this shard was ready; "
                                    "give a later --start-at (more lead time for connecting)")
        wall0 = time.time() + delay
        self.t0.value = time.monotonic() + delay
        self.go.set()
        return wall0

    def _silent_failure(self, limit: float) -> str | None:
        """Why the run must end while no message comes, or None to go on waiting."""
        dead = self._dead_worker()
        if dead:
            return dead
        if time.monotonic() > limit + SILENCE_LIMIT:
            return f"the workers stopped reporting for {SILENCE_LIMIT:g} s"
        return None

    def drive(self) -> RunResult:
        plan, m = self.plan, self.m
        sched = schedule(plan.warmup, plan.duration, plan.interval)
        wall0 = self._go()
        counters_start = None
        if plan.warmup <= 0:
            m.start_measuring()
            m.measure_started = wall0
            counters_start = server_counters(self.spec, plan.database)
        pending: dict[int, dict[int, dict]] = {}
        k_next = 0
        while k_next < len(sched):
            if self.stopped_by:
                self.failure = (f"the run was stopped by {self.stopped_by}; the result holds the measurements "
                                "up to that point")
                break
            msg = self._get(0.5)
            if msg is None and self.stopped_by:
                continue  # said at the top of the loop, whatever else a group-wide signal did
            if msg is None:
                limit = self.t0.value + sched[k_next][0]
                self.failure = self._silent_failure(limit)
                if self.failure:
                    break
                continue
            if isinstance(msg, Tick):
                pending.setdefault(msg.index, {})[msg.worker] = msg.snapshot
            elif isinstance(msg, Lost):
                self.failure = (f"the server went away during the run and did not come back: {msg.reason}; "
                                "the result holds the measurements up to that point")
                m.merge(msg.snapshot, measured=m.phase == "measure")
                break
            elif isinstance(msg, Done):
                self._done(msg)
            k_next, counters_start = self._merge_complete_ticks(sched, pending, k_next, wall0, counters_start)
        return self._finish(wall0, counters_start)

    def _merge_complete_ticks(self, sched, pending, k_next: int, wall0: float,
                              counters_start: ServerCounters | None) -> tuple[int, ServerCounters | None]:
        """Merge every schedule point all workers have reported, in order; return the next one and the
        server counters at the start of the measured window."""
        m, n = self.m, len(self.procs)
        while k_next < len(sched) and k_next in pending and len(pending[k_next]) == n:
            offset, what = sched[k_next]
            measured = what not in ("warmup", "start")
            for snap in pending.pop(k_next).values():
                m.merge(snap, measured=measured)
            if what == "start":
                m.start_measuring()
                m.measure_started = wall0 + self.plan.warmup
                counters_start = server_counters(self.spec, self.plan.database)
            elif what in ("interval", "end"):
                self._close_interval()
            if self.on_tick:
                self.on_tick(what, offset, m)
            k_next += 1
        return k_next, counters_start

    def _close_interval(self) -> None:
        point = self.m.close_interval()
        if point is not None and self.on_interval:
            self.on_interval(point)

    def _finish(self, wall0: float, counters_start: ServerCounters | None) -> RunResult:
        plan, m = self.plan, self.m
        counters_end = server_counters(self.spec, plan.database)
        self.abort.set()
        if self.failure and m.phase == "measure":
            self._close_interval()
        end_wall = time.time() if self.failure else wall0 + plan.warmup + plan.duration
        m.finish()
        if m.measure_started is not None:
            m.measure_ended = end_wall
        self.collect_done()
        return build_result(plan, self.cfg, m, self.worker_info, counters_start, counters_end, self.failure)

    def collect_done(self) -> None:
        deadline = time.monotonic() + 60
        while len(self.worker_info) < len(self.procs) and time.monotonic() < deadline:
            msg = self._get(0.5)
            if msg is None:
                if all(not p.is_alive() for p in self.procs):
                    break
                continue
            if isinstance(msg, Done):
                self._done(msg)
        self.stop()

    def _done(self, msg: Done) -> None:
        """A worker finished: keep its resource use, fold its last attempts into the cumulative counts."""
        info = dict(msg.info)
        final = info.pop("final", None)
        if final:
            self.m.merge(final, measured=False)
        self.worker_info[msg.worker] = info

    def stop(self) -> None:
        self.abort.set()
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
