"""A fair side-by-side TPC-C comparison: innotier's driver against the peers, each on its own fresh server.

The protocol, the same for every driver:

* a fresh sandbox per driver, holding only that driver's W=4 schema, all with the
  same server settings (``SERVER_OPTIONS``);
* the same preparation: the driver's own load (timed; ours verified), ANALYZE
  TABLE on every table, then a priming run of the driver itself;
* TCP to 127.0.0.1 for everyone (our socket run is a separate, labelled row);
* dirty pages flushed before each measured run;
* rounds (at least three) in rotated order, so no driver always follows another;
* New-Orders and transactions counted by this module from the server -- growth of
  sum(d_next_o_id) and of Com_commit + Com_rollback -- in the same window for every
  driver (``WINDOW``: from warm-up + 20% of the duration + 2 s to warm-up + 90%),
  with the client CPU (the driver's process tree) and the server CPU (mariadbd)
  read from /proc at the same two instants;
* the TPC-C consistency check (``tpcc check``) on each driver's schema after its runs;
* medians with ranges.

Shape: ``CompareSpec`` (what to compare) -> ``plan()`` (printable) -> ``run()``
(side effects: sandboxes, loads, runs) -> ``CompareResult`` (JSON) ->
``render()`` (text table).  The bench script and ``innotier tpcc compare`` are
two front ends of this module.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner.core import sandbox as sbx
from tuner.core.errors import UsageError
from tuner.tpcc import adapters, check, loader
from tuner.tpcc.config import RunConfig

WAREHOUSES = 4
SERVER_OPTIONS = {  # identical for every driver (the recorded peer runs' settings, README of the fixtures)
    "innodb_buffer_pool_size": "1G",
    "innodb_flush_method": "O_DIRECT",
    "innodb_log_file_size": "256M",
    "max_connections": "700",
    "max_prepared_stmt_count": "60000",
    "skip_name_resolve": "ON",
}
PEERS = ("hammerdb", "go-tpc", "tpcc-mysql", "sysbench-tpcc")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SUM_NEXT_O_ID = "SELECT SUM(d_next_o_id) FROM `{db}`.`{table}`"
COM = "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')"
TABLES = "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE'"


# ---------------------------------------------------------------------------
# Spec and plan


@dataclass(frozen=True)
class Entry:
    """One row of the comparison: a driver, how it runs, how it connects."""

    key: str  # row label, also the sandbox suffix
    driver: str  # builtin or a peer name
    mode: str  # procedures / statements (what the driver runs)
    transport: str = "tcp"  # tcp or socket
    tool_path: str | None = None
    checkout: str | None = None  # builtin: another checkout of innotier whose .venv runs it (bench/tpcc_revisions.py)


@dataclass
class CompareSpec:
    clients: list[int] = field(default_factory=lambda: [8, 32])
    warmup: float = 20.0
    duration: float = 60.0
    rounds: int = 3
    priming: float = 20.0  # seconds of the priming run after load + ANALYZE
    priming_clients: int = 4
    socket_row: bool = True
    peers: dict[str, str | None] = field(default_factory=dict)  # name -> tool path (None: not measured)
    big_clients: int = 0  # one extra run of ours (procedures) at this many clients, 0 = none
    prefix: str = "cmp"
    warehouses: int = WAREHOUSES

    def validate(self) -> "CompareSpec":
        if self.rounds < 1:
            raise UsageError(f"--rounds {self.rounds} is not valid; give 1 or more (3 for a fair comparison)")
        if not self.clients or any(c < 1 for c in self.clients):
            raise UsageError(f"--clients {self.clients} is not valid; give positive client counts, e.g. 8,32")
        if self.warehouses < 1:
            raise UsageError(f"--warehouses {self.warehouses} is not valid; give 1 or more")
        if self.duration < 10:
            raise UsageError(f"--duration {self.duration:g} is too short for the measuring window; give 10 s or more")
        for name, path in self.peers.items():
            if name not in PEERS:
                raise UsageError(f"unknown peer {name!r}; use {', '.join(PEERS)}")
            if path:
                adapters.get(name).find_tool(path)  # a wrong path fails here, before any server is made
        return self

    def entries(self) -> list[Entry]:
        out = [Entry("innotier-procedures", "builtin", "procedures"),
               Entry("innotier-statements", "builtin", "statements")]
        if self.socket_row:
            out.append(Entry("innotier-procedures-socket", "builtin", "procedures", transport="socket"))
        for name in PEERS:
            path = self.peers.get(name)
            if path:
                out.append(Entry(name, name, adapters.get(name).MODE, tool_path=path))
        return out

    def missing_peers(self) -> list[str]:
        return [p for p in PEERS if not self.peers.get(p)]


def window(warmup: float, duration: float) -> tuple[float, float]:
    """Offsets from a run's start between which the bench counts: the steady part of the measured phase."""
    return warmup + 0.2 * duration + 2.0, warmup + 0.9 * duration


def round_order(entries: list[Entry], r: int) -> list[Entry]:
    """Round r's order: rotated by r, so no driver always runs first or right after another."""
    k = r % len(entries)
    return entries[k:] + entries[:k]


def plan(spec: CompareSpec) -> list[str]:
    """The steps, printable before anything starts."""
    spec.validate()
    lines = [f"server settings for every driver: {SERVER_OPTIONS}",
             f"window counted by the bench: {window(spec.warmup, spec.duration)} s after each run's start "
             f"(a peer: {window(0.0, spec.duration)} s after its measured phase starts, as the peer announces it "
             "with the duration it really runs; its warm-up may be a separate run)"]
    for e in spec.entries():
        if e.transport == "socket":
            lines.append(f"{e.key}: innotier-procedures' sandbox and schema, over its Unix socket (a labelled row)")
            continue
        lines.append(f"prepare {e.key}: fresh sandbox {spec.prefix}-{e.key}, load W={spec.warehouses}, ANALYZE TABLE, "
                     f"priming run {spec.priming:g} s at {spec.priming_clients} clients")
    for r in range(spec.rounds):
        order = ", ".join(e.key for e in round_order(spec.entries(), r))
        lines.append(f"round {r + 1}: {order}; clients {spec.clients}; warm-up {spec.warmup:g} s, "
                     f"measured {spec.duration:g} s each")
    lines.append("then: tpcc check on every schema; medians and ranges")
    for p in spec.missing_peers():
        lines.append(f"{p}: not measured (no path given)")
    return lines


# ---------------------------------------------------------------------------
# /proc (root argument so a recorded tree can stand in)


def proc_cpu_seconds(pid: int, root: str = "/proc", reaped: bool = False) -> float:
    """utime + stime of one process, seconds (0 if it is gone); ``reaped``: also cutime + cstime, the CPU of
    the children it has waited for."""
    try:
        text = Path(root, str(pid), "stat").read_text()
    except OSError:
        return 0.0
    f = text.rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12]) + (int(f[13]) + int(f[14]) if reaped else 0)) / CLK_TCK


def client_cpu_seconds(pid: int, exclude: set[int], root: str = "/proc") -> float:
    """CPU of ``pid``'s descendants (minus ``exclude`` and theirs), including those that ended meanwhile.

    A child that exits and is waited for leaves the tree, and its CPU moves to its parent's cutime/cstime: so
    every process's reaped children count too (``pid``'s own, for its direct children), and a sum taken before
    a peer's warm-up process ends does not exceed one taken after it.
    """
    tree = descendants(pid, exclude, root)
    return sum(proc_cpu_seconds(p, root, reaped=True) for p in tree) + (
        proc_cpu_seconds(pid, root, reaped=True) - proc_cpu_seconds(pid, root))


def descendants(pid: int, exclude: set[int], root: str = "/proc") -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir(root):
        if d.isdigit():
            try:
                ppid = int(Path(root, d, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        if p in exclude:
            continue
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def tree_rss_bytes(pids: list[int], root: str = "/proc") -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(root, str(p), "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


# ---------------------------------------------------------------------------
# Counting in the window


@dataclass
class Sample:
    at: float
    orders: int
    transactions: int
    client_cpu: float
    server_cpu: float


class WindowCounter:
    """Samples the server counters and /proc CPU at the window's two instants, from a thread.

    The offsets count from the anchor: ``start()`` anchors at once (our driver, whose warm-up is part of its
    run); ``start(anchored=False)`` waits for ``anchor()``, which a peer's adapter triggers when its measured
    phase starts (``on_measuring``): a peer whose warm-up is a separate process starts measuring seconds
    later than ``warmup`` after the run began (HammerDB: its start-up, its 6-second steps and its end), so
    a clock from the run's start would count part of its pause between the two processes.
    """

    def __init__(self, spec, database: str, server_pid: int, offsets: tuple[float, float],
                 district_table: str = "district") -> None:
        self.spec, self.database, self.server_pid, self.offsets = spec, database, server_pid, offsets
        self.district_table = district_table
        self.samples: list[Sample] = []
        self.peak_rss = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._anchored = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._conn = spec.with_database(None).connect()

    def start(self, anchored: bool = True) -> None:
        self.t0 = time.monotonic()
        if anchored:
            self._anchored.set()
        self._t.start()

    def anchor(self, offsets: tuple[float, float]) -> None:
        """Count ``offsets`` from now (once; a later call changes nothing)."""
        if not self._anchored.is_set():
            self.t0, self.offsets = time.monotonic(), offsets
            self._anchored.set()

    def _sample(self) -> None:
        cur = self._conn.cursor()
        cur.execute(SUM_NEXT_O_ID.format(db=self.database, table=self.district_table))
        orders = int(cur.fetchone()[0] or 0)
        cur.execute(COM)
        com = sum(int(v) for _, v in cur.fetchall())
        cur.close()
        me = os.getpid()
        tree = descendants(me, {self.server_pid})
        self.peak_rss = max(self.peak_rss, tree_rss_bytes(tree))
        self.samples.append(Sample(time.monotonic(), orders, com, client_cpu_seconds(me, {self.server_pid}),
                                   proc_cpu_seconds(self.server_pid)))

    def _run(self) -> None:
        while not self._anchored.wait(0.2):
            if self._stop.is_set():
                return
        try:
            for at in self.offsets:
                if self._stop.wait(max(0.0, self.t0 + at - time.monotonic())):
                    return
                self._sample()
        except Exception as exc:  # reported with the run, never fatal to the bench
            self.error = str(getattr(exc, "msg", exc))

    def stop(self) -> dict[str, float] | None:
        if self._anchored.is_set():
            self._t.join(timeout=max(0.0, self.t0 + self.offsets[1] - time.monotonic()) + 30)
        self._stop.set()
        self._t.join(timeout=30)
        try:
            self._conn.close()
        except Exception:
            pass
        if len(self.samples) < 2:
            return None
        a, b = self.samples[0], self.samples[-1]
        secs = b.at - a.at
        new_orders = b.orders - a.orders
        out = {"window_seconds": round(secs, 3), "nopm": round(new_orders * 60 / secs, 1),
               "tpm": round((b.transactions - a.transactions) * 60 / secs, 1)}
        if new_orders > 0:
            out["client_cpu_per_kno"] = round((b.client_cpu - a.client_cpu) / new_orders * 1000, 3)
            out["server_cpu_per_kno"] = round((b.server_cpu - a.server_cpu) / new_orders * 1000, 3)
        return out


# ---------------------------------------------------------------------------
# Running one driver


@dataclass
class RunRecord:
    entry: str
    round: int
    clients: int
    bench: dict[str, float] | None  # counted by the bench in its window
    driver: dict[str, Any]  # what the driver itself reported (tpmC, NOPM, errors, mix, command)
    complete: bool
    note: str = ""
    client_rss_bytes: int = 0


def database_of(e: Entry) -> str:
    return "tpcc" if e.driver == "builtin" else "tpcc_" + e.driver.replace("-", "_")


def district_table_of(e: Entry) -> str:
    """The driver's DISTRICT table (sysbench-tpcc suffixes its table set: district1)."""
    return "district" if e.driver == "builtin" else adapters.get(e.driver).DISTRICT_TABLE


def python_of(e: Entry) -> str:
    """The interpreter that runs our driver: this one, or the venv of the entry's checkout (run from inside it,
    so ``-m tuner.cli`` imports that checkout's code and not the caller's)."""
    return str(Path(e.checkout, ".venv", "bin", "python")) if e.checkout else sys.executable


def run_builtin(sb, e: Entry, clients: int, warmup: float, duration: float, interval: float = 10.0,
                deck: str = "23") -> tuple[dict, bool, str]:
    """Our driver in its own process (so its CPU is its own tree), over TCP or the socket."""
    if e.transport == "socket":
        where = ["--sandbox", sb.name]
    else:
        where = ["--host", "127.0.0.1", "--port", str(sb.port), "--defaults-file", str(sb.client_cnf)]
    cmd = [python_of(e), "-m", "tuner.cli", "tpcc", "run", *where, "--database", database_of(e),
           "--clients", str(clients), "--warmup", f"{warmup:g}", "--duration", f"{duration:g}",
           "--interval", f"{min(interval, duration):g}", "--mode", e.mode, "--deck", deck, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=warmup + duration + 300 + clients,
                          cwd=e.checkout)
    if proc.returncode not in (0, 8):
        return {"command": " ".join(cmd[2:])}, False, proc.stderr.strip()[-300:]
    r = json.loads(proc.stdout)
    extra = r.get("extra", {})
    return ({"tpmc": r.get("tpmc"), "nopm": r.get("nopm"), "tpm": r.get("tpm"), "errors": r.get("errors"),
             "retries": r.get("retries"), "rollbacks": r.get("rollbacks"), "realized_mix": extra.get("realized_mix"),
             "deck": extra.get("deck"), "command": "innotier " + " ".join(cmd[3:])},
            bool(r.get("complete")), r.get("failure") or "")


def run_peer(sb, e: Entry, clients: int, warmup: float, duration: float,
             on_measuring: Callable[[float], None] | None = None) -> tuple[dict, bool, str]:
    cfg = RunConfig(clients=clients, warmup=warmup, duration=duration, interval=10.0,
                    database=database_of(e), driver=e.driver, tool_path=e.tool_path)
    try:
        r = adapters.get(e.driver).run(sb.tcp_spec(database_of(e)), cfg, on_measuring=on_measuring)
    except Exception as exc:  # a peer failing is a figure to report, not a crash of the comparison
        return {}, False, str(exc)[:300]
    return ({"tpmc": r.tpmc, "nopm": r.nopm, "tpm": r.tpm, "errors": r.errors, "retries": r.retries,
             "realized_mix": r.extra.get("realized_mix"), "commands": r.extra.get("commands")},
            r.complete, r.failure or "")


def measured_run(sb, e: Entry, clients: int, warmup: float, duration: float, rnd: int) -> RunRecord:
    flush_dirty_pages(sb.connection_spec())
    counter = WindowCounter(sb.connection_spec(), database_of(e), sb.running_pid(), window(warmup, duration),
                            district_table_of(e))
    if e.driver == "builtin":
        counter.start()
        driver, ok, note = run_builtin(sb, e, clients, warmup, duration)
    else:  # the same window, counted from the start of the measured phase the peer announces
        counter.start(anchored=False)
        driver, ok, note = run_peer(sb, e, clients, warmup, duration,
                                    on_measuring=lambda seconds: counter.anchor(window(0.0, seconds)))
    bench = counter.stop()
    if bench is None and not counter.error:
        counter.error = "no window counted (the driver never announced its measured phase, or it ended early)"
    if counter.error:
        note = (note + "; " if note else "") + f"window counter: {counter.error}"
    return RunRecord(e.key, rnd, clients, bench, driver, ok, note, counter.peak_rss)


FLUSH_IO_CAPACITY = 20000  # pages/s the page cleaner may write while the bench flushes between runs


def flush_dirty_pages(spec, limit: int = 10, timeout: float = 300.0) -> float:
    """innodb_max_dirty_pages_pct=0 until at most ``limit`` dirty pages, then back (the peers' recorded protocol).

    The page cleaner writes at most innodb_io_capacity pages a second toward that target
    (200 by default: minutes for a run's dirty pages), so the capacity is raised for the
    flush and every setting is put back afterwards, also on failure.  Returns the seconds taken.
    """
    t0 = time.monotonic()
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT @@innodb_max_dirty_pages_pct, @@innodb_io_capacity, @@innodb_io_capacity_max")
    pct, cap, cap_max = cur.fetchone()
    try:
        cur.execute(f"SET GLOBAL innodb_io_capacity_max = {max(int(cap_max), FLUSH_IO_CAPACITY)}")
        cur.execute(f"SET GLOBAL innodb_io_capacity = {FLUSH_IO_CAPACITY}")
        cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
            if int(cur.fetchone()[1]) <= limit:
                break
            time.sleep(0.2)
    finally:
        cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(pct)}")
        cur.execute(f"SET GLOBAL innodb_io_capacity = {int(cap)}")
        cur.execute(f"SET GLOBAL innodb_io_capacity_max = {int(cap_max)}")
        conn.close()
    return time.monotonic() - t0


# ---------------------------------------------------------------------------
# Preparation


def fresh_sandbox(name: str):
    """A new sandbox with SERVER_OPTIONS (an old one of that name is destroyed first), started."""
    try:
        old = sbx.Sandbox.load(name)
        old.destroy(force=True)
    except Exception:
        pass
    sb = sbx.create(name, page_size="16k", options=SERVER_OPTIONS)
    sb.start()
    return sb


def analyze(spec, database: str) -> None:
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute(TABLES, (database,))
        for (table,) in cur.fetchall():
            cur.execute(f"ANALYZE TABLE `{database}`.`{table}`")
            cur.fetchall()
        cur.close()
    finally:
        conn.close()


def prepare(spec: CompareSpec, e: Entry, sb, say: Callable[[str], None]) -> dict[str, Any]:
    """Load the driver's own schema (timed), ANALYZE TABLE, priming run."""
    t0 = time.monotonic()
    if e.driver == "builtin":
        loader.load(sb.connection_spec(), spec.warehouses, database=database_of(e), drop=True, progress=False)
        how = "innotier tpcc load (verified)"
    else:
        adapters.get(e.driver).load(sb.tcp_spec(), spec.warehouses, database=database_of(e), tool_path=e.tool_path,
                                    drop=True)
        how = f"{e.driver}'s own loader"
    load_seconds = round(time.monotonic() - t0, 1)
    analyze(sb.connection_spec(), database_of(e))
    say(f"{e.key}: loaded in {load_seconds} s ({how}), analyzed; priming {spec.priming:g} s")
    if e.driver == "builtin":
        run_builtin(sb, e, spec.priming_clients, 0, spec.priming)
    else:
        run_peer(sb, e, spec.priming_clients, 0, spec.priming)
    return {"load_seconds": load_seconds, "load": how}


def consistency(sb, e: Entry, warehouses: int) -> dict[str, Any]:
    """innotier's TPC-C check, or the adapter's ``check()``: the peer's own where its schema is not TPC-C's
    names (sysbench-tpcc), or innotier's conditions naming the peer's known deviations (tpcc-mysql, HammerDB)."""
    own = getattr(adapters.get(e.driver), "check", None) if e.driver != "builtin" else None
    if own is not None:
        try:
            ok, detail = own(sb.tcp_spec(), warehouses, database_of(e), e.tool_path)
        except Exception as exc:
            return {"ok": None, "detail": f"check could not run: {getattr(exc, 'msg', exc)}"}
        return {"ok": ok, "detail": detail[:500], "by": getattr(adapters.get(e.driver), "CHECK_BY",
                                                               f"{e.driver}'s own check")}
    try:
        ok, detail = check.run_checks(sb.connection_spec(database_of(e)), database_of(e)).verdict()
    except Exception as exc:
        return {"ok": None, "detail": f"check could not run: {getattr(exc, 'msg', exc)}"}
    return {"ok": ok, "detail": detail[:500]}


# ---------------------------------------------------------------------------
# The whole comparison


@dataclass
class CompareResult:
    spec: dict[str, Any]
    plan: list[str]
    server_options: dict[str, str]
    prepared: dict[str, dict[str, Any]]
    runs: list[RunRecord]
    checks: dict[str, dict[str, Any]]
    missing_peers: list[str]
    loadavg_start: str
    loadavg_end: str = ""
    big: RunRecord | None = None
    server_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = summarize(self)
        return d


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run(spec: CompareSpec, say: Callable[[str], None] = print) -> CompareResult:
    spec.validate()
    steps = plan(spec)
    entries = spec.entries()
    result = CompareResult(spec=asdict(spec), plan=steps, server_options=dict(SERVER_OPTIONS), prepared={},
                           runs=[], checks={}, missing_peers=spec.missing_peers(), loadavg_start=loadavg())
    boxes: dict[str, Any] = {}
    try:
        for e in entries:
            if e.transport == "socket":
                continue  # shares the procedures row's sandbox and schema
            sb = boxes[e.key] = fresh_sandbox(f"{spec.prefix}-{e.key}")
            try:
                result.prepared[e.key] = prepare(spec, e, sb, say)
            except Exception as exc:
                result.prepared[e.key] = {"error": str(getattr(exc, "msg", exc))[:300]}
                say(f"{e.key}: preparation failed: {result.prepared[e.key]['error']}")
            if not result.server_version:
                result.server_version = sb.version if hasattr(sb, "version") else ""
            sb.stop("clean")
        runnable = [e for e in entries if "error" not in result.prepared.get(_box_key(e), {})]
        for r in range(spec.rounds):
            for e in round_order(runnable, r):
                sb = boxes[_box_key(e)]
                sb.start()
                for clients in spec.clients:
                    rec = measured_run(sb, e, clients, spec.warmup, spec.duration, r + 1)
                    result.runs.append(rec)
                    b = rec.bench or {}
                    say(f"round {r + 1} {e.key} c{clients}: NOPM {b.get('nopm')} TPM {b.get('tpm')} client "
                        f"{b.get('client_cpu_per_kno')} server {b.get('server_cpu_per_kno')} CPU-s/1000 NO "
                        f"errors {rec.driver.get('errors')} {rec.note}")
                sb.stop("clean")
        for e in runnable:
            if e.transport == "socket":
                continue
            sb = boxes[e.key]
            sb.start()
            result.checks[e.key] = consistency(sb, e, spec.warehouses)
            if spec.big_clients and e.key == "innotier-procedures":
                result.big = measured_run(sb, e, spec.big_clients, spec.warmup, spec.duration, 0)
            sb.stop("clean")
    finally:
        result.loadavg_end = loadavg()
        for sb in boxes.values():
            try:
                if sb.state() == sbx.SandboxState.RUNNING:
                    sb.stop("clean")
            except Exception:
                pass
    return result


def _box_key(e: Entry) -> str:
    return "innotier-procedures" if e.transport == "socket" else e.key


# ---------------------------------------------------------------------------
# Summary and rendering


def _stats(vals: list[float | None]) -> dict[str, float] | None:
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": round(statistics.median(vals), 3), "min": min(vals), "max": max(vals), "n": len(vals)}


def summarize(result: CompareResult) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for rec in result.runs:
        out.setdefault(rec.entry, {}).setdefault(rec.clients, {"runs": []})["runs"].append(rec)
    for entry, by_clients in out.items():
        for clients, cell in by_clients.items():
            runs = cell.pop("runs")
            cell.update({k: _stats([(r.bench or {}).get(k) for r in runs])
                         for k in ("nopm", "tpm", "client_cpu_per_kno", "server_cpu_per_kno")})
            cell["errors"] = sum((r.driver.get("errors") or 0) for r in runs)
            cell["incomplete"] = sum(not r.complete for r in runs)
            cell["notes"] = sorted({r.note for r in runs if r.note})
    return out


def render(result: CompareResult) -> str:
    summary = summarize(result)
    lines = [f"server: {result.server_version or 'MariaDB'} {result.server_options}",
             f"load average: {result.loadavg_start} at the start, {result.loadavg_end} at the end",
             "NOPM / TPM counted by the bench from the server in the same window for every driver; "
             "median [min-max] over the rounds"]
    clients_all = sorted({c for by in summary.values() for c in by})
    ref = {"procedures": "hammerdb", "statements": "go-tpc"}
    for clients in clients_all:
        lines.append("")
        lines.append(f"{clients} clients")
        lines.append(f"{'driver':<28}{'NOPM':>26}{'TPM':>26}{'client CPU-s/1000 NO':>24}{'server CPU-s/1000 NO':>24}"
                     f"{'vs peer':>14}")
        for entry, by in summary.items():
            cell = by.get(clients)
            if not cell:
                continue

            def fmt(k, f="{:,.0f}"):
                s = cell.get(k)
                if not s:
                    return "-"
                return f"{f.format(s['median'])} [{f.format(s['min'])}-{f.format(s['max'])}]"

            vs = ""
            mode = "statements" if "statements" in entry else ("procedures" if entry.startswith("innotier") else "")
            peer = summary.get(ref.get(mode, ""), {}).get(clients)
            if peer and peer.get("nopm") and cell.get("nopm"):
                vs = f"{cell['nopm']['median'] / peer['nopm']['median']:.2f}x {ref[mode]}"
            lines.append(f"{entry:<28}{fmt('nopm'):>26}{fmt('tpm'):>26}{fmt('client_cpu_per_kno', '{:.2f}'):>24}"
                         f"{fmt('server_cpu_per_kno', '{:.2f}'):>24}{vs:>14}")
            if cell["errors"] or cell["incomplete"]:
                lines.append(f"{'':<28}errors {cell['errors']}, incomplete runs {cell['incomplete']}")
            for note in cell["notes"][:3]:
                lines.append(f"{'':<28}note: {note[:200]}")
    lines.append("")
    lines.append("load W=4: " + ", ".join(f"{k} {v.get('load_seconds', '-')} s ({v.get('load', v.get('error'))})"
                                          for k, v in result.prepared.items()))
    lines.append("consistency after the runs: " + ", ".join(
        f"{k} {'ok' if v['ok'] else ('n/a' if v['ok'] is None else 'FAILED')}" for k, v in result.checks.items()))
    for k, v in result.checks.items():
        if not v["ok"] and v.get("detail"):
            lines.append(f"  {k} ({v.get('by', 'innotier tpcc check')}): {v['detail'][:300]}")
    for p in result.missing_peers:
        lines.append(f"{p}: not measured (no path given)")
    if result.big is not None:
        b = result.big.bench or {}
        lines.append(f"{result.big.clients} clients (innotier procedures): NOPM {b.get('nopm')}, errors "
                     f"{result.big.driver.get('errors')}, complete {result.big.complete}, client peak RSS "
                     f"{result.big.client_rss_bytes / 2**20:,.0f} MiB {result.big.note}")
    return "\n".join(lines)
