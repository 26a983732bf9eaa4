"""The advisor's choice against brute force on small inputs, its curve, its interval and its refusals (pure)."""

from __future__ import annotations

import itertools
import random

import pytest

from tuner.core.errors import UsageError
from tuner.core.server import model_from_variables
from tuner.placement import advisor, objects, pricing
from tuner.placement.model import Candidate, FileIo, Interval, IoProfile, TierCost

MIB = 1 << 20


def brute(sizes, values, budget):
    """The best subset by trying all of them."""
    best, best_set = 0.0, ()
    for r in range(len(sizes) + 1):
        for subset in itertools.combinations(range(len(sizes)), r):
            if sum(sizes[i] for i in subset) <= budget:
                v = sum(values[i] for i in subset)
                if v > best + 1e-12:
                    best, best_set = v, subset
    return best, best_set


def instances(n_cases=60, seed=7):
    rng = random.Random(seed)
    for _ in range(n_cases):
        n = rng.randint(1, 9)
        sizes = [rng.randint(0, 40) * MIB for _ in range(n)]
        values = [round(rng.uniform(-1, 10), 3) for _ in range(n)]
        yield sizes, values, rng.randint(0, 80) * MIB


def test_exact_matches_brute_force():
    for sizes, values, budget in instances():
        got = advisor.choose(sizes, values, budget)[0]
        best, _ = brute(sizes, values, budget)
        assert sum(sizes[i] for i in got) <= budget
        assert sum(values[i] for i in got) == pytest.approx(best)


def test_sizes_round_up_so_a_pick_never_exceeds_the_budget():
    # 3 x 1.5 MiB: rounded to 2 MiB each, only two fit 4 MiB (a true-size knapsack would also take two: 4.5 > 4)
    sizes, values = [3 * MIB // 2] * 3, [1.0, 1.0, 1.0]
    got = advisor.choose(sizes, values, 4 * MIB)[0]
    assert len(got) == 2 and sum(sizes[i] for i in got) <= 4 * MIB


def test_greedy_is_feasible_and_at_least_half_of_the_optimum():
    for sizes, values, budget in instances(seed=11):
        got = advisor.greedy(sizes, values, budget)
        best, _ = brute(sizes, values, budget)
        assert sum(sizes[i] for i in got) <= budget
        assert sum(values[i] for i in got) >= best / 2 - 1e-9


def test_greedy_takes_the_big_item_when_density_misleads():
    # density picks the small one (10/1) and then nothing fits; the big one alone is worth 50
    assert advisor.greedy([1, 10], [10.0, 50.0], 10) == [1]


def test_large_inputs_fall_back_to_greedy(monkeypatch):
    monkeypatch.setattr(advisor, "EXACT_CELLS", 10)
    rows, method = advisor.choose([MIB, 2 * MIB, 3 * MIB], [1.0, 3.0, 2.0], 3 * MIB)
    assert method.startswith("greedy") and rows == [0, 1]


def test_curve_is_the_best_value_at_every_budget():
    for sizes, values, _ in list(instances(seed=3))[:20]:
        points, how = advisor.curve(sizes, values)
        assert how == "exact"
        gains = [g for _, g in points]
        assert gains == sorted(gains)                      # more budget never predicts less
        for b, g in points:
            assert g == pytest.approx(brute(sizes, values, b)[0])


# ---- the advice on a synthetic profile --------------------------------------------------------------

def tier(**kw) -> TierCost:
    base = dict(tier_id="t", mountpoint="/fast", kind="tmpfs", fs="tmpfs", volatile=True, io_mode="O_DIRECT",
                page_size=16384, randread_s=10e-6, write_s=10e-6, fsync_s=5e-6, seqread_bps=1e9, seqwrite_bps=1e9,
                free_bytes=None, measured_at="now", fio_version="fio")
    return TierCost(**(base | kw))


def profile(waits: list[dict[str, float]]) -> IoProfile:
    """Three candidates; each interval gives each file a number of reads taking the given seconds."""
    files = {"big": "/d/s/big.ibd", "hot": "/d/s/hot.ibd", "cold": "/d/s/cold.ibd"}
    ivals = tuple(Interval(1.0, {files[k]: FileIo(reads=100, read_bytes=100 * 16384, read_s=s) for k, s in w.items()})
                  for w in waits)
    cands = (Candidate("s.big", "table", "s.big", (files["big"],), 50 * MIB),
             Candidate("s.hot", "table", "s.hot", (files["hot"],), 4 * MIB),
             Candidate("s.cold", "table", "s.cold", (files["cold"],), 14 * MIB))
    return IoProfile("io-x", "2026-12-01T00:00:00+00:00", {"page_size": 16384}, {"kind": "test"}, ivals, cands,
                     (), {})


WAITS = [{"big": 0.10, "hot": 0.30, "cold": 0.0005}, {"big": 0.12, "hot": 0.20, "cold": 0.0005},
         {"big": 0.08, "hot": 0.40, "cold": 0.0005}, {"big": 0.11, "hot": 0.25, "cold": 0.0005}]


def test_advice_picks_the_hot_small_table_and_reports_an_interval_around_it():
    a = advisor.advise(profile(WAITS), tier(), 16 * MIB)
    assert a.pick.keys == ("s.hot",)
    cost = 100 * 10e-6                                   # 100 reads of one page at 10 us on the tier
    assert a.pick.saving == pytest.approx(sum(w["hot"] for w in WAITS) / 4 - cost)
    assert a.pick.low < a.pick.saving < a.pick.high
    naive = {p.name: p for p in a.naive}
    assert naive["largest tables"].keys == ("s.cold",)   # big (50M) does not fit, cold (14M) does, then hot not
    assert naive["largest tables"].saving < a.pick.saving
    assert naive["everything"].saving > a.pick.saving
    assert a.gains["s.cold"] == 0                        # waits less now than priced on the tier: saves nothing
    assert a.curve[-1][1] == pytest.approx(a.gains["s.hot"] + a.gains["s.big"])


def test_one_interval_gives_no_interval_rather_than_a_false_one():
    a = advisor.advise(profile(WAITS[:1]), tier(), 16 * MIB)
    assert a.pick.low is None and a.pick.high is None


@pytest.mark.parametrize("budget, target, words", [
    (MIB // 2, tier(), "smaller than every candidate"),
    (64 * MIB, tier(free_bytes=32 * MIB), "free on /fast"),
    (0, tier(), "not a size"),
])
def test_bad_budgets_are_one_line(budget, target, words):
    with pytest.raises(UsageError) as err:
        advisor.advise(profile(WAITS), target, budget)
    assert words in str(err.value) and "\n" not in str(err.value)


# ---- pricing ---------------------------------------------------------------------------------------------

def test_pricing_by_kind_never_below_zero():
    target = tier(randread_s=100e-6, write_s=10e-6, fsync_s=50e-6)
    io = FileIo(reads=10, read_bytes=10 * 16384 + 1_000_000, read_s=0.01, writes=5, write_bytes=5 * 16384,
                write_s=0.0, misc=5, misc_s=0.005)
    # reads: 10 x 100 us + 1 MB beyond a page each at 1 GB/s = 2 ms; writes 50 us (waited 0 now: saves 0, not -50 us)
    assert pricing.cost_on(io, target) == pytest.approx(0.002 + 50e-6 + 250e-6)
    assert pricing.saving(io, target) == pytest.approx((0.01 - 0.002) + 0 + (0.005 - 250e-6))


def test_counted_io_is_priced_where_it_is_now_or_not_at_all():
    disk = tier(write_s=200e-6, fsync_s=200e-6)
    fast = tier(write_s=10e-6, fsync_s=1e-6)
    redo = FileIo(writes=100, write_bytes=100 * 512, misc=100, timed=False)
    assert pricing.saving(redo, fast) is None
    assert pricing.saving(redo, fast, here=disk) == pytest.approx(100 * 190e-6 + 100 * 199e-6)


# ---- what a file is -------------------------------------------------------------------------------------

@pytest.mark.parametrize("version, path, kind", [
    ("10.11.19-MariaDB", "/d/ib_logfile0", "redo"),
    ("10.11.19-MariaDB", "/d/ibdata1", "ibdata"),
    ("10.11.19-MariaDB", "/d/undo001", "undo"),
    ("10.11.19-MariaDB", "/d/tpcc/stock.ibd", "table"),
    ("10.11.19-MariaDB", "/d/tpcc/orders#P#p0.ibd", "partition"),
    ("10.11.19-MariaDB", "/elsewhere/tpcc/stock.ibd", "table"),          # DATA DIRECTORY
    ("10.11.19-MariaDB", "/t/#sql-1234.MAI", "tmpdir"),
    ("10.11.19-MariaDB", "/d/mysql/innodb_table_stats.ibd", None),
    ("10.11.19-MariaDB", "/d/ibtmp1", None),
    ("10.11.19-MariaDB", "/d/tpcc/stock.frm", None),
    ("9.7.4", "/d/#innodb_redo/#ib_redo12", "redo"),
    ("9.7.4", "/d/undo_001", "undo"),
    ("9.7.4", "/d/#ib_16384_0.dblwr", "doublewrite"),
    ("9.7.4", "/d/mysql.ibd", None),
    ("9.7.4", "/d/tpcc/orders#p#p1.ibd", "partition"),
])
def test_files_are_named_as_the_candidates_they_belong_to(version, path, kind):
    model = model_from_variables({"version": version, "datadir": "/d", "tmpdir": "/t", "innodb_page_size": "16384"})
    found = objects.classify(path, model)
    assert (found and found[1]) == kind
