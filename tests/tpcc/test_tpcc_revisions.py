"""bench/tpcc_revisions.py's pure parts: the rotated order, the paired ratios and the Bonferroni-corrected
interval, with the figures issue 34 measured (main b8b8441 against 4785594, two rounds)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from tuner.core.errors import UsageError

_PATH = Path(__file__).resolve().parents[2] / "bench" / "tpcc_revisions.py"
_SPEC = importlib.util.spec_from_file_location("tpcc_revisions", _PATH)
rev = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = rev  # dataclasses look their module up there
_SPEC.loader.exec_module(rev)

# issue 34's table: (round, tree) -> (NOPM 8 clients, server CPU-s/1000 NO 8, NOPM 32, server CPU 32)
ISSUE = {(1, "main"): (48871, 2.03, 45763, 2.30), (1, "4785594"): (53646, 1.84, 49631, 2.10),
         (2, "main"): (49281, 2.00, 48209, 2.18), (2, "4785594"): (54668, 1.81, 46352, 2.26)}


def issue_runs() -> list:
    out = []
    for (rnd, tree), (n8, c8, n32, c32) in ISSUE.items():
        out.append(rev.Measured(rnd, tree, 8, n8, c8))
        out.append(rev.Measured(rnd, tree, 32, n32, c32))
    return out


def cauchy_quantile(p: float) -> float:
    """Student's t with one degree of freedom is the Cauchy distribution: its quantile in closed form."""
    return math.tan(math.pi * (p - 0.5))


def test_rounds_rotate_so_each_revision_goes_first_and_follows_each_other():
    assert [rev.round_order(2, r) for r in range(4)] == [[0, 1], [1, 0], [0, 1], [1, 0]]
    three = [rev.round_order(3, r) for r in range(3)]
    assert three == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    assert {o[0] for o in three} == {0, 1, 2}
    assert len({(o[i], o[i + 1]) for o in three for i in range(2)}) == 3  # no pair repeats


def test_paired_ratios_median_and_bonferroni_interval_from_the_issues_figures():
    spec = rev.BenchSpec(("4785594", "main"), clients=(8, 32), rounds=2)
    assert spec.comparisons == 4  # one revision against the reference, two client counts, two figures
    found = {(k.clients, k.figure): k for k in rev.analyse(spec, issue_runs())}
    nopm8 = found[(8, "nopm")]
    assert nopm8.rounds == [1, 2]
    assert nopm8.ratios == pytest.approx([48871 / 53646, 49281 / 54668])
    assert nopm8.median == pytest.approx((0.910990 + 0.901460) / 2, abs=1e-5)  # main 9% below, as the issue says
    logs = [math.log(x) for x in nopm8.ratios]
    mean, se = sum(logs) / 2, abs(logs[0] - logs[1]) / 2  # sd / sqrt(2) with sd = |d| / sqrt(2)
    half = cauchy_quantile(1 - 0.05 / 4 / 2) * se  # two-sided 1 - 0.05/4
    assert nopm8.level == pytest.approx(0.9875)
    assert (nopm8.low, nopm8.high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)), rel=1e-9)
    assert nopm8.low == pytest.approx(0.6933, abs=1e-3) and nopm8.high == pytest.approx(1.1846, abs=1e-3)
    cpu8 = found[(8, "server_cpu_per_kno")]
    assert cpu8.ratios == pytest.approx([2.03 / 1.84, 2.00 / 1.81]) and cpu8.median == pytest.approx(1.1041, abs=1e-4)
    assert found[(32, "nopm")].ratios == pytest.approx([45763 / 49631, 48209 / 46352])  # overlapping at 32


def test_the_correction_widens_with_the_family():
    runs = issue_runs()
    one = rev.compare_one(runs, "4785594", "main", 8, "nopm", family=1)
    eight = rev.compare_one(runs, "4785594", "main", 8, "nopm", family=8)
    assert one.level == pytest.approx(0.95) and eight.level == pytest.approx(1 - 0.05 / 8)
    assert eight.low < one.low < one.median < one.high < eight.high
    three = rev.BenchSpec(("a", "b", "c"), clients=(8, 32))
    assert three.comparisons == 8


def test_a_round_a_revision_could_not_count_drops_out_of_the_pairs():
    runs = issue_runs() + [rev.Measured(3, "main", 8, None, None, complete=False, note="load failed"),
                           rev.Measured(3, "4785594", 8, 52000, 1.9)]
    k = rev.compare_one(runs, "4785594", "main", 8, "nopm", family=4)
    assert k.rounds == [1, 2] and len(k.ratios) == 2
    single = rev.compare_one([m for m in runs if m.round != 2], "4785594", "main", 8, "nopm", family=4)
    assert single.ratios == pytest.approx([48871 / 53646]) and single.low is None  # one pair: no interval
    text = rev.render(rev.BenchSpec(("4785594", "main"), rounds=3), runs,
                      rev.analyse(rev.BenchSpec(("4785594", "main"), rounds=3), runs), ["header"])
    assert "round 3 main c8: load failed" in text and "Bonferroni over 4 comparisons" in text


@pytest.mark.parametrize("kw, message", [
    ({"revisions": ("main",)}, "two or more revisions"), ({"revisions": ("main", "main")}, "repeat one"),
    ({"rounds": 0}, "--rounds 0"), ({"clients": (8, 0)}, "positive client counts"),
    ({"duration": 5}, "too short"), ({"mode": "fast"}, "unknown"),
])
def test_bad_specs_are_refused(kw, message):
    args = {"revisions": ("main", "HEAD"), **kw}
    with pytest.raises(UsageError, match=message):
        rev.BenchSpec(**args).validate()


def test_an_unknown_revision_is_one_line_and_nothing_is_made(capsys, tmp_path):
    assert rev.main(["no-such-revision-xyz", "HEAD", "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'no-such-revision-xyz' is not a commit" in err
    assert not (tmp_path / "w").exists()
