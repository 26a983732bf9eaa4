"""The results store: an embedded SQLite database with everything needed to reproduce a cell.

Default path ``$INNOTIER_HOME/results.db`` (``--results PATH`` or $INNOTIER_RESULTS to change it).
WAL journal mode with ``synchronous=FULL``: a committed cell survives a crash or SIGKILL of the runner
(SQLite docs, "Write-Ahead Logging" and PRAGMA synchronous).  A cell is written in **one transaction**
when it has finished, so the store never holds half a cell: a cell is either absent (and the runner
runs it again from scratch) or complete.

Tables
  runs      one row per sweep run (run_id = spec name + digest of the spec's content): the spec YAML and
            its canonical JSON, the plan, kernel, host, innotier and tool versions.
  cells     one row per finished cell run (a cell x a repeat): settings, status, phase timings, the
            rendered option file, server version and variables, tier facts, golden copy, the final
            RunResult, the consistency-check report, pt-mysql-summary output.
  timeline  the per-interval points of each cell's measured phase.
  io_profiles, tier_costs, advices, placement_checks  created on first use by tuner.placement.store (JSON documents, outside the
            numbered schema; docs/placement.md).

Schema changes are numbered migrations (``MIGRATIONS``): a store at version N gets every migration
above N applied in order, each in its own transaction with the new version number, so an older
results database opens and keeps its rows.  A migration lists the columns it adds and adds only those
a store lacks (``SCHEMA`` creates a fresh store with some of them already).
  v2  cells.host (fleet sweeps merge several hosts' cells into one database)
  v3  runs.design_json (block order, seed, stop rule: written at the run's first start, then only its
      budget changes), runs.stop_json (why and when an adaptive run
      stopped), cells.noise_json (what else used the machine during the measured window) and
      cells.noisy (the window was flagged).
  v4  cells.evidence_json (InnoDB's wait evidence over the measured window: tuner/sweep/evidence.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tuner.core.errors import SweepError
from tuner.core.paths import innotier_home
from tuner.sweep.evidence import evidence_columns

# (version, columns added): each migration adds the columns a store lacks (a database created fresh from
# SCHEMA already has some of them), in one transaction with its version number
MIGRATIONS: list[tuple[int, tuple[tuple[str, str, str], ...]]] = [
    (2, (("cells", "host", "TEXT"),)),  # fleet sweeps merge several hosts' cells into one database
    (3, (("runs", "design_json", "TEXT"), ("runs", "stop_json", "TEXT"),  # block order, seed, stop rule; why stopped
         ("cells", "noise_json", "TEXT"), ("cells", "noisy", "INTEGER"))),  # what else used the machine
    (4, (("cells", "evidence_json", "TEXT"),)),  # InnoDB's own wait evidence over the measured window
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    spec_digest TEXT NOT NULL,
    spec_yaml TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    plan_json TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    finished_at REAL,
    total_cells INTEGER NOT NULL,
    environment_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cells (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    cell_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    config_key TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    label TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    failure TEXT,
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    phases_json TEXT NOT NULL,
    tpmc REAL,
    nopm REAL,
    tpm REAL,
    result_json TEXT,
    check_ok INTEGER,
    check_json TEXT,
    option_file TEXT,
    server_version TEXT,
    variables_json TEXT,
    tiers_json TEXT,
    golden_json TEXT,
    environment_json TEXT,
    pt_summary TEXT,
    host TEXT,
    PRIMARY KEY (run_id, cell_id)
);
CREATE TABLE IF NOT EXISTS timeline (
    run_id TEXT NOT NULL,
    cell_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    t REAL NOT NULL,
    seconds REAL NOT NULL,
    tpmc REAL NOT NULL,
    tpm_total REAL,
    errors INTEGER,
    retries INTEGER,
    latency_json TEXT,
    PRIMARY KEY (run_id, cell_id, seq),
    FOREIGN KEY (run_id, cell_id) REFERENCES cells(run_id, cell_id)
);
"""

INSERT_RUN = """
INSERT INTO runs (run_id, name, spec_digest, spec_yaml, spec_json, plan_json, created_at, updated_at,
                  total_cells, environment_json, design_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(run_id) DO UPDATE SET updated_at = excluded.updated_at, plan_json = excluded.plan_json,
                                  total_cells = excluded.total_cells,
                                  design_json = COALESCE(runs.design_json, excluded.design_json)
"""
SET_BUDGET = "UPDATE runs SET design_json = json_set(design_json, '$.stop.budget', ?) WHERE run_id = ?"
REPLACE_CELL = """
INSERT OR REPLACE INTO cells (run_id, cell_id, idx, config_key, repeat, label, settings_json, status, failure,
    started_at, finished_at, phases_json, tpmc, nopm, tpm, result_json, check_ok, check_json, option_file,
    server_version, variables_json, tiers_json, golden_json, environment_json, pt_summary, host, noise_json, noisy,
    evidence_json)
VALUES (:run_id, :cell_id, :idx, :config_key, :repeat, :label, :settings_json, :status, :failure,
    :started_at, :finished_at, :phases_json, :tpmc, :nopm, :tpm, :result_json, :check_ok, :check_json,
    :option_file, :server_version, :variables_json, :tiers_json, :golden_json, :environment_json, :pt_summary, :host,
    :noise_json, :noisy, :evidence_json)
"""
DELETE_TIMELINE = "DELETE FROM timeline WHERE run_id = ? AND cell_id = ?"
INSERT_POINT = """
INSERT INTO timeline (run_id, cell_id, seq, t, seconds, tpmc, tpm_total, errors, retries, latency_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
FINISHED_CELLS = "SELECT cell_id FROM cells WHERE run_id = ? AND status = 'ok'"
MARK_FINISHED = "UPDATE runs SET finished_at = ?, updated_at = ?, stop_json = ? WHERE run_id = ?"
LIST_RUNS = """
SELECT r.run_id, r.name, r.created_at, r.updated_at, r.finished_at, r.total_cells,
       (SELECT COUNT(*) FROM cells c WHERE c.run_id = r.run_id AND c.status = 'ok') AS ok_cells,
       (SELECT COUNT(*) FROM cells c WHERE c.run_id = r.run_id AND c.status = 'failed') AS failed_cells
FROM runs r ORDER BY r.created_at
"""


# the evidence columns an export adds (the pressure columns are noise_columns' already)
EXPORTED = ("free_page_waits", "lru_flushed", "lru_freed", "flush_list_flushed", "pages_flushed", "log_waits",
            "row_lock_waits", "row_lock_time_ms", "os_waits", "spin_rounds", "pending_fsyncs", "checkpoint_age",
            "free_pages_min", "lock_waiters_max", "page_cleaner_warnings")


def noise_columns(noise: dict[str, Any] | None) -> dict[str, Any]:
    """The noise of one cell run as flat columns (export, report)."""
    w = (noise or {}).get("window") or {}
    p = (noise or {}).get("probe") or {}
    psi = w.get("psi") or {}
    return {"others_cpu_share": w.get("others_cpu_share"), "others_cores": w.get("others_cores"),
            "steal_share": w.get("steal_share"), "load1_end": (w.get("loadavg_end") or [None])[0],
            "psi_cpu_some": (psi.get("cpu") or {}).get("some_stall_share"),
            "psi_io_some": (psi.get("io") or {}).get("some_stall_share"),
            "probe_cpu_s": p.get("cpu_loop_s"), "probe_fsync_ms": p.get("fsync_ms_median"),
            "noisy": w.get("flagged"), "waited_quiet_s": ((noise or {}).get("wait") or {}).get("waited_s")}


def default_results_path() -> Path:
    env = os.environ.get("INNOTIER_RESULTS")
    if env:
        return Path(env).expanduser()

    return innotier_home() / "results.db"


@dataclass
class CellRecord:
    """Everything stored about one finished (or failed) cell run."""

    run_id: str
    cell_id: str
    idx: int
    config_key: str
    repeat: int
    label: str
    settings: dict[str, Any]
    status: str  # ok | failed
    started_at: float
    finished_at: float
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    failure: str | None = None
    result: dict[str, Any] | None = None  # RunResult.to_dict()
    check: dict[str, Any] | None = None
    check_ok: bool | None = None
    option_file: str | None = None
    server_version: str | None = None
    variables: dict[str, str] | None = None
    tiers: dict[str, Any] | None = None
    golden: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    pt_summary: str | None = None
    host: str | None = None  # the fleet host that ran the cell (None: this machine)
    noise: dict[str, Any] | None = None  # tuner.sweep.noise figures of the measured window, and the probe
    evidence: dict[str, Any] | None = None  # tuner.sweep.evidence: the server's wait evidence over that window

    @property
    def block(self) -> int:
        """Each repeat is a block that runs every cell once."""
        return self.repeat

    @property
    def noisy(self) -> bool | None:
        w = (self.noise or {}).get("window") or {}
        return None if "flagged" not in w else bool(w["flagged"])

    @property
    def tpmc(self) -> float | None:
        return (self.result or {}).get("tpmc")

    @property
    def timeline(self) -> list[dict[str, Any]]:
        return list((self.result or {}).get("timeline") or [])


def _j(obj: Any) -> str | None:
    return None if obj is None else json.dumps(obj, sort_keys=True, default=str)


def _u(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class ResultsStore:
    """The SQLite results database (one connection per store object; not shared across processes)."""

    def __init__(self, path: str | os.PathLike | None = None, create: bool = True) -> None:
        self.path = Path(path) if path else default_results_path()
        if not create and not self.path.exists():
            raise SweepError(f"no results database at {self.path}; run a sweep first "
                             "(`innotier sweep run SPEC`) or give --results PATH")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.executescript(SCHEMA)
        self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1')")
        self._migrate()
        os.chmod(self.path, 0o644)

    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])

    def _migrate(self) -> None:
        """Bring a database written by an older innotier to this schema (additive changes only)."""
        current = self.schema_version
        if current > SCHEMA_VERSION:
            raise SweepError(f"results database {self.path} has schema version {current}, newer than this innotier "
                             f"knows ({SCHEMA_VERSION}); upgrade innotier or give another --results PATH")
        for version, columns in MIGRATIONS:
            if version <= current:
                continue
            with self._tx():
                for table, column, kind in columns:
                    if column not in {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}:
                        self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing -------------------------------------------------------------

    def begin_run(self, run_id: str, name: str, digest: str, spec_yaml: str, spec_json: dict,
                  plan_json: dict, total_cells: int, environment: dict, design: dict | None = None) -> None:
        now = time.time()
        with self._tx():
            self.conn.execute(INSERT_RUN, (run_id, name, digest, spec_yaml, _j(spec_json), _j(plan_json), now, now,
                                           total_cells, _j(environment), _j(design)))

    def set_budget(self, run_id: str, budget: float) -> None:
        """The one part of a stored stop rule that may change on resume."""
        with self._tx():
            self.conn.execute(SET_BUDGET, (budget, run_id))

    def record_cell(self, rec: CellRecord) -> None:
        """Write one cell, its environment and its timeline in a single transaction."""
        row = {
            "run_id": rec.run_id, "cell_id": rec.cell_id, "idx": rec.idx, "config_key": rec.config_key,
            "repeat": rec.repeat, "label": rec.label, "settings_json": _j(rec.settings), "status": rec.status,
            "failure": rec.failure, "started_at": rec.started_at, "finished_at": rec.finished_at,
            "phases_json": _j(rec.phases), "tpmc": (rec.result or {}).get("tpmc"),
            "nopm": (rec.result or {}).get("nopm"), "tpm": (rec.result or {}).get("tpm"),
            "result_json": _j(rec.result), "check_ok": None if rec.check_ok is None else int(rec.check_ok),
            "check_json": _j(rec.check), "option_file": rec.option_file, "server_version": rec.server_version,
            "variables_json": _j(rec.variables), "tiers_json": _j(rec.tiers), "golden_json": _j(rec.golden),
            "environment_json": _j(rec.environment), "pt_summary": rec.pt_summary, "host": rec.host,
            "noise_json": _j(rec.noise), "noisy": None if rec.noisy is None else int(rec.noisy),
            "evidence_json": _j(rec.evidence),
        }
        with self._tx():
            self.conn.execute(DELETE_TIMELINE, (rec.run_id, rec.cell_id))
            self.conn.execute(REPLACE_CELL, row)
            for seq, p in enumerate(rec.timeline):
                self.conn.execute(INSERT_POINT, (rec.run_id, rec.cell_id, seq, p.get("t", 0.0), p.get("seconds", 0.0),
                                                 p.get("tpmc", 0.0), p.get("tpm_total"), p.get("errors"),
                                                 p.get("retries"), _j(p.get("latency_ms"))))

    def finish_run(self, run_id: str, stop: dict | None = None) -> None:
        now = time.time()
        with self._tx():
            self.conn.execute(MARK_FINISHED, (now, now, _j(stop), run_id))

    class _Tx:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> None:
            self.conn.execute("BEGIN IMMEDIATE")

        def __exit__(self, exc_type, *rest: Any) -> None:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> "_Tx":
        return ResultsStore._Tx(self.conn)

    # -- reading -------------------------------------------------------------

    def finished_cell_ids(self, run_id: str) -> set[str]:
        return {r[0] for r in self.conn.execute(FINISHED_CELLS, (run_id,))}

    def run_design(self, run_id: str) -> dict[str, Any] | None:
        """The design stored at the run's first start (None: no such run yet)."""
        row = self.conn.execute("SELECT design_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _u(row[0])

    def list_runs(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute(LIST_RUNS)]

    def run(self, run_id: str) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            row = self._run_by_prefix(run_id)
        d = dict(row)
        d["spec"] = _u(d.pop("spec_json"))
        d["plan"] = _u(d.pop("plan_json"))
        d["environment"] = _u(d.pop("environment_json"))
        d["design"] = _u(d.pop("design_json"))
        d["stop"] = _u(d.pop("stop_json"))
        return d

    def _run_by_prefix(self, text: str) -> sqlite3.Row:
        rows = self.conn.execute("SELECT * FROM runs WHERE run_id LIKE ? OR name = ? ORDER BY created_at DESC",
                                 (text + "%", text)).fetchall()
        if not rows:
            known = ", ".join(r["run_id"] for r in self.list_runs()) or "none"
            raise SweepError(f"no run {text!r} in {self.path} (runs: {known}); see `innotier results list`")
        return rows[0]  # a spec name picks its newest run

    def resolve_run_id(self, text: str) -> str:
        return self.run(text)["run_id"]

    def cells(self, run_id: str, include_failed: bool = True) -> list[CellRecord]:
        q = "SELECT * FROM cells WHERE run_id = ?" + ("" if include_failed else " AND status = 'ok'")
        out = []
        for r in self.conn.execute(q + " ORDER BY idx", (run_id,)):
            out.append(self._cell(r))
        return out

    def _cell(self, r: sqlite3.Row) -> CellRecord:
        return CellRecord(
            run_id=r["run_id"], cell_id=r["cell_id"], idx=r["idx"], config_key=r["config_key"], repeat=r["repeat"],
            label=r["label"], settings=_u(r["settings_json"]), status=r["status"], started_at=r["started_at"],
            finished_at=r["finished_at"], phases=_u(r["phases_json"]) or {}, failure=r["failure"],
            result=_u(r["result_json"]), check=_u(r["check_json"]),
            check_ok=None if r["check_ok"] is None else bool(r["check_ok"]), option_file=r["option_file"],
            server_version=r["server_version"], variables=_u(r["variables_json"]), tiers=_u(r["tiers_json"]),
            golden=_u(r["golden_json"]), environment=_u(r["environment_json"]), pt_summary=r["pt_summary"],
            host=r["host"], noise=_u(r["noise_json"]), evidence=_u(r["evidence_json"]))

    def cell(self, run_id: str, cell_id: str) -> CellRecord:
        r = self.conn.execute("SELECT * FROM cells WHERE run_id = ? AND (cell_id = ? OR cell_id LIKE ?) "
                              "ORDER BY idx", (run_id, cell_id, cell_id + "%")).fetchone()
        if r is None and cell_id.isdigit():
            r = self.conn.execute("SELECT * FROM cells WHERE run_id = ? AND idx = ?", (run_id, int(cell_id))).fetchone()
        if r is None:
            raise SweepError(f"run {run_id} has no cell {cell_id!r}; see `innotier results show {run_id}`")
        return self._cell(r)

    def timeline(self, run_id: str, cell_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM timeline WHERE run_id = ? AND cell_id = ? ORDER BY seq",
                                 (run_id, cell_id))
        return [{**{k: r[k] for k in ("seq", "t", "seconds", "tpmc", "tpm_total", "errors", "retries")},
                 "latency_ms": _u(r["latency_json"])} for r in rows]

    def integrity_check(self) -> str:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0]

    def iter_export_rows(self, run_id: str) -> Iterator[dict[str, Any]]:
        """Flat rows (one per cell run) for CSV/JSON export."""
        for c in self.cells(run_id):
            lat = ((c.result or {}).get("latency_ms") or {}).get("new_order") or {}
            row = {"run_id": c.run_id, "cell_id": c.cell_id, "host": c.host, "idx": c.idx, "config_key": c.config_key,
                   "repeat": c.repeat, "label": c.label, "status": c.status, "failure": c.failure,
                   "tpmc": c.tpmc, "nopm": (c.result or {}).get("nopm"), "tpm": (c.result or {}).get("tpm"),
                   "new_order_p50_ms": lat.get("p50"), "new_order_p95_ms": lat.get("p95"),
                   "new_order_p99_ms": lat.get("p99"), "errors": (c.result or {}).get("errors"),
                   "check_ok": c.check_ok, "server_version": c.server_version,
                   "measured_seconds": (c.result or {}).get("measured_seconds"), "block": c.block,
                   **noise_columns(c.noise),
                   **{f"evidence.{k}": v for k, v in evidence_columns(c.evidence).items() if k in EXPORTED}}
            for k, v in sorted(c.settings.items()):
                if k == "options":
                    for o, ov in sorted((v or {}).items()):
                        row[f"option.{o}"] = ov
                elif k == "placement":
                    row["placement"] = json.dumps(v, sort_keys=True)
                else:
                    row[k] = v
            yield row
