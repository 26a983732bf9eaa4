"""Power planning for ``sweep plan``: how many blocks would decide an effect of a given size, and the time.

The spread that matters is that of the per-block log-ratios of the comparisons the report makes (drift
between blocks cancels in them).  It is taken from earlier results on this host when there are any: the
same run (a resumed sweep), else the newest run of a spec with the same name, else the newest run with
the same axes; otherwise an assumed spread (``ASSUMED_SD_LOG``, the paired spread measured by the demo
on a shared 2-core VM, stated as assumed).  The time per block comes from the same earlier cells, else
from the plan's per-cell estimate.  The count is for 80% power at the schedule's critical values (so it
pays for the looks and the family) and a range over the measured spread's uncertainty; it is capped by
the stop rule's max_blocks, which is fixed at a run's first start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuner.core.units import format_duration
from tuner.sweep.analysis import configs_from, family_target, model_fit, questions
from tuner.sweep.plan import Plan, cell_seconds
from tuner.sweep.results import CellRecord, ResultsStore
from tuner.sweep.sample_size import BlocksNeeded, blocks_needed

# sd of per-block log-ratios of paired comparisons (demo cells, 20 s measured windows, load 6-10 on 2
# cores); used only when this host has no earlier results for the spec
ASSUMED_SD_LOG = 0.10


@dataclass
class PowerRow:
    comparison: str
    sd_log: float
    source: str  # "measured (run ..., N blocks)" or "assumed"
    needed: BlocksNeeded  # total blocks for 80% power, over the spread's uncertainty
    block_seconds: float

    @property
    def blocks(self) -> int | None:
        """Blocks at the high end of the spread (None: beyond the schedule)."""
        return self.needed.high

    def to_dict(self) -> dict[str, Any]:
        return {"comparison": self.comparison, "sd_log": self.sd_log, "source": self.source,
                "blocks": self.needed.to_dict(), "seconds": None if self.blocks is None else
                self.blocks * self.block_seconds}


@dataclass
class PowerPlan:
    effect: float
    block_seconds: float
    block_source: str
    rows: list[PowerRow]
    max_blocks: int | None = None  # repeats: auto

    def to_dict(self) -> dict[str, Any]:
        return {"effect": self.effect, "block_seconds": self.block_seconds, "block_source": self.block_source,
                "rows": [r.to_dict() for r in self.rows], "max_blocks": self.max_blocks}


def _earlier_run(store: ResultsStore, plan: Plan) -> str | None:
    runs = store.list_runs()
    for r in runs:
        if r["run_id"] == plan.run_id and r["ok_cells"]:
            return r["run_id"]
    same = [r for r in runs if r["name"] == plan.spec.name and r["ok_cells"]]
    if same:
        return max(same, key=lambda r: r["created_at"])["run_id"]
    return None


def power_plan(plan: Plan, store: ResultsStore | None, effect: float = 0.10) -> PowerPlan:
    """Blocks for 80% power to decide a ``effect`` (e.g. 0.10: 10%) difference in each planned comparison."""
    spec = plan.spec
    target = family_target(spec.target(), spec.axes, spec.exclude, spec.fixed)
    n_configs = len({c.config_key for c in plan.cells})
    block_seconds = cell_seconds(spec, plan.datadir_bytes) * n_configs
    block_source = "estimated from the plan"
    measured: dict[str, tuple[float, int | None, int, str]] = {}
    run_id = _earlier_run(store, plan) if store is not None else None
    if run_id:
        cells = [c for c in store.cells(run_id) if c.status == "ok"]
        blocks = len({c.block for c in cells})
        configs = configs_from(cells, spec.axes)
        tw = model_fit(configs)
        for v in questions(configs, spec.axes, target, spec.exclude, spec.fixed):
            if v.ratio is not None and v.ratio.sd_log is not None:
                per_block = tw.df_per_block if v.ratio.method == "two-way model" and tw else 1
                measured[v.name] = (v.ratio.sd_log, v.ratio.df, per_block, f"measured (run {run_id}, {blocks} blocks)")
        durations = [c.finished_at - c.started_at - (c.phases or {}).get("golden", 0.0) for c in cells]
        if durations:
            block_seconds = sum(durations) / len(durations) * n_configs
            block_source = f"measured ({len(durations)} cell runs of run {run_id})"
    cap = spec.repeats if spec.adaptive else 50
    rows = []
    for name in _comparison_names(plan):
        sd, df, per_block, source = measured.get(name, (ASSUMED_SD_LOG, None, 1, "assumed: no earlier results for "
                                                        "this spec here"))
        need = blocks_needed(math.log1p(effect), sd, df, lambda k, pb=per_block: target.critical(k, pb), per_block,
                             target.min_blocks if spec.adaptive else 2, cap, target.equivalence,
                             floor=lambda k, pb=per_block: target.schedule_critical(k, pb))
        rows.append(PowerRow(name, sd, source, need, block_seconds))
    return PowerPlan(effect, block_seconds, block_source, rows, spec.repeats if spec.adaptive else None)


def _comparison_names(plan: Plan) -> list[str]:
    """The comparisons the report will make, named as the report names them (from a synthetic run)."""
    fake = []
    for b in (1, 2):
        for i, c in enumerate({c.config_key: c for c in plan.cells}.values()):
            fake.append(CellRecord(run_id="plan", cell_id=f"{c.config_key}-r{b}", idx=i, config_key=c.config_key,
                                   repeat=b, label=c.label, settings=c.settings, status="ok", started_at=0.0,
                                   finished_at=0.0, result={"tpmc": 1000.0 + i}, check_ok=True))
    return [v.name for v in questions(configs_from(fake, plan.spec.axes), plan.spec.axes,
                                            exclude=plan.spec.exclude, fixed=plan.spec.fixed)]


def print_power(pp: PowerPlan, echo=print) -> None:
    echo(f"power: blocks for 80% power to decide a {pp.effect * 100:.0f}% effect (one block: about "
         f"{format_duration(pp.block_seconds)}, {pp.block_source})")
    for r in pp.rows:
        n = r.needed
        if n.low is None:
            need = f"more than the {n.cap} blocks the schedule allows"
        elif n.high is None:
            need = f"{n.low} to more than the {n.cap} blocks the schedule allows"
        else:
            span = f"{n.low}" if n.low == n.high else f"{n.low}-{n.high}"
            need = f"{span} blocks, up to about {format_duration(n.high * r.block_seconds)}"
        echo(f"  {r.comparison}: sd of log-ratios {r.sd_log:.3f}, {r.source}: {need}")
