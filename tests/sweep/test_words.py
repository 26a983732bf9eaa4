"""Words a planner can act on (issue 33, item 5): an early look says how strict its interval is and shows the
blocks' own ratios beside it; a spec's description names its papers, not "seed 000"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tuner.sweep.analysis import Config, Verdict, per_block
from tuner.sweep.sources import PAPERS, name_papers
from tuner.sweep.stats import Target, level_percent, paired_ratio

SPECS = Path(__file__).resolve().parents[2] / "tuner" / "sweep" / "specs"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "sources.md"
# the demo's stop rule: looks after blocks 3..8, two planned comparisons share the 5%
DEMO = Target(adaptive=True, min_blocks=3, max_blocks=8, comparisons=2)


def test_an_early_look_names_its_level_and_the_blocks_ratios_beside_the_wide_interval():
    # three blocks in which tmpfs won by about 3x every time (the first look)
    r = paired_ratio([3000, 3300, 2900], [1000, 1050, 1010], DEMO)
    assert r.status == "undecided" and r.low < 1.0  # honest at that look's strict level ...
    text = r.text()
    # ... and it says so: the level is far above 95%, it is the first of six looks, and every block said ~3x
    assert re.match(r"3\.00x \[0\.\d\d, \d+\.\d\d\] at level 99\.9\d+% \(look 1 of up to 6\), "
                    r"per block 3\.00x 3\.14x 2\.87x, undecided", text), text
    assert 0.999 < r.level < 1.0 and r.look() == (1, 6)
    assert r.to_dict()["level"] == r.level and r.to_dict()["per_block"] == pytest.approx([3.0, 3.3 / 1.05, 2.9 / 1.01])


def test_the_last_look_spends_the_rest_and_a_fixed_run_has_one_look_at_its_own_level():
    last = paired_ratio([3000, 3300, 2900, 3100, 3000, 3300, 3050, 2950], [1000, 1050, 1010, 1000, 1000, 1000, 990, 1010],
                        DEMO)
    assert "(look 6 of up to 6)" in last.text() and last.level < paired_ratio([3000, 3300, 2900], [1000, 1050, 1010],
                                                                               DEMO).level
    fixed = paired_ratio([3000, 3300, 2900], [1000, 1050, 1010], Target(adaptive=False))
    assert "at level 95%, per block" in fixed.text() and "look" not in fixed.text()
    split = paired_ratio([3000, 3300, 2900], [1000, 1050, 1010], Target(adaptive=False, comparisons=2))
    assert "at level 97.5%" in split.text()
    one = paired_ratio([3000], [1000], Target(adaptive=False))
    assert one.text() == "3.00x (n=1, no interval), per block 3.00x, undecided (needs at least 2 blocks)"


@pytest.mark.parametrize("level, text", [(0.95, "95%"), (0.975, "97.5%"), (0.999, "99.9%"), (0.99994, "99.994%"),
                                         (1.0, "100%")])
def test_levels_keep_the_digits_that_tell_them_from_certainty(level, text):
    assert level_percent(level) == text


def test_a_verdict_line_carries_the_level_and_per_block_ratios_for_the_model_path_too():
    from tuner.sweep.results import CellRecord

    def cfg(key: str, values: list[float]) -> Config:
        runs = [CellRecord("r", f"{key}{b}", b, key, b, key, {}, "ok", 0.0, 0.0, result={"tpmc": v}, check_ok=True)
                for b, v in enumerate(values, 1)]
        return Config(key, key, {}, {}, runs)

    tmpfs, disk = cfg("tmpfs", [3000, 3300, 2900]), cfg("disk", [1000, 1050, 1010])
    assert per_block([tmpfs], [disk]) == pytest.approx([3.0, 3.3 / 1.05, 2.9 / 1.01])
    v = Verdict("placement", "placement", "tmpfs", "disk", paired_ratio([3000, 3300, 2900], [1000, 1050, 1010], DEMO),
                None)
    assert v.text().startswith("placement: tmpfs / disk = 3.00x [") and "per block 3.00x 3.14x 2.87x" in v.text()


def test_every_paper_label_is_the_one_docs_sources_names():
    docs = DOCS.read_text()
    for label, name in PAPERS.items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| seed {label}"))
        author = name.split()[0].rstrip(",")
        assert author in row, (label, name)


@pytest.mark.parametrize("spec", sorted(p.name for p in SPECS.glob("*.yaml")))
def test_no_shipped_spec_prints_a_seed_label(spec):
    doc = yaml.safe_load((SPECS / spec).read_text())
    regime = doc.get("regime") or {}
    for text in (doc.get("description") or "", regime.get("seed_source") or "", regime.get("note") or ""):
        named = name_papers(text)
        assert not re.search(r"\bseed \d{3}\b", named), (spec, named)


def test_the_demo_description_names_its_papers():
    first = yaml.safe_load((SPECS / "demo.yaml").read_text())["description"].splitlines()[0]
    assert "seed" not in first.lower()
    assert name_papers("DCPMM paper (seed 000), dissertation (seed 004)") == (
        f"DCPMM paper ({PAPERS['000']}), dissertation ({PAPERS['004']})")
    assert name_papers("seed 123 is not known") == "seed 123 is not known"  # unknown labels stay as written
