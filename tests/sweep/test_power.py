"""Power planning: blocks needed to decide an effect, from earlier results on this host or an assumed spread."""

from __future__ import annotations

import json
import math
import random

from tuner.sweep.plan import make_plan
from tuner.sweep.power import ASSUMED_SD_LOG, power_plan
from tuner.sweep.results import CellRecord, ResultsStore
from tuner.sweep.spec import load_spec

SPEC = """
name: power
server: {flavor: mariadb}
workload: {warehouses: 1, warmup: 2, duration: 10}
repeats: auto
stop: {budget: 60m, min_blocks: 3, max_blocks: 12}
tiers: {disk: {kind: home}}
fixed: {clients: 2}
axes: {doublewrite: ["ON", "OFF"]}
"""


def _record(store: ResultsStore, plan, blocks: int, sd: float, seconds: float) -> None:
    rng = random.Random(4)
    store.begin_run(plan.run_id, plan.spec.name, plan.spec.digest, "", plan.spec.canonical(), {}, len(plan.cells), {})
    drift = {b: 1 + rng.uniform(-0.3, 0.3) for b in range(1, blocks + 1)}  # the machine, per block
    for c in plan.cells:
        if c.repeat > blocks:
            continue
        v = 10000 * drift[c.repeat] * math.exp(rng.gauss(0, sd))
        store.record_cell(CellRecord(run_id=plan.run_id, cell_id=c.cell_id, idx=c.index, config_key=c.config_key,
                                     repeat=c.repeat, label=c.label, settings=c.settings, status="ok",
                                     started_at=1000.0, finished_at=1000.0 + seconds, result={"tpmc": v},
                                     check_ok=True))


def test_power_from_an_assumed_spread_without_earlier_results(write_spec):
    plan = make_plan(load_spec(write_spec(SPEC)))
    pp = power_plan(plan, None, effect=0.20)
    [row] = pp.rows
    assert row.comparison == "dw=OFF / dw=ON" and row.sd_log == ASSUMED_SD_LOG and "assumed" in row.source
    # an assumed spread has no uncertainty of its own to carry: one count, within the schedule
    assert row.needed.low == row.needed.high and 3 <= row.blocks <= 12
    assert row.to_dict()["seconds"] == row.blocks * pp.block_seconds
    # 10% at the same spread needs more than the stop rule's 12 blocks: said, never advised past the cap
    small = power_plan(plan, None, effect=0.10).rows[0]
    assert small.needed.low is None and small.needed.cap == 12


def test_power_from_earlier_results_uses_their_spread_and_time(write_spec, tmp_path):
    plan = make_plan(load_spec(write_spec(SPEC)))
    with ResultsStore(tmp_path / "r.db") as store:
        _record(store, plan, blocks=4, sd=0.01, seconds=30.0)
        quiet = power_plan(plan, store, effect=0.10)
    with ResultsStore(tmp_path / "r2.db") as store:
        _record(store, plan, blocks=4, sd=0.08, seconds=30.0)
        noisy = power_plan(plan, store, effect=0.10)
    assert "measured" in quiet.rows[0].source and quiet.block_seconds == 60.0  # 2 cells x 30 s
    assert quiet.rows[0].sd_log < noisy.rows[0].sd_log
    # a measured spread from 4 blocks is uncertain: a range, starting at an early look, within the schedule
    assert quiet.rows[0].sd_log < 0.05 and 3 <= quiet.rows[0].needed.low <= quiet.rows[0].needed.high <= 12
    assert quiet.rows[0].blocks < (noisy.rows[0].blocks or 51)  # more spread, more blocks


def test_sweep_plan_prints_the_power_estimate(write_spec, cli):
    out = cli("sweep", "plan", write_spec(SPEC), "--effect", "20%", check=True).stdout
    assert "blocks for 80% power to decide a 20% effect" in out and "dw=OFF / dw=ON" in out
    data = json.loads(cli("sweep", "plan", write_spec(SPEC), "--json", check=True).stdout)
    assert data["power"]["effect"] == 0.10 and data["power"]["rows"][0]["blocks"]["cap"] == 12
    assert data["design"]["adaptive"] and data["design"]["seed"] is not None


def test_budget_option_overrides_the_spec_and_keeps_the_run(write_spec, cli):
    spec = write_spec(SPEC)
    out = cli("sweep", "run", spec, "--budget", "2h", "--dry-run", check=True).stdout
    assert "up to" in out and "power-" in out
    bad = cli("sweep", "run", write_spec(SPEC.replace("repeats: auto", "repeats: 3").replace(
        "stop: {budget: 60m, min_blocks: 3, max_blocks: 12}\n", ""), "fixed.yaml"), "--budget", "10m", "--dry-run")
    assert bad.returncode != 0 and "--budget applies only to specs with repeats: auto" in bad.stderr
    bad = cli("sweep", "run", spec, "--budget", "soon", "--dry-run")
    assert bad.returncode != 0 and "--budget 'soon' is not a duration" in bad.stderr


def test_the_cheap_floor_gives_the_same_counts_and_skips_the_costly_critical_values():
    """A fixed design with a two-way model attached pays a simulation for every count's critical value; the
    schedule's own value (never above it) rules out the counts without power first: same answer, fewer asks."""
    from tuner.sweep.sample_size import blocks_needed
    from tuner.sweep.stats import Target

    target = Target(adaptive=False, comparisons=2, cells=3, contrasts=(((0,), (1,)), ((2,), (1,))))
    asked: list[int] = []

    def critical(k: int) -> float:  # the schedule's value times a switch factor, as Target.critical gives
        asked.append(k)
        return target.schedule_critical(k, 2) * 1.08

    for effect, sd, df in ((math.log(1.35), 0.17, 4), (math.log(1.10), 0.05, 8), (math.log(1.02), 0.3, 2)):
        plain = blocks_needed(effect, sd, df, critical, 2, 4, 50, target.equivalence)
        calls_plain = len(asked)
        asked.clear()
        floored = blocks_needed(effect, sd, df, critical, 2, 4, 50, target.equivalence,
                                floor=lambda k: target.schedule_critical(k, 2))
        assert floored == plain
        assert len(asked) < calls_plain or calls_plain <= 2, (asked, calls_plain)
        asked.clear()
    assert target.critical(6, 2) >= target.schedule_critical(6, 2)  # the floor's premise, on the real factor
