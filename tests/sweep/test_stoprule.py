"""The stop rule, the time-left estimate and the phase clock as plain functions: no server, no clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tuner.core.errors import SweepError
from tuner.core.phases import SweepPhase
from tuner.sweep import stoprule
from tuner.sweep.runner import PhaseClock
from tuner.sweep.spec import StopRule
from tuner.sweep.stats import paired_ratio, Target


@dataclass
class V:
    decided: bool
    name: str = "tmpfs / disk"
    ratio: object = None


RULE = StopRule(budget=600.0, min_blocks=3, max_blocks=6)


def test_never_stops_before_min_blocks_even_when_decided_or_over_budget():
    assert not stoprule.decide(RULE, 2, 10_000.0, [V(True)]).stop
    assert not stoprule.decide(RULE, 0, 0.0, []).stop


def test_stops_when_every_comparison_is_decided_from_min_blocks_on():
    d = stoprule.decide(RULE, 3, 100.0, [V(True), V(True)])
    assert d.stop and d.reason == "target reached: every comparison is decided"
    assert not stoprule.decide(RULE, 3, 100.0, [V(True), V(False)]).stop


def test_stops_when_one_more_block_would_overrun_the_budget_and_says_what_is_open():
    r = paired_ratio([1.3, 1.1, 1.25], [1.0, 1.05, 1.0], Target(min_blocks=3, max_blocks=6))
    d = stoprule.decide(RULE, 3, 480.0, [V(False, ratio=r)])  # 160 s a block: 640 > 600
    assert d.stop and d.reason.startswith("time budget (10 min 00 s): one more block would overrun it; tmpfs / disk: ")
    assert not stoprule.decide(RULE, 3, 420.0, [V(False, ratio=r)]).stop  # 140 s a block: 560 fits


def test_stops_at_max_blocks_and_names_a_comparison_that_could_not_be_computed():
    d = stoprule.decide(RULE, 6, 100.0, [V(False, name="dw=OFF / dw=ON (on tmpfs)")])
    assert d.stop and d.reason == "max_blocks (6) reached; could not be computed: dw=OFF / dw=ON (on tmpfs)"


def test_a_changed_stop_rule_is_refused_and_the_budget_may_change():
    stored = RULE.__dict__ | {"budget": 60.0}
    stoprule.check_unchanged(RULE, stored, "demo-1")  # only the budget differs
    stoprule.check_unchanged(RULE, None, "demo-1")  # first start
    with pytest.raises(SweepError, match=r"run demo-1 started with a different stop rule \(max_blocks 6 -> 8\)"):
        stoprule.check_unchanged(StopRule(budget=600.0, min_blocks=3, max_blocks=8), stored, "demo-1")


def test_time_left_counts_down_within_a_cell_and_never_exceeds_the_budget():
    # 100 s a cell, 4 cells after this one
    assert stoprule.seconds_left(100.0, 4, 0.0, None) == 500.0
    assert stoprule.seconds_left(100.0, 4, 30.0, None) == 470.0  # not the same figure through every phase
    assert stoprule.seconds_left(100.0, 4, 150.0, None) == 400.0  # a slow cell: at least the cells after it
    assert stoprule.seconds_left(100.0, 4, 30.0, 200.0) == 170.0  # the budget ends it sooner
    assert stoprule.seconds_left(100.0, 4, 30.0, 10.0) == 70.0  # never less than the current cell's rest
    assert stoprule.seconds_left(100.0, 0, 0.0, None, golden_extra=60.0) == 160.0


def test_the_phase_clock_books_each_phase_and_reports_every_change():
    now = [0.0]
    seen = []
    clock = PhaseClock(seen.append, clock=lambda: now[0])
    clock.enter(SweepPhase.PREPARE)
    now[0] = 2.0
    clock.enter(SweepPhase.WARMUP)
    now[0] = 7.5
    clock.enter(SweepPhase.MEASURE)
    now[0] = 17.5
    assert clock.elapsed() == 17.5
    assert clock.close() == {SweepPhase.PREPARE: 2.0, SweepPhase.WARMUP: 5.5, SweepPhase.MEASURE: 10.0}
    assert seen == [SweepPhase.PREPARE, SweepPhase.WARMUP, SweepPhase.MEASURE]
