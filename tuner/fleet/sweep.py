"""`innotier fleet sweep SPEC -i INVENTORY`: the same sweep on every `db` host, merged into one results DB.

spec -> plan (FleetSweepPlan: each host's copy of the spec with its tiers on the directories its host
variables name; printable) -> apply (the sweep playbook, all hosts in parallel, progress per host) ->
each host's results database fetched (a SQLite backup, so committed cells in the WAL come too) ->
merge into one database where every cell carries its host (``cells.host``, ``settings.host`` and a
``host`` axis), so ``innotier sweep report`` compares hosts the way it compares settings.

A host that fails or drops out is reported; the cells it finished stay on it (its own results database,
where the sweep runner resumes) and in the merged database if a copy came back.  Running the command again
resumes every host where it stopped: a finished host runs nothing, the others only their missing cells.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from tuner.core.errors import FleetError
from tuner.core.paths import innotier_home
from tuner.fleet.inventory import Inventory
from tuner.fleet.runner import PlaybookRun, Progress, run_playbook
from tuner.sweep.plan import expand, make_plan
from tuner.sweep.results import CellRecord, ResultsStore
from tuner.sweep.spec import SweepSpec, load_spec, resolve_spec_path


@dataclass
class FleetSweepPlan:
    spec: SweepSpec
    hosts: list[str]
    host_specs: dict[str, Path]  # controller copies, one per host
    placed: dict[str, dict[str, str]]  # host -> tier name -> directory on that host
    out: Path
    results: Path
    timeout: int

    @property
    def run_id(self) -> str:
        return f"{self.spec.name}-fleet-{self.spec.digest[:10]}"

    def describe(self) -> str:
        lines = [f"fleet sweep {self.spec.name} on {len(self.hosts)} hosts (merged run {self.run_id}, "
                 f"results {self.results})"]
        for h in self.hosts:
            tiers = ", ".join(f"{k} -> {v}" for k, v in sorted(self.placed[h].items())) or "the spec's own tiers"
            lines.append(f"  {h}: {tiers}")
        return "\n".join(lines)

    def extravars(self) -> dict[str, Any]:
        return {"fleet_specs": str(self.out / "specs"), "fleet_out": str(self.out), "fleet_name": self.spec.name,
                "fleet_timeout": self.timeout, "fleet_hosts": ",".join(self.hosts)}


def host_spec_doc(doc: dict, tiers: dict[str, str]) -> tuple[dict, dict[str, str]]:
    """The spec document with every tier the host names in ``innotier_tiers`` placed on that directory."""
    d = json.loads(json.dumps(doc))  # deep copy of plain YAML data
    placed = {}
    for name, path in tiers.items():
        if name in (d.get("tiers") or {}):
            keep = {k: v for k, v in d["tiers"][name].items() if k in ("note", "optional")}
            d["tiers"][name] = {"kind": "path", "path": path, **keep}
            placed[name] = path
    return d, placed


def plan(inv: Inventory, spec_ref: str, out: Path | None = None, results: Path | None = None,
         group: str = "db") -> FleetSweepPlan:
    spec = load_spec(spec_ref)  # the whole spec is validated here, once, before any host is touched
    doc = yaml.safe_load(resolve_spec_path(spec_ref).read_text())
    hosts = inv.require_group(group)
    out = out or innotier_home() / "fleet" / f"sweep-{spec.name}"
    (out / "specs").mkdir(parents=True, exist_ok=True)
    host_specs, placed = {}, {}
    for h in hosts:
        d, placed[h.name] = host_spec_doc(doc, h.tiers)
        p = out / "specs" / f"{h.name}.yaml"
        p.write_text(f"# {spec.name} for fleet host {h.name} (written by innotier fleet sweep)\n"
                     + yaml.safe_dump(d, sort_keys=False))
        host_specs[h.name] = p
    estimate = make_plan(spec).estimate_seconds
    return FleetSweepPlan(spec=spec, hosts=[h.name for h in hosts], host_specs=host_specs, placed=placed, out=out,
                          results=Path(results) if results else innotier_home() / "results.db",
                          timeout=int(estimate * 3 + 900))


# ---------------------------------------------------------------------------
# Merge


def host_facts(ansible_facts: dict[str, Any], tiers: Any = None) -> dict[str, Any]:
    """The hardware facts a comparison between hosts needs, from Ansible's setup module."""
    f = ansible_facts or {}

    def get(name: str) -> Any:  # the setup module's keys carry the ansible_ prefix, the fact cache's not
        return f.get(f"ansible_{name}", f.get(name))

    proc = get("processor") or []
    model = next((p for p in proc[2::3] if p), None) if len(proc) >= 3 else (proc[-1] if proc else None)
    distro = " ".join(str(x) for x in (get("distribution"), get("distribution_version")) if x)
    return {"cpu_model": model, "cpus": get("processor_vcpus"), "cores": get("processor_cores"),
            "memory_mb": get("memtotal_mb"), "kernel": get("kernel"), "distribution": distro or None,
            "hostname": get("hostname"), "tiers": tiers}


def snapshot_results(src: Path, dst: Path) -> int:
    """A consistent copy of a results database (SQLite online backup: committed cells in the WAL too).
    Returns the number of finished cells copied."""
    if not src.exists():
        raise FleetError(f"no results database at {src}; the sweep has not finished a cell on this host yet")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(tmp)
    try:
        s.backup(d)
        n = d.execute("SELECT COUNT(*) FROM cells WHERE status = 'ok'").fetchone()[0]
    finally:
        d.close()
        s.close()
    tmp.replace(dst)
    return n


def merge_host_db(dest: ResultsStore, plan: FleetSweepPlan, host: str, db: Path, facts: dict[str, Any]) -> int:
    """Copy one host's cells of this sweep into the merged run, each keyed and labelled by host."""
    src = ResultsStore(db, create=False)
    try:
        runs = [r for r in src.list_runs() if r["name"] == plan.spec.name]
        if not runs:
            return 0
        run = src.run(runs[-1]["run_id"])
        n = 0
        for c in src.cells(run["run_id"]):
            rec = CellRecord(**{**c.__dict__})
            rec.run_id = plan.run_id
            rec.cell_id = f"{host}/{c.cell_id}"
            rec.config_key = f"{host}|{c.config_key}"
            rec.label = f"host={host}, {c.label}" if c.label else f"host={host}"
            rec.settings = {"host": host, **c.settings}
            rec.environment = {**(c.environment or {}), "host": host, "host_facts": facts,
                               "host_run_id": run["run_id"]}
            rec.host = host
            dest.record_cell(rec)
            n += 1
        return n
    finally:
        src.close()


def begin_merged_run(dest: ResultsStore, plan: FleetSweepPlan, facts: dict[str, dict]) -> None:
    spec_json = plan.spec.canonical()
    spec_json["axes"] = {"host": list(plan.hosts), **(spec_json.get("axes") or {})}
    per_host = len(expand(plan.spec))
    dest.begin_run(plan.run_id, plan.spec.name, plan.spec.digest, plan.spec.text, spec_json,
                   {"fleet": {"hosts": plan.hosts, "placed": plan.placed}}, per_host * len(plan.hosts),
                   {"fleet": facts, "merged_at": time.time()})


@dataclass
class FleetSweepOutcome:
    plan: FleetSweepPlan
    playbook: PlaybookRun
    merged_cells: dict[str, int] = field(default_factory=dict)  # host -> cells in the merged run

    @property
    def failed(self) -> list[str]:
        return [o.host for o in self.playbook.failed_hosts]

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.plan.run_id, "results": str(self.plan.results), "cells": self.merged_cells,
                "hosts": {h: o.to_dict() for h, o in self.playbook.hosts.items()}}


def apply(plan: FleetSweepPlan, inventory: str | Path, echo: Callable[[str], None] | None = None) -> FleetSweepOutcome:
    progress = Progress(echo) if echo else Progress()
    run = run_playbook("sweep", inventory, plan.extravars(), plan.out / "ansible", on_event=progress,
                       timeout=plan.timeout + 300)
    facts = {}
    for h in plan.hosts:
        tiers_file = plan.out / h / "tiers.json"
        tiers = None
        if tiers_file.is_file():
            try:
                tiers = json.loads(tiers_file.read_text())
            except ValueError:
                tiers = None
        facts[h] = host_facts(run.facts.get(h) or {}, tiers)
    outcome = FleetSweepOutcome(plan=plan, playbook=run)
    dest = ResultsStore(plan.results)
    try:
        begin_merged_run(dest, plan, facts)
        for h in plan.hosts:
            db = plan.out / h / "results.db"
            if db.is_file():
                merge_host_db(dest, plan, h, db, facts[h])
        for h in plan.hosts:
            outcome.merged_cells[h] = sum(1 for c in dest.cells(plan.run_id) if c.host == h and c.status == "ok")
        if not outcome.failed and all(o.status == "ok" for o in run.hosts.values()) and \
                len(dest.finished_cell_ids(plan.run_id)) == dest.run(plan.run_id)["total_cells"]:
            dest.finish_run(plan.run_id)
    finally:
        dest.close()
    return outcome
