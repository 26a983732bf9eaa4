"""`innotier fleet tpcc`: one TPC-C run driven by shards on the inventory's `drivers` hosts.

spec (FleetTpccSpec) -> plan (FleetTpccPlan: which host runs which shard, the shared start, the
shard command line; printable) -> apply (the tpcc_shards playbook through ansible-runner) -> the shards'
JSON results fetched to the controller -> one merged RunResult (tuner.fleet.merge).
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner.core.errors import FleetError, UsageError
from tuner.core.measure import RunResult
from tuner.core.paths import innotier_home
from tuner.fleet.inventory import Inventory
from tuner.fleet.merge import merge_results
from tuner.fleet.runner import PlaybookRun, Progress, run_playbook
from tuner.tpcc.config import MODES


@dataclass
class FleetTpccSpec:
    server_host: str  # the server under test as the driver hosts reach it
    server_port: int
    defaults_file: str  # controller path, 0600, [client] user and password
    clients: int  # the fleet's total
    warmup: float = 10.0
    duration: float = 60.0
    interval: float = 10.0
    mode: str = "procedures"
    database: str = "tpcc"
    warehouses: int | None = None
    workers: int | None = None  # per shard
    lead: float = 45.0  # seconds from now to the shared start (SSH, copy, connect)
    metrics_linger: float = 0.0
    group: str = "drivers"

    def validate(self) -> "FleetTpccSpec":
        if self.mode not in MODES:
            raise UsageError(f"--mode {self.mode!r} is unknown; use procedures or statements")
        if self.lead < 5:
            raise UsageError(f"--lead {self.lead:g} is too short for SSH and connecting; give 5 s or more")
        p = Path(self.defaults_file)
        if not p.is_file():
            raise UsageError(f"--defaults-file {p} does not exist; write a [client] section with user and "
                             "password to a file with mode 0600")
        if stat.S_IMODE(p.stat().st_mode) & 0o077:
            raise UsageError(f"--defaults-file {p} is readable by others (mode {stat.S_IMODE(p.stat().st_mode):o}); "
                             f"chmod 600 {p}")
        return self


@dataclass
class FleetTpccPlan:
    run_id: str
    shards: dict[str, int]  # host -> shard index
    start_at: float
    args: str  # the `tpcc run` arguments every shard shares (no secret)
    out: Path
    timeout: int
    spec: FleetTpccSpec = field(repr=False)

    def describe(self) -> str:
        lines = [f"fleet tpcc run {self.run_id}: {len(self.shards)} shards, {self.spec.clients} clients in total, "
                 f"shared start {time.strftime('%H:%M:%S', time.gmtime(self.start_at))} UTC",
                 f"  every shard: innotier tpcc run {self.args} --shard I/{len(self.shards)} --start-at {self.start_at:.3f}"]
        for h, i in sorted(self.shards.items(), key=lambda kv: kv[1]):
            lines.append(f"  shard {i}/{len(self.shards)} on {h}")
        lines.append(f"  results: {self.out}")
        return "\n".join(lines)

    def extravars(self) -> dict[str, Any]:
        return {"fleet_run_id": self.run_id, "fleet_out": str(self.out), "fleet_shards": self.shards,
                "fleet_shard_count": len(self.shards), "fleet_start_at": f"{self.start_at:.3f}",
                "fleet_timeout": self.timeout, "fleet_defaults_file": str(Path(self.spec.defaults_file).resolve()),
                "fleet_args": self.args, "fleet_metrics_linger": self.spec.metrics_linger,
                "fleet_hosts": self.spec.group}


def shard_args(spec: FleetTpccSpec) -> str:
    a = ["--host", spec.server_host, "--port", str(spec.server_port), "--database", spec.database,
         "--clients", str(spec.clients), "--warmup", f"{spec.warmup:g}", "--duration", f"{spec.duration:g}",
         "--interval", f"{spec.interval:g}", "--mode", spec.mode]
    if spec.warehouses:
        a += ["--warehouses", str(spec.warehouses)]
    if spec.workers:
        a += ["--workers", str(spec.workers)]
    return shlex.join(a)


def plan(inv: Inventory, spec: FleetTpccSpec, out: Path | None = None, now: float | None = None) -> FleetTpccPlan:
    spec.validate()
    hosts = inv.require_group(spec.group)
    if spec.clients < len(hosts):
        raise UsageError(f"--clients {spec.clients} is fewer than the {len(hosts)} driver hosts; give at least "
                         "one client per shard")
    now = time.time() if now is None else now
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    out = out or innotier_home() / "fleet" / f"tpcc-{run_id}"
    timeout = int(spec.lead + spec.warmup + spec.duration + spec.metrics_linger + 180)
    return FleetTpccPlan(run_id=run_id, shards={h.name: i for i, h in enumerate(hosts)}, start_at=now + spec.lead,
                         args=shard_args(spec), out=Path(out), timeout=timeout, spec=spec)


@dataclass
class FleetTpccOutcome:
    result: RunResult | None
    playbook: PlaybookRun
    shard_results: dict[str, RunResult]

    def to_dict(self) -> dict[str, Any]:
        return {"result": self.result.to_dict() if self.result else None,
                "hosts": {h: o.to_dict() for h, o in self.playbook.hosts.items()},
                "artifacts": str(self.playbook.artifacts)}


def apply(p: FleetTpccPlan, inventory: str | Path, echo: Callable[[str], None] | None = None) -> FleetTpccOutcome:
    """Run the shards, fetch and merge their results.  A shard that failed is reported; the merge refuses
    to pretend: the result then has ``complete=False`` and names the missing shards."""
    p.out.mkdir(parents=True, exist_ok=True)
    os.chmod(p.out, 0o700)
    progress = Progress(echo) if echo else Progress()
    run = run_playbook("tpcc_shards", inventory, p.extravars(), p.out / "ansible", on_event=progress,
                       timeout=p.timeout + 60)
    results: dict[str, RunResult] = {}
    for host in p.shards:
        f = p.out / f"{host}.json"
        if f.is_file():
            results[host] = RunResult.from_dict(json.loads(f.read_text()))
    if not results:
        msgs = "; ".join(f"{o.host}: {o.message}" for o in run.failed_hosts) or "no host returned a result"
        raise FleetError(f"no shard produced a result ({msgs}); fix the cause and run again")
    hosts = sorted(results, key=lambda h: p.shards[h])
    merged = merge_results([results[h] for h in hosts], hosts=hosts)
    missing = sorted(set(p.shards) - set(results))
    if missing:
        merged.complete = False
        note = f"shards on {', '.join(missing)} returned no result (the figures cover the other shards only)"
        merged.failure = f"{merged.failure}; {note}" if merged.failure else note
    merged.extra["run_id"] = p.run_id
    merged.extra["hosts"] = {h: o.to_dict() for h, o in run.hosts.items()}
    return FleetTpccOutcome(result=merged, playbook=run, shard_results=results)
