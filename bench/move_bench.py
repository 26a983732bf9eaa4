#!/usr/bin/env python3
"""Mover figures at size: writes blocked, unavailability offline vs pre-copy, tpmC dip.

    sudo .venv/bin/python bench/move_bench.py [--warehouses 40] [--clients 4]
                                              [--components datadir,redo] [--home DIR] [--keep]
                                              [--move-repeat 1] [--verify files]

The offline copy against ``cp -a`` is ``bench/copy_bench.py``.

What it does (root: it mounts a tmpfs):
1. the TPC-C datadir of W warehouses (W=40 is about 4.5 GB) comes from a golden copy
   (``tuner.sweep.golden``) kept under ``--home`` (default /var/tmp/innotier-move-bench): built
   once (load, checks, slow shutdown), then cloned (cp + xxh3 verify) into a sandbox on the root
   file system at every run, so a re-run does not reload;
2. for each component (whole datadir, redo only): ``--move-repeat`` moves to the tmpfs with an offline
   copy and as many with the online pre-copy (rotated order), each while the built-in TPC-C driver runs (``--clients``
   terminals that reconnect through the restart and count the transactions that fail meanwhile
   as errors), and the move back between them; before each move the source's pages are dropped from the
   page cache (``--source-cache cold``, the default: a server running with O_DIRECT has its files
   uncached, while the clone of step 1 left them all cached); per move: server unavailable (stop to
   accepting connections, from the journal) and where that time went (stop, delta copy,
   read-back, switch, start), writes blocked, the plan's estimate, bytes copied while stopped,
   the pre-flush before the stop, the tpmC (1-second timeline of the driver) in the
   half-minute before vs the minute around the stop, the lowest 5-second rate, and the errors;
4. the proof of each pre-copied move as a plain `move apply` gets it: the detached prover that move
   starts after START at its default rate (this bench never runs the proof itself), timed from the
   start on the target to the proof passed (read from the journal, waited on with a deadline), the
   rate it reached, and the tpmC while it ran against the ``--settle`` seconds after it (the same
   server on the same tier; before the move it ran on the source's); the offline moves, over windows
   as long as a proof of their files at that rate would take, are the control for the restart and
   the new tier.  Each move is finalized after those windows.
Prints the figures with the load average; the machine is shared, so read them as such.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from datadir_mover.move import plan as planmod  # noqa: E402
from datadir_mover.move import proof as proofmod  # noqa: E402
from datadir_mover.move.executor import Executor, MoveHalted  # noqa: E402
from datadir_mover.move.step_records import ShutdownRecord, StartRecord  # noqa: E402
from benchhost import bench_home_with_tmpfs, loadavg  # noqa: E402
from tuner.core import sandbox as sbx  # noqa: E402
from tuner.core.server import inspect  # noqa: E402
from tuner.sweep import golden  # noqa: E402
from tuner.tpcc import driver  # noqa: E402
from tuner.tpcc.config import RunConfig  # noqa: E402

SANDBOX = "mvb"
OPTIONS = {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "512M"}



# ---------------------------------------------------------------------------- the load


class _Enough(Exception):
    """Raised from the driver's tick callback to end its run when the bench has what it needs."""


class DriverLoad:
    """The built-in TPC-C driver in a thread, with a 1-second timeline kept on the monotonic clock.

    The driver rides through the server's restart (reconnects, counts the transactions that
    failed meanwhile as errors); ``close`` ends its run.
    """

    def __init__(self, spec, clients: int, longest: float):
        self.spec = spec
        self.cfg = RunConfig(clients=clients, warmup=2.0, duration=longest, interval=1.0, outage_limit=120.0)
        self.points: list[tuple[float, float, int]] = []  # (monotonic end of the second, tpmC, errors)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            driver.run(self.spec, self.cfg, on_interval=self._point, on_tick=self._tick)
        except _Enough:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported by the bench
            self.failure = exc

    def _point(self, point) -> None:
        with self.lock:
            self.points.append((time.monotonic(), point.tpmc, point.errors))

    def _tick(self, *_a) -> None:
        if self.stop.is_set():
            raise _Enough()

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)

    def _window(self, t0: float, t1: float) -> list[tuple[float, float, int]]:
        with self.lock:
            return [p for p in self.points if t0 < p[0] <= t1]

    def tpm(self, t0: float, t1: float) -> float:
        w = self._window(t0, t1)
        return statistics.mean(p[1] for p in w) if w else float("nan")

    def lowest_5s(self, t0: float, t1: float) -> float:
        w = [p[1] for p in self._window(t0, t1)]
        return min(statistics.mean(w[i:i + 5]) for i in range(max(1, len(w) - 4))) if w else float("nan")

    def errors_between(self, t0: float, t1: float) -> int:
        return sum(p[2] for p in self._window(t0, t1))


# ---------------------------------------------------------------------------- moves


VERIFY = {"mode": "files"}  # --verify
PROOF_GOAL_BYTES = int(4.4 * 2**30)  # the issue's goal: the proof of a 4.4 GiB datadir done within 2 minutes
PROOF_GOAL_S = 120.0


def _mono(wall: float) -> float:
    """A wall-clock time (the journal's) on the monotonic clock the load counts on."""
    return wall - time.time() + time.monotonic()


def move(sandbox: str, component: str, to: str, precopy: bool) -> dict:
    """Run a move to COMMIT as `move apply` does (its detached prover started after START at the default rate)."""
    spec = sbx.Sandbox.load(sandbox).connection_spec()
    plan = planmod.build(planmod.MoveRequest(component, to, precopy=precopy, verify=VERIFY["mode"]), spec)
    ex = Executor.create(plan)
    t0 = time.monotonic()
    halts: list[str] = []
    while True:
        try:
            result = (ex.run() if not halts else Executor.open(ex.journal).run()).to_dict()
            break
        except MoveHalted as exc:  # the table sample after the start differed before any client wrote
            halts.append(str(exc))
            if len(halts) > 3:
                raise
            # as an operator would: let the clients reconnect and write, then `move resume` (the check again)
            print(f"      move halted: {str(exc)[:160]}...; resuming it in 3 s (the check runs again)", flush=True)
            time.sleep(3)
    if halts:
        result["halted"] = halts[0]
        result["halts"] = len(halts)
    result["wall_s"] = time.monotonic() - t0
    result["estimate_s"] = plan.estimates["downtime_with_precopy_s" if precopy else "downtime_s"]
    result["plan_estimates"] = plan.estimates
    shutdown = ShutdownRecord.of(ex.journal)
    result["shutdown"] = shutdown.to_journal()
    result["stop_began_mono"] = _mono(shutdown.stop_began_at or time.time())
    result["started_mono"] = _mono(StartRecord.of(ex.journal).started_at or time.time())
    result["executor"] = ex
    return result


def wait_for_proof(journal) -> proofmod.Proof:
    """Wait until the move's proof is no longer pending: the detached prover `move apply` started (this bench
    never runs one itself), with a deadline of three times its time at the default rate plus a minute."""
    proof = proofmod.Proof.load(journal)
    deadline = time.monotonic() + 3 * proof.bytes_total / proofmod.RATE + 60
    while proof.status == "pending":
        if time.monotonic() > deadline:
            log = (journal.dir / "proof.log")
            raise RuntimeError(f"the proof of move {journal.dir.name} is still {proof.text()} past its deadline"
                               + (f"; proof.log: {log.read_text()[-400:]}" if log.exists() else ""))
        time.sleep(0.2)  # polling the journal's proof.json: the prover is another process
        proof = proofmod.Proof.load(journal)
    return proof


def proof_figures(proof: proofmod.Proof, started: float, precopy: bool) -> dict:
    """The proof as a user gets it: from the start of the server on the target to the proof passed."""
    out = {"status": proof.status, "how": proof.how, "bytes": proof.bytes_total}
    if precopy and proof.began_at:
        hashing = max(proof.finished_at - proof.began_at, 1e-3)
        out.update(done_s_after_start=round(proof.finished_at - started, 2),
                   began_s_after_start=round(proof.began_at - started, 2),
                   rate_mib_s=proof.bytes_total / hashing / 2**20)
    return out


def finalize(r: dict) -> dict:
    wait_for_proof(r["executor"].journal)
    return r.pop("executor").finalize(accept_volatile=True).to_journal()  # the bench's tiers are tmpfs/zram


def measured_move(load: DriverLoad, sandbox: str, component: str, to: str, precopy: bool, settle: float) -> dict:
    """A move under load; the tpmC before it, while its proof runs (start -> passed) and after the proof, then
    its finalize (after the windows: removing the source is I/O of its own)."""
    time.sleep(settle)
    m0 = time.monotonic()
    r = move(sandbox, component, to, precopy)
    m1 = time.monotonic()
    journal = r["executor"].journal
    proof = wait_for_proof(journal)
    started_wall = StartRecord.of(journal).started_at
    r["proof"] = proof_figures(proof, started_wall, precopy)
    start, stop = r["started_mono"], r["stop_began_mono"]
    # an offline move has no proof to run after its start: the same windows, as long as a proof of its files at
    # the default rate would take, are the control (the restart, the new tier) for the pre-copied moves'
    proved = (_mono(proof.finished_at) if "done_s_after_start" in r["proof"]
              else start + proof.bytes_total / proofmod.RATE)
    # the minute around the stop and a window of `settle` seconds after the proof are complete
    time.sleep(max(0.0, stop + 31 - time.monotonic(), proved + settle + 1 - time.monotonic()))
    r["tpm_before"] = load.tpm(m0 - settle, m0)
    r["tpm_minute_of_move"] = load.tpm(stop - 30, stop + 30)
    r["tpm_during_proof"] = load.tpm(start, proved)
    r["tpm_after_proof"] = load.tpm(proved, proved + settle)
    r["tpm_lowest_5s"] = load.lowest_5s(m0, m1 + settle)
    r["errors"] = load.errors_between(m0, m1 + settle)
    r["settle"] = settle
    r["finalize"] = finalize(r)
    return r


def report_move(label: str, r: dict) -> None:
    copy = r.get("copy") or {}
    pre = r.get("precopy") or {}
    passes = pre.get("passes") or []
    vs = r.get("verify_server") or {}
    print(f"  {label}: unavailable {r.get('downtime_s', float('nan')):.2f} s (plan estimated {r['estimate_s']:.1f} s"
          + (f", pre-copy expected {pre['expected_downtime_s']:.1f} s" if 'expected_downtime_s' in pre else "")
          + f"); writes blocked {r.get('writes_blocked_s', float('nan')):.2f} s; verified "
          f"{r.get('until_verified_s', 0):.2f} s after the stop ({vs.get('mode')}: {vs.get('tables')} tables)")
    bd = r.get("downtime_breakdown") or {}
    print("      downtime breakdown: " + ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in bd.items()
                                                  if k != "preflush_before_stop_s"))
    if r.get("halted"):
        print(f"      HALTED first (resumed): {r['halted']}")
    lp = (r.get("shutdown") or {}).get("last_pass") or {}
    if "pass" in lp:
        f = lp.get("flush") or {}
        print(f"      with commits blocked before the stop: flush {f.get('seconds', 0):.1f} s (dirty pages "
              f"{f.get('dirty_before')} -> {f.get('dirty_after')}, {f.get('why')}), then a pass of "
              f"{lp['pass']['seconds']:.1f} s writing {lp['pass']['bytes_written'] / 2**20:.0f} MiB; "
              f"{lp['seconds']:.1f} s in all")
    elif lp:
        print(f"      last pass under the block skipped: {lp.get('skipped')}")
    pf = (r.get("shutdown") or {}).get("preflush") or {}
    if "seconds" in pf:
        print(f"      pre-flush before the stop: {pf['seconds']:.1f} s, dirty pages {pf['dirty_before']} -> "
              f"{pf['dirty_after']} ({pf['why']})")
    print(f"      copied while stopped: {copy.get('bytes_read', 0) / 2**20:.0f} MiB read, "
          f"{copy.get('bytes', 0) / 2**20:.0f} MiB written, {copy.get('files', 0)} files "
          f"({copy.get('files_delta', 0)} as block deltas, {copy.get('files_unchanged_since_precopy', 0)} unchanged) "
          f"in {copy.get('seconds', 0):.2f} s" + (
              f"; pre-copy {len(passes)} passes: " + ", ".join(
                  f"{p['seconds']:.1f} s/{p['bytes_written'] / 2**20:.0f} MiB" for p in passes) if passes else ""))
    pr = r.get("proof") or {}
    if "done_s_after_start" in pr:
        print(f"      proof (the detached prover of `move apply`, default rate {proofmod.RATE / 2**20:.0f} MiB/s): "
              f"{pr['status']}, {pr['bytes'] / 2**20:.0f} MiB hashed at {pr['rate_mib_s']:.0f} MiB/s, began "
              f"{pr['began_s_after_start']:.2f} s and done {pr['done_s_after_start']:.1f} s after the start")
    else:
        print(f"      proof: {pr.get('status')} ({pr.get('how')})")
    during = (f"{r['tpm_during_proof']:.0f} while the proof ran, {r['tpm_after_proof']:.0f} in {r['settle']:.0f} s "
              f"after it" if "done_s_after_start" in pr else
              f"{r['tpm_during_proof']:.0f} for as long as a proof at the default rate after the start, "
              f"{r['tpm_after_proof']:.0f} in {r['settle']:.0f} s after that")
    print(f"      TPC-C: {r['tpm_before']:.0f} tpmC before the move, {during}; "
          f"{r['tpm_minute_of_move']:.0f} in the minute around the stop, "
          f"lowest 5 s {r['tpm_lowest_5s']:.0f} tpmC; {r['errors']} failed transactions; move wall time "
          f"{r['wall_s']:.1f} s")


def _med(xs: list[float], fmt: str = ".2f", unit: str = " s") -> str:
    xs = [x for x in xs if x == x]  # not NaN
    if not xs:
        return "n/a"
    return f"{statistics.median(xs):{fmt}}{unit} (range {min(xs):{fmt}}-{max(xs):{fmt}}, {len(xs)})"


def report_proofs(results: dict[bool, list[dict]]) -> None:
    """The pre-copied moves' proofs as `move apply` runs them, and the tpmC while they ran against after them (the
    same server on the same tier; before the move it ran on the source's tier).  The offline moves, over windows
    as long after their start (no proof runs there), are the control for the restart and the new tier."""
    pre = [r for r in results.get(True, []) if "done_s_after_start" in (r.get("proof") or {})]
    if not pre:
        return
    done = [r["proof"]["done_s_after_start"] for r in pre]
    rates = [r["proof"]["rate_mib_s"] for r in pre]
    passed = sum(1 for r in pre if r["proof"]["status"] == "passed")
    rate = statistics.median(rates)
    lag = statistics.median(r["proof"]["began_s_after_start"] for r in pre)
    goal = lag + PROOF_GOAL_BYTES / 2**20 / rate
    print(f"  proof of the pre-copied moves (detached prover, default {proofmod.RATE / 2**20:.0f} MiB/s): passed in "
          f"{passed} of {len(pre)}; start -> passed {_med(done)}; rate {_med(rates, '.0f', ' MiB/s')}; "
          f"{pre[0]['proof']['bytes'] / 2**20:.0f} MiB; the prover began {lag:.1f} s after the start (median)")
    print(f"  a 4.4 GiB datadir at the median rate: proof passed about {goal:.0f} s after the start "
          f"(goal <= {PROOF_GOAL_S:.0f} s: {'met' if goal <= PROOF_GOAL_S else 'NOT met'})")
    ratio = [r["tpm_during_proof"] / r["tpm_after_proof"] for r in pre if r["tpm_after_proof"] > 0]
    print(f"  tpmC of the pre-copied moves: before the move (on the source) "
          f"{_med([r['tpm_before'] for r in pre], '.0f', '')}; while the proof ran "
          f"{_med([r['tpm_during_proof'] for r in pre], '.0f', '')}; after it "
          f"{_med([r['tpm_after_proof'] for r in pre], '.0f', '')}; while / after {_med(ratio, '.2f', '')}")
    control = [r["tpm_during_proof"] / r["tpm_after_proof"] for r in results.get(False, [])
               if r.get("tpm_after_proof", 0) > 0]
    print(f"  control, the offline moves (no proof runs after their start), the same windows: "
          f"while / after {_med(control, '.2f', '')}")


def report_medians(results: dict[bool, list[dict]]) -> None:
    """Medians (and ranges) of unavailability and writes blocked per mode, and the pre-copy's ratio to offline."""
    med = {}
    halts = sum(1 for rs in results.values() for r in rs if r.get("halted"))
    print(f"  moves halted by the verification (false differences): {halts} of "
          f"{sum(len(rs) for rs in results.values())} (--verify {VERIFY['mode']})")
    for precopy, rs in results.items():
        d = [r["downtime_s"] for r in rs if r.get("downtime_s")]
        w = [r["writes_blocked_s"] for r in rs if r.get("writes_blocked_s")]
        if not d:
            continue
        med[precopy] = (statistics.median(d), statistics.median(w) if w else float("nan"))
        print(f"  {'pre-copy' if precopy else 'offline '}: unavailable median {med[precopy][0]:.2f} s "
              f"(range {min(d):.2f}-{max(d):.2f}, {len(d)} moves); writes blocked median {med[precopy][1]:.2f} s")
    if False in med and True in med:
        print(f"  pre-copy unavailability = {med[True][0] / med[False][0]:.2f} of the offline move's "
              f"(medians; writes blocked {med[True][1] / med[False][1]:.2f})", flush=True)
    report_proofs(results)


# ---------------------------------------------------------------------------- the source's page cache


def _files(src: str, only: str | None) -> list[Path]:
    return [f for f in Path(src).rglob("*") if f.is_file() and (only is None or f.name == only)]


def drop_source_cache(files: list[Path]) -> None:
    """Evict the files' pages from the page cache (each file is fsynced first, so dirty pages can go too)."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------- the data


def datadir_bytes(path: str) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def sandbox_from_golden(home: Path, warehouses: int) -> sbx.Sandbox:
    """A sandbox on the root file system holding a verified clone of the W-warehouse golden copy (built once)."""
    bins = sbx.find_binaries()
    key = golden.GoldenKey(flavor=bins.flavor.value, version=str(bins.version), page_size="16k",
                           warehouses=warehouses, loader=golden._loader_digest())
    t0 = time.monotonic()
    built = not golden.is_present(key)
    golden.ensure(key, bins, load_buffer_pool="1G", progress=lambda m: print(f"  {m}", flush=True))
    if (sbx.sandboxes_dir() / SANDBOX / "sandbox.json").exists():
        golden.discard_cell_sandbox(SANDBOX)  # left by an interrupted run
    data = home / "mvb-data"
    if data.exists():
        shutil.rmtree(data)
    cl = golden.clone(key, data)
    sb = sbx.adopt(SANDBOX, data, key.dir / "client.cnf", "16k", bins, options=OPTIONS)
    print(f"data: TPC-C {warehouses} warehouses, golden copy {key.id} "
          f"({'built' if built else 'reused'}), cloned and verified in {time.monotonic() - t0:.0f} s "
          f"({cl['bytes'] / 2**20:.0f} MiB); {os.uname().release}; {bins.version_string}")
    return sb


# ---------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouses", type=int, default=40)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--components", default="datadir,redo")
    ap.add_argument("--tmpfs-size", default="12G")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds of load before and after each move")
    ap.add_argument("--home", default="/var/tmp/innotier-move-bench",
                    help="INNOTIER_HOME of the bench; keeps the golden copy between runs")
    ap.add_argument("--source-cache", choices=("cold", "warm"), default="cold",
                    help="before each move, drop the source files' pages from the page cache (cold: as on a server "
                         "that has run with O_DIRECT, whose files are not cached) or leave them (warm: the clone "
                         "just wrote them)")
    ap.add_argument("--move-repeat", type=int, default=1,
                    help="moves per component and mode (offline, pre-copy), alternating; medians reported")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox and mount (for inspection)")
    # files: the file-level proof only.  With sample (the product's default) the table sample taken under the
    # commit block before the stop differed from the one after the start with a TPC-C load running and no
    # client write counted yet (2 of 8 moves at W=40), which halts the move: see the mover's notes
    ap.add_argument("--verify", default="files", help="the moves' --verify (files, sample, tables)")
    args = ap.parse_args()
    if args.move_repeat < 1:
        ap.error("--move-repeat takes 1 or more")
    if args.verify not in ("files", "sample", "tables"):
        ap.error(f"--verify {args.verify!r} is not valid; give files, sample or tables")
    VERIFY["mode"] = args.verify
    if os.geteuid() != 0:
        print("move_bench: run as root (it mounts a tmpfs)", file=sys.stderr)
        return 2
    home = Path(args.home)
    tier = bench_home_with_tmpfs(args.home, "tier", args.tmpfs_size)
    print(f"move_bench started, load average {loadavg()} (shared machine: other helpers may be running)")
    sb = None
    load = None
    try:
        sb = sandbox_from_golden(home, args.warehouses)
        sb.start()  # once: the redo log takes its configured size and ibtmp1 appears, as on a server in use
        sb.stop("clean")
        comps = [c.strip() for c in args.components.split(",") if c.strip()]
        sb.start()
        spec = sb.connection_spec()
        load = DriverLoad(spec, args.clients, longest=3600.0)
        load.start()
        time.sleep(args.settle + 5)  # warm-up and a baseline
        for comp in comps:
            print(f"{comp} move root fs -> tmpfs with {args.clients} TPC-C terminals running, source page cache "
                  f"{args.source_cache} before each move (load average {loadavg()}):", flush=True)
            results: dict[bool, list[dict]] = {False: [], True: []}
            for i in range(args.move_repeat):
                for precopy in ((False, True) if i % 2 == 0 else (True, False)):  # rotated
                    to = str(tier / f"{comp}-{'pre' if precopy else 'off'}")
                    back = inspect(sbx.Sandbox.load(SANDBOX).connection_spec()).locations()[comp]
                    if args.source_cache == "cold":  # as on a server that has run with O_DIRECT for a while
                        drop_source_cache(_files(back, None))
                    r = measured_move(load, SANDBOX, comp, to, precopy, args.settle)
                    results[precopy].append(r)
                    report_move("with pre-copy   " if precopy else "offline copy    ", r)
                    finalize(move(SANDBOX, comp, back, False))
            report_medians(results)
        if load.failure:
            print(f"the TPC-C driver ended with: {load.failure}")
        print(f"load average at the end: {loadavg()}")
    finally:
        if load is not None:
            load.close()
        if not args.keep:
            try:
                golden.discard_cell_sandbox(SANDBOX)
            except Exception:  # noqa: BLE001 - best effort at the end of a bench
                pass
            subprocess.run(["umount", str(tier)], check=False)
            shutil.rmtree(home / "mvb-data", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
