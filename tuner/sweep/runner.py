"""Running a sweep plan: cell by cell, resumable, observable.

For each cell run: clone the golden copy onto the cell's datadir tier, place the other components,
apply the cell's profile, start, warm up and measure with the TPC-C driver, run the consistency
checks, collect what reproduces the cell (server variables, option files, tier facts,
pt-mysql-summary), stop, and record everything in the results store in **one transaction**.

Resume: a cell is finished when its row is committed (SQLite WAL, synchronous=FULL).  Running the
same spec again (same content -> same run id) skips finished cells; a cell interrupted at any point
(even by SIGKILL) has no row and runs again from scratch: whatever it left behind (a server still
running, a half-made clone) is removed first.  One runner per run id at a time (a lockf record lock).

While it runs the exporter (exporters.live) serves the TPC-C metrics of the current cell, the
server's InnoDB counters and the sweep's progress on one endpoint for the whole sweep.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner import __version__
from tuner.core.probe import read_meminfo
from tuner.core.units import format_duration
from tuner.core.errors import InnotierError, SweepError
from tuner.core.paths import innotier_home
from tuner.core.sandbox import ServerBinaries, find_binaries
from tuner.core.server import ConnectionSpec, fetch_variables
from tuner.sweep import golden as golden_mod
from tuner.sweep import noise as noise_mod
from tuner.sweep.evidence import EvidenceWindow
from tuner.sweep import stoprule
from tuner.sweep.analysis import configs_from, family_target, questions
from tuner.sweep.placement import TierSession, _tier_facts, cell_dir, clear_cell_dirs, place_components
from tuner.sweep.plan import Cell, Plan, cell_seconds, golden_seconds
from tuner.sweep.results import CellRecord, ResultsStore
from tuner.sweep.spec import placed_tables, placement_label
from tuner.sweep import table_placement
from tuner.sweep.tier_bench import bench_tiers
from tuner.core.measure import Measurement
from tuner.sweep.profile_bridge import apply_cell_profile
from tuner.tpcc.check import run_checks
from tuner.tpcc.config import RunConfig
from tuner.tpcc import driver as tpcc_driver
from tuner.tpcc import adapters
from tuner.core.cliutil import to_jsonable
from tuner.core.phases import SweepPhase

SQL_VERSION = "SELECT VERSION()"


@dataclass
class RunnerOptions:
    results: str | None = None  # results database path (default $INNOTIER_HOME/results.db)
    listen: str | None = "127.0.0.1:9623"  # exporter address; None: no exporter
    pt_summary: bool = True  # store pt-mysql-summary output when percona-toolkit is installed
    echo: Callable[[str], None] = print
    live: bool | None = None  # rich live progress (default: when stdout is a terminal)
    wait_quiet: float | None = None  # wait up to this many seconds for a quiet machine before each window
    noise_threshold: float = noise_mod.DEFAULT_THRESHOLD  # others' CPU share above which a run is flagged
    probe: bool = True  # calibration probe (CPU loop, fsync loop on the cell's datadir) before each window


@dataclass
class RunSummary:
    run_id: str
    total: int
    skipped_finished: int
    ran: int
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    metrics_url: str | None = None
    results: str = ""
    stop: dict[str, Any] | None = None  # why the run stopped (adaptive runs), with the blocks used


# ---------------------------------------------------------------------------
# Progress


class Progress:
    """Cell i of n, the current phase and the time left: a rich live line on a terminal, else plain lines."""

    def __init__(self, total: int, echo: Callable[[str], None], live: bool) -> None:
        self.total = total
        self.echo = echo
        self.i = 0
        self.label = ""
        self.phase: SweepPhase | None = None
        self.left = 0.0
        self._live = None
        self._progress = None
        self._task = None
        if live:
            from rich.progress import BarColumn, Progress as RichProgress, TextColumn

            self._progress = RichProgress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[left]}"),
                                          transient=False)
            self._task = self._progress.add_task("", total=total, left="")
            self._progress.start()

    def update(self, i: int, label: str, phase: SweepPhase, seconds_left: float, completed: int | None = None) -> None:
        changed = (i, label, phase) != (self.i, self.label, self.phase)
        self.i, self.label, self.phase, self.left = i, label, phase, seconds_left
        text = f"cell {i}/{self.total} {label}: {phase}"
        left = f"about {format_duration(seconds_left)} left"
        if self._progress is not None:
            self._progress.update(self._task, description=text, left=left,
                                  completed=completed if completed is not None else max(i - 1, 0))
        elif changed:
            self.echo(f"[{i}/{self.total}] {label}: {phase} ({left})")

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


# ---------------------------------------------------------------------------
# The runner


class _RunLock:
    """A POSIX record lock (lockf) on the run's lock file: held by this process only, so forked children
    (the driver's workers) do not keep it after a SIGKILL of the runner, unlike flock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> "_RunLock":
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = Path(self.path).read_text().strip() or "?"
            os.close(self.fd)
            raise SweepError(f"another runner (pid {other}) is running this sweep now; wait for it or stop it "
                             "first") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()}\n".encode())
        return self

    def __exit__(self, *exc: Any) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def sandbox_name_for(plan: Plan) -> str:
    """One sandbox name for every cell of a run (cells run one at a time): a stable exporter label."""
    return f"sweep-{plan.spec.digest[:10]}"


class Runner:
    def __init__(self, plan: Plan, options: RunnerOptions | None = None) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.opts = options or RunnerOptions()
        self.echo = self.opts.echo
        self.sandbox_name = sandbox_name_for(plan)
        # the binaries of every server a cell uses (a `server` axis makes several)
        self.binaries = dict(plan.binaries) or {None: ServerBinaries(
            mysqld=plan.mysqld, install_db=_install_db(plan), flavor=plan.flavor, version=plan.version,
            version_string=plan.version_string, basedir=self.spec.basedir)}
        # the exporter's view of the server under test: updated in place for each cell
        self.server_spec = ConnectionSpec(socket=None, host="127.0.0.1", port=1, user="root",
                                          database=golden_mod.TPCC_DATABASE, sandbox=self.sandbox_name)
        self.exporter = None
        self.measured: list[float] = []  # seconds of finished cells (for time left)
        self.spent_before = 0.0  # seconds of cell runs recorded by earlier invocations of this run
        self.done = 0  # finished cell runs of this run (for the exporter's progress)
        self.environment = environment(plan)
        self.target = family_target(self.spec.target(), self.spec.axes, self.spec.exclude, self.spec.fixed)  # the family size shares the error

    # -- top level -----------------------------------------------------------

    def run(self) -> RunSummary:
        if self.plan.refusal:
            raise SweepError(f"sweep {self.spec.name} cannot run on this machine: {self.plan.refusal}")
        t0 = time.monotonic()
        run_dir = innotier_home() / "sweeps" / self.plan.run_id
        with _RunLock(run_dir / "runner.lock"):
            store = ResultsStore(self.opts.results)
            try:
                return self._run(store, t0)
            finally:
                store.close()

    def _run(self, store: ResultsStore, t0: float) -> RunSummary:
        plan = self.plan
        stored = store.run_design(plan.run_id)
        if self.spec.adaptive:
            stoprule.check_unchanged(self.spec.stop, (stored or {}).get("stop"), plan.run_id)
        store.begin_run(plan.run_id, self.spec.name, self.spec.digest, self.spec.text, self.spec.canonical(),
                        plan.to_dict(), len(plan.cells), self.environment, self.spec.design(self.target))
        if self.spec.adaptive:
            store.set_budget(plan.run_id, self.spec.stop.budget)
        finished = store.finished_cell_ids(plan.run_id)
        todo = [c for c in plan.cells if c.cell_id not in finished]
        self.spent_before = self._spent(store)
        self.done = len(plan.cells) - len(todo)
        summary = RunSummary(plan.run_id, len(plan.cells), len(plan.cells) - len(todo), 0, results=str(store.path))
        if finished:
            self.echo(f"resuming run {plan.run_id}: {len(plan.cells) - len(todo)} of {len(plan.cells)} cells are "
                      "already finished and will not run again")
        for c, reason in plan.skipped:
            if c.repeat == 1:
                self.echo(f"skipping {c.label}: {reason}")
        if not todo:
            store.finish_run(plan.run_id, self._stop_record(store, "all blocks ran"))
            self.echo(f"run {plan.run_id} is complete; nothing to do")
            return summary
        if self._stop_before(store, todo[0], summary):
            self.echo(f"run {plan.run_id} is complete after block {summary.stop['blocks']} "
                      f"({summary.stop['reason']}); nothing to do")
            return summary
        tiers = TierSession(plan.run_id, self.spec.tiers, echo=self.echo)
        progress = Progress(len(plan.cells), self.echo, self._live())
        try:
            tiers.open(sorted({t for c in todo for t in c.tiers_used}))
            self._start_exporter(summary)
            for i, c in enumerate(todo):
                if i and self._stop_before(store, c, summary):
                    self.echo(f"stopping after block {summary.stop['blocks']}: {summary.stop['reason']}")
                    break
                self._record(store, c, self._run_cell(c, tiers, progress, todo), summary)
            if summary.stop is None and len(store.finished_cell_ids(plan.run_id)) == len(plan.cells):
                if self.spec.adaptive:  # the last look: no block follows to print it before
                    self._echo_verdicts(store, self._complete_blocks(store))
                summary.stop = self._stop_record(store, "all blocks ran" if not self.spec.adaptive else
                                                 f"max_blocks ({self.spec.repeats}) reached")
                store.finish_run(plan.run_id, summary.stop)
        finally:
            progress.close()
            self._stop_exporter()
            golden_mod.discard_cell_sandbox(self.sandbox_name)
            for problem in tiers.close():
                self.echo(f"warning: {problem}")
        summary.seconds = time.monotonic() - t0
        return summary

    def _stop_before(self, store: ResultsStore, cell: Cell, summary: RunSummary) -> bool:
        """At the start of a block of an adaptive run: ask the stop rule; record the stop when it says so."""
        if not self.spec.adaptive or not self._block_start(store, cell):
            return False
        stop = self._should_stop(store)
        if stop is None:
            return False
        summary.stop = stop
        store.finish_run(self.plan.run_id, stop)
        return True

    def _record(self, store: ResultsStore, c: Cell, rec: CellRecord, summary: RunSummary) -> None:
        store.record_cell(rec)
        self.done += rec.status == "ok"
        if self.exporter is not None:
            self.exporter.set_progress(self.done, len(self.plan.cells), SweepPhase.BETWEEN_CELLS)
        summary.ran += 1
        if rec.status != "ok":
            summary.failed.append(f"{c.label} (repeat {c.repeat}): {rec.failure}")
            self.echo(f"cell {c.index}/{len(self.plan.cells)} {c.label} failed: {rec.failure}")
            return
        w = (rec.noise or {}).get("window") or {}
        flag = f"; NOISY: {w['flag_reason']}" if w.get("flagged") else (
            f"; others used {w['others_cpu_share'] * 100:.0f}% of the CPU" if w else "")
        self.echo(f"cell {c.index}/{len(self.plan.cells)} {c.label} (block {c.repeat}): "
                  f"tpmC {rec.tpmc:,.0f}, checks {'passed' if rec.check_ok else 'FAILED'}{flag}")

    # -- blocks and the stop rule ---------------------------------------------

    def _block_start(self, store: ResultsStore, cell: Cell) -> bool:
        """True when ``cell`` is the first of its block to run (no cell of the block is finished yet)."""
        done = store.finished_cell_ids(self.plan.run_id)
        return not any(c.cell_id in done for c in self.plan.cells if c.repeat == cell.repeat)

    def _verdicts(self, store: ResultsStore):
        cells = [c for c in store.cells(self.plan.run_id) if c.status == "ok"]
        return questions(configs_from(cells, self.spec.axes), self.spec.axes, self.target, self.spec.exclude,
                         self.spec.fixed)

    def _complete_blocks(self, store: ResultsStore) -> int:
        done = store.finished_cell_ids(self.plan.run_id)
        blocks = sorted({c.repeat for c in self.plan.cells})
        return sum(all(c.cell_id in done for c in self.plan.cells if c.repeat == b) for b in blocks)

    def _stop_record(self, store: ResultsStore, reason: str) -> dict[str, Any]:
        verdicts = self._verdicts(store)
        return {"reason": reason, "blocks": self._complete_blocks(store), "seconds": round(self._spent(store), 1),
                "decided": sum(v.decided for v in verdicts), "comparisons": len(verdicts),
                "undecided": [v.text() for v in verdicts if not v.decided]}

    def _spent(self, store: ResultsStore) -> float:
        """Seconds spent on cell runs so far (all invocations; one-time golden loads left out)."""
        return sum(c.finished_at - c.started_at - (c.phases or {}).get("golden", 0.0)
                   for c in store.cells(self.plan.run_id))

    def _should_stop(self, store: ResultsStore) -> dict[str, Any] | None:
        """Before a block: the stop rule's decision on the blocks so far; prints what is still undecided."""
        blocks = self._complete_blocks(store)
        if blocks == 0:
            return None
        verdicts = self._echo_verdicts(store, blocks)
        d = stoprule.decide(self.spec.stop, blocks, self._spent(store), verdicts)
        return self._stop_record(store, d.reason) if d.stop else None

    def _echo_verdicts(self, store: ResultsStore, blocks: int) -> list:
        """Every comparison after ``blocks`` blocks, decided ones too: the look that decides is the one a planner
        acts on."""
        verdicts = self._verdicts(store)
        undecided = [v for v in verdicts if not v.decided]
        self.echo(f"after block {blocks}: {len(verdicts) - len(undecided)} of {len(verdicts)} comparisons decided")
        for v in verdicts:
            label = "decided" if v.decided else "undecided"
            self.echo(f"  {label}: {v.text()}" + (f" ({v.quiet_text()})" if v.quiet else ""))
        return verdicts

    def _live(self) -> bool:
        if self.opts.live is not None:
            return self.opts.live
        return sys.stdout.isatty()

    # -- exporter ------------------------------------------------------------

    def _start_exporter(self, summary: RunSummary) -> None:
        from exporters.live import start_live_exporter  # deferred: prometheus_client, ~40 ms of start-up
        if not self.opts.listen:
            return

        info = {"sweep": self.spec.name, "driver": self.spec.workload.driver, "mode": self.spec.workload.mode,
                "warehouses": self.spec.workload.warehouses, "flavor": self.plan.flavor.value,
                "version": str(self.plan.version)}
        try:
            self.exporter = start_live_exporter(Measurement(), self.opts.listen, info, self.server_spec)
        except InnotierError as exc:
            if self.opts.listen.endswith(":0"):
                raise
            host = self.opts.listen.rsplit(":", 1)[0]
            self.echo(f"metrics: {exc}; using a free port instead")
            self.exporter = start_live_exporter(Measurement(), f"{host}:0", info, self.server_spec)
        summary.metrics_url = self.exporter.url
        self.echo(f"metrics: {self.exporter.url} (Prometheus scrape target while the sweep runs)")

    def _stop_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None

    # -- time left -----------------------------------------------------------

    def _seconds_left(self, cell: Cell, todo: list[Cell], cell_elapsed: float) -> float:
        per_cell = (sum(self.measured) / len(self.measured)) if self.measured else cell_seconds(
            self.spec, self.plan.datadir_bytes)
        remaining = [c for c in todo if c.index > cell.index]
        missing_goldens = {golden_mod.key_for(self.spec, c, self._bins(c)) for c in remaining}
        extra = sum(golden_seconds(self.spec, self.plan.datadir_bytes) for k in missing_goldens
                    if not golden_mod.is_present(k))
        budget_left = (self.spec.stop.budget - self.spent_before - sum(self.measured)) if self.spec.adaptive else None
        return stoprule.seconds_left(per_cell, len(remaining), cell_elapsed, budget_left, extra)

    # -- one cell: prepare, measure, check and collect ------------------------

    def _run_cell(self, cell: Cell, tiers: TierSession, progress: Progress, todo: list[Cell]) -> CellRecord:
        label = f"{cell.label} r{cell.repeat}"

        def show(phase: SweepPhase) -> None:
            progress.update(cell.index, label, phase, self._seconds_left(cell, todo, clock.elapsed()))
            if self.exporter is not None:
                self.exporter.set_progress(self.done, len(self.plan.cells), phase)

        clock = PhaseClock(show)
        rec = CellRecord(run_id=self.plan.run_id, cell_id=cell.cell_id, idx=cell.index, config_key=cell.config_key,
                         repeat=cell.repeat, label=cell.label, settings=cell.settings, status="ok",
                         started_at=time.time(), finished_at=time.time(), environment=self.environment)
        noise: dict[str, Any] = {}
        try:
            sb = self._prepare(cell, tiers, clock, rec, noise)
            self._measure(sb, cell, clock, rec, noise, tiers)
            self._check_and_collect(sb, clock, rec)
        except Exception as exc:  # any failure of a cell fails that cell; the sweep goes on
            rec.status, rec.failure = "failed", str(exc) if isinstance(exc, InnotierError) else (
                f"{type(exc).__name__}: {exc}")
        except BaseException:
            self._cleanup_cell(tiers)
            raise
        clock.enter(SweepPhase.RECORD)
        self._cleanup_cell(tiers)
        rec.phases = clock.close()
        rec.noise = noise or None
        rec.finished_at = time.time()
        if rec.status == "ok":
            self.measured.append(clock.elapsed() - rec.phases.get(SweepPhase.GOLDEN, 0.0))
        return rec

    def _prepare(self, cell: Cell, tiers: TierSession, clock: "PhaseClock", rec: CellRecord,
                 noise: dict[str, Any]):
        """From nothing to a configured sandbox of the cell (not started)."""
        clock.enter(SweepPhase.PREPARE)
        golden_mod.discard_cell_sandbox(self.sandbox_name)  # an earlier, interrupted attempt
        clear_cell_dirs(tiers, self.sandbox_name)
        tiers.open_cell(list(cell.tiers_used))  # md, pmem: this cell's own array or file system
        bench = None
        if self.spec.tier_bench:
            clock.enter(SweepPhase.TIER_BENCH)
            bench = bench_tiers(tiers, list(cell.tiers_used), self.spec.tier_bench)
        bins = self._bins(cell)
        key = golden_mod.key_for(self.spec, cell, bins)
        if not golden_mod.is_present(key):
            clock.enter(SweepPhase.GOLDEN)
        rec.golden = golden_mod.ensure(key, bins, progress=lambda m: self.echo(m))
        clock.enter(SweepPhase.CLONE)
        datadir = cell_dir(tiers, cell.datadir_tier, self.sandbox_name) / "data"
        rec.golden = {**rec.golden, "clone": golden_mod.clone(key, datadir)}
        if self.opts.probe:
            noise["probe"] = noise_mod.probe(datadir)
        sb = golden_mod.adopt_sandbox(self.sandbox_name, key, datadir, bins)
        clock.enter(SweepPhase.PLACE)
        placed = place_components(sb, cell.placement, tiers, cell.settings.get("options"))
        # the directories its tables go in once it runs: MySQL reads innodb_directories only at its start
        table_dirs = table_placement.prepare_directories(sb, self._table_dirs(cell, tiers))
        clock.enter(SweepPhase.CONFIGURE)
        apply_cell_profile(sb, self.spec, cell)
        rec.option_file = option_files_text(sb)
        rec.tiers = {"placement": cell.placement, "placed": placed,
                     "facts": {t: tiers.facts(t) for t in cell.tiers_used}, "datadir": _tier_facts(sb.datadir)}
        if table_dirs:
            rec.tiers["innodb_directories"] = table_dirs
        if bench is not None:
            rec.tiers["bench"] = bench
        return sb

    def _table_dirs(self, cell: Cell, tiers: TierSession) -> dict[str, Path]:
        """The cell's tables placed off the datadir's tier -> the directory they go in on their tier."""
        return {k: cell_dir(tiers, t, self.sandbox_name) / "tables" for k, t in placed_tables(cell.placement).items()}

    def _on_server(self, sb, step: Callable, tables: dict[str, Path]) -> dict[str, Any]:
        conn = sb.connection_spec().connect()
        try:
            return step(conn, sb.flavor, tables)
        finally:
            conn.close()

    def _measure(self, sb, cell: Cell, clock: "PhaseClock", rec: CellRecord, noise: dict[str, Any],
                 tiers: TierSession) -> None:
        """Start the server, wait for quiet if asked, warm up and measure; the noise of the measured window."""
        clock.enter(SweepPhase.START)
        sb.start()
        server_pid = sb.running_pid()
        tables = self._table_dirs(cell, tiers)
        if tables:
            clock.enter(SweepPhase.PLACE)  # single tables are placed by the server itself (table_placement.py)
            rec.tiers = {**(rec.tiers or {}), "tables": self._on_server(sb, table_placement.place_tables, tables)}
        roots = lambda: [os.getpid()] + ([server_pid] if server_pid else [])  # noqa: E731
        if self.opts.wait_quiet:
            clock.enter(SweepPhase.WAIT_QUIET)
            noise["wait"] = noise_mod.wait_quiet(roots, self.opts.wait_quiet, self.opts.noise_threshold,
                                                 echo=self.echo).to_dict()
        self._point_exporter_at(sb, cell)
        measurement = Measurement()
        if self.exporter is not None:
            self.exporter.set_measurement(measurement)
        window = noise_mod.NoiseWindow(roots, self.opts.noise_threshold)
        witness = EvidenceWindow(sb.connection_spec().connect, Path(sb.error_log))
        clock.enter(SweepPhase.WARMUP)
        start = _measure_starts(clock, window, witness)
        measurement.subscribe(lambda m: start() if m.phase == "measure" else None)
        result = self._drive(sb.connection_spec(golden_mod.TPCC_DATABASE), cell, measurement, start)
        if window.started:
            noise["window"] = window.end()
        rec.evidence = witness.end()
        rec.result = result.to_dict()
        if not result.complete or result.failure:
            raise SweepError(f"the TPC-C run did not complete: {result.failure or 'incomplete'}")

    def _check_and_collect(self, sb, clock: "PhaseClock", rec: CellRecord) -> None:
        clock.enter(SweepPhase.CHECK)
        report = run_checks(sb.connection_spec(golden_mod.TPCC_DATABASE), golden_mod.TPCC_DATABASE)
        rec.check_ok = bool(report.ok)
        rec.check = _as_dict(report)
        clock.enter(SweepPhase.COLLECT)
        self._collect(sb, rec)
        placed = (rec.tiers or {}).get("tables")
        if placed:  # still where the cell put them, as the server says at the end of the run
            rec.tiers["tables_at_end"] = self._on_server(sb, table_placement.verify,
                                                         {k: v["dir"] for k, v in placed.items()})
        clock.enter(SweepPhase.STOP)
        sb.stop("clean")
        if not rec.check_ok:
            rec.status, rec.failure = "failed", "TPC-C consistency checks failed after the run"

    def _drive(self, spec: ConnectionSpec, cell: Cell, measurement: Measurement, measuring: Callable[[], None]):
        w = self.spec.workload
        cfg = RunConfig(clients=int(cell.settings["clients"]), warmup=w.warmup, duration=w.duration, mode=w.mode,
                        interval=w.interval, warehouses=w.warehouses, database=golden_mod.TPCC_DATABASE,
                        driver=w.driver, tool_path=w.tool_path, labels=self._labels(cell)).validate()
        if w.driver == "builtin":
            return tpcc_driver.run(spec, cfg, measurement=measurement)

        return adapters.get(w.driver).run(spec, cfg, on_measuring=lambda seconds: measuring())

    def _bins(self, cell: Cell) -> ServerBinaries:
        return self.binaries[cell.settings.get("server")]

    def _labels(self, cell: Cell) -> dict[str, str]:
        s = cell.settings
        bins = self._bins(cell)
        return {"sweep": self.spec.name, "cell": cell.cell_id, "tier": cell.datadir_tier,
                "server": s.get("server") or bins.series, "flavor": bins.flavor.value, "version": str(bins.version),
                # the exporter drops label values with '@' (they look like DSNs): "redo on tmpfs (rest on disk)"
                "placement": placement_label(cell.placement).replace("@", " on "), "page_size": s["page_size"],
                "flush_method": str(s.get("flush_method", "")), "doublewrite": str(s.get("doublewrite", "")),
                "clients": str(s["clients"])}

    def _point_exporter_at(self, sb, cell: Cell) -> None:
        cs = sb.connection_spec(golden_mod.TPCC_DATABASE)
        self.server_spec.socket, self.server_spec.password = cs.socket, cs.password
        self.server_spec.host = self.server_spec.port = None
        if self.exporter is not None:
            info = {"sweep": self.spec.name, "driver": self.spec.workload.driver, "mode": self.spec.workload.mode,
                    "warehouses": self.spec.workload.warehouses, "flavor": self.plan.flavor.value,
                    "version": str(self.plan.version), **self._labels(cell)}
            self.exporter.set_info(info)

    def _collect(self, sb, rec: CellRecord) -> None:
        conn = sb.connection_spec().connect()
        try:
            rec.variables = fetch_variables(conn)
            cur = conn.cursor()
            cur.execute(SQL_VERSION)
            rec.server_version = str(cur.fetchone()[0])
            cur.close()
        finally:
            conn.close()
        if self.opts.pt_summary and rec.repeat == 1:
            # once per cell (block 1): the later blocks run the same server with the same settings
            rec.pt_summary = pt_mysql_summary(sb.connection_spec())

    def _cleanup_cell(self, tiers: TierSession) -> None:
        try:
            golden_mod.discard_cell_sandbox(self.sandbox_name)
        finally:
            clear_cell_dirs(tiers, self.sandbox_name)
            for problem in tiers.close_cell():
                self.echo(f"warning: {problem}")


class PhaseClock:
    """The phases of one cell: seconds spent in each, and a callback at every change (progress, exporter)."""

    def __init__(self, on_change: Callable[[SweepPhase], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._on_change = on_change
        self.started = self._t = clock()
        self.phase: SweepPhase | None = None
        self.seconds: dict[SweepPhase, float] = {}

    def elapsed(self) -> float:
        return self._clock() - self.started

    def _book(self) -> None:
        now = self._clock()
        if self.phase is not None:
            self.seconds[self.phase] = round(self.seconds.get(self.phase, 0.0) + now - self._t, 3)
        self._t = now

    def enter(self, phase: SweepPhase) -> None:
        self._book()
        self.phase = phase
        self._on_change(phase)

    def close(self) -> dict[SweepPhase, float]:
        self._book()
        self.phase = None
        return dict(self.seconds)


def _measure_starts(clock: PhaseClock, window: noise_mod.NoiseWindow,
                    witness: EvidenceWindow | None = None) -> Callable[[], None]:
    """Warm-up -> measure, once: opens the noise window and the server's wait evidence.  The built-in driver's
    Measurement tells its listeners as each report interval closes (so the window spans the measured phase from
    its first interval's end); an external tool's adapter calls it when its measured phase starts."""

    def start() -> None:
        if clock.phase == SweepPhase.WARMUP:
            if witness is not None:
                witness.begin()
            window.begin()
            clock.enter(SweepPhase.MEASURE)

    return start


def _install_db(plan: Plan) -> str | None:
    return find_binaries(plan.spec.basedir).install_db


def _as_dict(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()

    return to_jsonable(obj) if not isinstance(obj, dict) else obj


def option_files_text(sb) -> str:
    """my.cnf and every conf.d drop-in, as the server reads them (the cell's complete option files)."""
    parts = [f"# ==> {sb.cnf}\n{sb.cnf.read_text()}"]
    for p in sorted(Path(sb.conf_d).glob("*.cnf")):
        parts.append(f"# ==> {p}\n{p.read_text()}")
    return "\n".join(parts)


def pt_mysql_summary(spec: ConnectionSpec, timeout: float = 120.0) -> str | None:
    """pt-mysql-summary's report (percona-toolkit), credentials via a 0600 defaults file; None when not installed."""
    tool = shutil.which("pt-mysql-summary")
    if not tool:
        return None
    with spec.client_option_file() as cnf:
        try:
            proc = subprocess.run([tool, f"--defaults-file={cnf}", "--sleep=1"], capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"(pt-mysql-summary did not finish within {timeout:.0f} s)"
    return proc.stdout if proc.returncode == 0 else f"(pt-mysql-summary failed: {proc.stderr.strip()[-500:]})"


def _tool_version(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def environment(plan: Plan) -> dict[str, Any]:
    """Kernel, host and tool versions: the context a cell ran in."""
    import importlib.metadata as md

    def pkg(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    u = os.uname()
    mem = read_meminfo().get("MemTotal")
    return {
        "innotier": __version__, "python": platform.python_version(), "kernel": f"{u.sysname} {u.release}",
        "kernel_version": u.version, "machine": u.machine, "hostname": u.nodename, "cpus": os.cpu_count(),
        "mem_total_bytes": mem, "server": plan.version_string, "mysqld": plan.mysqld,
        "servers": {str(k or "default"): b.version_string for k, b in plan.binaries.items()},
        "tools": {"mysql-connector-python": pkg("mysql-connector-python"), "matplotlib": pkg("matplotlib"),
                  "pt-mysql-summary": _tool_version(["pt-mysql-summary", "--version"]),
                  "cp": _tool_version(["cp", "--version"])},
        "driver": plan.spec.workload.driver,
    }
