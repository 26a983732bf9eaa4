"""Questions, verdicts and recommendations from synthetic blocked results with known effects and drift."""

from __future__ import annotations

import json
import math
import random
import sqlite3

import pytest

from tuner.sweep.analysis import configs_from, questions, recommend, tier_comparison
from tuner.sweep.results import SCHEMA, CellRecord, ResultsStore
from tuner.sweep.stats import Target


def _cell(block: int, tier: str, dw: str, tpmc: float, ok: bool = True, idx: int = 0,
          noise: dict | None = None) -> CellRecord:
    settings = {"placement": {"datadir": tier}, "doublewrite": dw, "page_size": "16k", "clients": 4}
    key = f"{tier}-{dw}"
    return CellRecord(run_id="r", cell_id=f"{key}-r{block}", idx=idx, config_key=key, repeat=block,
                      label=f"{tier} dw={dw}", settings=settings, status="ok" if ok else "failed", started_at=0.0,
                      finished_at=1.0, result={"tpmc": tpmc, "timeline": [{"t": 5, "seconds": 5, "tpmc": tpmc}],
                                               "latency_ms": {"new_order": {"p50": 1.0, "p95": 3.0}}},
                      check_ok=True, noise=noise)


AXES = {"placement": [{"datadir": "disk"}, {"datadir": "tmpfs"}], "doublewrite": ["ON", "OFF"]}
# true effects: tmpfs 1.6x disk; doublewrite OFF costs nothing on tmpfs, +25% on disk
TRUE = {("disk", "ON"): 1000.0, ("disk", "OFF"): 1250.0, ("tmpfs", "ON"): 1800.0, ("tmpfs", "OFF"): 1800.0}


def blocked_cells(blocks: int, drift: float = 0.3, sd: float = 0.03, seed: int = 1) -> list[CellRecord]:
    rng = random.Random(seed)
    out, i = [], 0
    for b in range(1, blocks + 1):
        f = 1.0 + rng.uniform(-drift, drift)  # the machine's state during the block
        for (tier, dw), mu in TRUE.items():
            i += 1
            out.append(_cell(b, tier, dw, mu * f * math.exp(rng.gauss(0, sd)), idx=i))
    return out


def test_questions_are_paired_and_decided_under_drift():
    configs = configs_from(blocked_cells(5), AXES)
    vs = {(v.question, v.num, v.den): v for v in questions(configs, AXES, Target(adaptive=False))}
    place = vs[("placement", "tmpfs", "disk")]
    assert place.ratio.decided and place.ratio.low > 1.3 and 1.4 < place.ratio.ratio < 1.8
    assert "tmpfs / disk = 1." in place.text() and "decided" in place.text()
    dw_disk = vs[("doublewrite on disk", "dw=OFF", "dw=ON")]
    assert dw_disk.ratio.decided and dw_disk.ratio.low > 1.0
    # the unpaired test on the same runs cannot see the 25% doublewrite cost through a +-30% drift
    assert dw_disk.welch.significant is False
    dw_tmpfs = vs[("doublewrite on tmpfs", "dw=OFF", "dw=ON")]
    assert dw_tmpfs.ratio.low < 1.0 < dw_tmpfs.ratio.high


def test_a_failed_run_drops_its_block_from_the_pairs():
    cells = blocked_cells(4)
    cells[0] = _cell(1, "disk", "ON", 0, ok=False)
    configs = configs_from(cells, AXES)
    v = next(v for v in questions(configs, AXES) if v.question == "doublewrite on disk")
    assert v.ratio.n == 3


def test_a_noisy_block_is_shown_beside_the_verdict_not_removed_from_it():
    """Block 1 was taken while another process took the CPU (flagged): tmpfs lost its lead in it."""
    cells = blocked_cells(4, drift=0.05)
    flagged = {"window": {"flagged": True, "others_cpu_share": 0.35}}
    quiet = {"window": {"flagged": False, "others_cpu_share": 0.01}}
    cells = [_cell(c.block, c.settings["placement"]["datadir"], c.settings["doublewrite"],
                   c.tpmc * (0.5 if c.block == 1 and c.settings["placement"]["datadir"] == "tmpfs" else 1.0),
                   idx=c.idx, noise=flagged if c.block == 1 and c.settings["placement"]["datadir"] == "tmpfs" else quiet)
             for c in cells]
    configs = configs_from(cells, AXES)
    place = next(v for v in questions(configs, AXES, Target(adaptive=False)) if v.question == "placement")
    assert place.ratio.n == 4 and not place.ratio.decided  # the verdict keeps every block
    assert place.quiet is not None and place.quiet.n == 3 and place.quiet.decided
    assert 1.5 < place.quiet.ratio < 1.7
    assert place.quiet_text().startswith("without the 1 block with a noisy run: 1.")
    assert place.to_dict()["quiet_blocks"]["n"] == 3
    # a comparison whose runs were all quiet has no such line
    dw_disk = next(v for v in questions(configs, AXES) if v.question == "doublewrite on disk")
    assert dw_disk.quiet is None and dw_disk.quiet_text() == ""


def test_use_x_only_when_decided_otherwise_the_safe_default_named_as_a_default():
    configs = configs_from(blocked_cells(5), AXES)
    findings = {f.tier: f for f in recommend(configs, AXES, {"tmpfs": {"volatile": True}})}
    tm = findings["tmpfs"]
    # on tmpfs doublewrite OFF costs nothing (true ratio 1.0), and 5 blocks do not show it within ±5%
    assert not tm.established and tm.chosen.settings["doublewrite"] == "ON"
    assert tm.text.startswith("On tmpfs: ranking not established (doublewrite on tmpfs: dw=OFF / dw=ON = ")
    assert "Safe default: innodb_doublewrite ON (a default, not a finding of this sweep)." in tm.text
    assert "use " not in tm.text.split("Safe default")[0] and "volatile" in tm.text
    disk = findings["disk"]
    # on disk OFF is 25% faster: decided, so the text says "use" and names the evidence
    assert disk.established and disk.chosen.settings["doublewrite"] == "OFF"
    assert disk.text.startswith("On disk: use innodb_doublewrite OFF") and "decided: differs" in disk.text
    [row] = tier_comparison(list(findings.values()))
    assert row["best_tier"] == "tmpfs" and row["exploratory"] and "exploratory" in row["verdict"]


def test_a_comparison_that_cannot_be_computed_is_listed_with_the_reason():
    cells = [c for c in blocked_cells(4) if not (c.settings["placement"]["datadir"] == "tmpfs"
                                                 and c.settings["doublewrite"] == "OFF")]
    cells += [_cell(b, "tmpfs", "OFF", 0, ok=False, idx=99) for b in (1, 2, 3, 4)]
    vs = {v.question: v for v in questions(configs_from(cells, AXES), AXES)}
    assert len(vs) == 3  # the family is what the spec asks, whatever ran
    gone = vs["doublewrite on tmpfs"]
    assert gone.ratio is None and not gone.decided
    assert gone.text() == ("doublewrite on tmpfs: dw=OFF / dw=ON could not be computed: no finished run of "
                           "tmpfs dw=OFF (see the failed runs)")


def test_one_block_is_reported_as_undecided():
    configs = configs_from(blocked_cells(1), AXES)
    [f] = [f for f in recommend(configs, AXES) if f.tier == "disk"]
    assert "ranking not established" in f.text and "needs at least 2 blocks" in f.text and not f.established
    assert all(not v.decided for v in questions(configs, AXES))


def test_results_store_roundtrip_one_transaction_per_cell(tmp_path):
    with ResultsStore(tmp_path / "r.db") as store:
        store.begin_run("r", "t", "d", "yaml", {"axes": AXES}, {}, 2, {"kernel": "Linux"}, {"order": "blocks"})
        store.record_cell(_cell(1, "disk", "ON", 1000, noise={"window": {"flagged": True, "others_cpu_share": 0.5}}))
        assert store.finished_cell_ids("r") == {"disk-ON-r1"}
        store.record_cell(_cell(1, "disk", "ON", 1100))  # a rerun replaces, never duplicates
        [c] = store.cells("r")
        assert c.tpmc == 1100 and len(store.timeline("r", "disk-ON-r1")) == 1
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.integrity_check() == "ok"
        store.record_cell(_cell(2, "disk", "ON", 900, noise={"window": {"flagged": True, "others_cpu_share": 0.5}}))
        rows = {r["block"]: r for r in store.iter_export_rows("r")}
        assert rows[1]["tpmc"] == 1100 and rows[1]["doublewrite"] == "ON"
        assert rows[2]["noisy"] is True and rows[2]["others_cpu_share"] == 0.5
        store.finish_run("r", {"reason": "target reached", "blocks": 2})
        assert store.run("r")["stop"]["blocks"] == 2 and store.run("r")["design"] == {"order": "blocks"}


def test_a_version_1_results_database_is_migrated_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript(SCHEMA)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO runs (run_id, name, spec_digest, spec_yaml, spec_json, created_at, updated_at, "
                 "total_cells, environment_json) VALUES ('old', 'old', 'd', 'y', '{}', 0, 0, 1, '{}')")
    conn.execute("INSERT INTO cells (run_id, cell_id, idx, config_key, repeat, label, settings_json, status, "
                 "started_at, finished_at, phases_json, tpmc, result_json) VALUES ('old', 'k-r1', 1, 'k', 1, 'x', '{}', 'ok', "
                 "0, 1, '{}', 1234.0, '{\"tpmc\": 1234.0}')")
    conn.commit()
    conn.close()
    with ResultsStore(db) as store:
        assert store.schema_version >= 2
        [c] = store.cells("old")
        assert c.tpmc == 1234.0 and c.noise is None and c.noisy is None
        assert store.run("old")["design"] is None


def test_a_newer_results_database_is_refused_unchanged(tmp_path):
    from tuner.core.errors import SweepError

    db = tmp_path / "new.db"
    with ResultsStore(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SweepError, match="newer than this innotier"):
        ResultsStore(db)


def test_a_mostly_busy_machine_is_named_in_the_report(tmp_path):
    from tuner.sweep.report import noise_warning

    busy = {"window": {"flagged": True, "others_cpu_share": 0.85}}
    quiet = {"window": {"flagged": False, "others_cpu_share": 0.05}}
    cells = [_cell(b, "disk", "ON", 1000, idx=b, noise=busy) for b in range(1, 6)]
    text = noise_warning(cells)
    assert text and "5 of 5 runs" in text and "median 85%" in text and "--wait-quiet" in text
    cells[0].noise = cells[1].noise = quiet
    assert noise_warning(cells) is None  # 3 of 5: not "most"


def test_the_report_states_the_family_rate_the_model_check_and_renders_cleanly(tmp_path):
    from tuner.sweep.report import build_report

    target = Target(min_blocks=3, max_blocks=6, comparisons=3)
    design = {"order": "blocks", "seed": 1, "adaptive": True, "target": target.to_dict()}
    with ResultsStore(tmp_path / "r.db") as store:
        store.begin_run("r", "t", "d", "yaml", {"axes": AXES, "workload": {"warehouses": 1}}, {}, 20,
                        {"kernel": "Linux"}, design)
        for c in blocked_cells(5):
            c.tiers = {"facts": {c.settings["placement"]["datadir"]: {"volatile": c.settings["placement"]["datadir"]
                                                                      == "tmpfs"}}}
            store.record_cell(c)
        rep = build_report(store, "r", tmp_path / "out")
    md = rep.markdown.read_text()
    assert ("The chance of any false \"differs\" over all 3 planned comparisons and up to 4 looks (O'Brien-Fleming-"
            "type error spending) is at most 5%, the choice between the two-way model and the paired fallback "
            "included (critical values calibrated by simulating the whole procedure under normal noise and two "
            "kinds of block x cell interaction); each comparison gets 1.7%") in md
    assert "two-way block x cell model on 4 cells x 5 complete blocks (12 degrees of freedom for the error)" in md
    assert "Tukey's test for non-additivity p = " in md
    lines = md.splitlines()
    for i, line in enumerate(lines):  # a bold heading never runs into the list before it
        if line.startswith("**") and i:
            assert lines[i - 1] == "", lines[i - 2:i + 1]
    html = rep.html.read_text()
    assert "<code>innotier persist</code>" in html and "`innotier persist`" not in html
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["family"].startswith("The chance of any false") and summary["model"]["df"] == 12


def test_an_undecided_page_size_names_the_servers_default_not_the_cell_that_measured_higher():
    """The quiet page-size run of 2026-12-02: 4k ahead in every block but undecided at the last look; the
    risks tie, so the safe default is 16k, the page size InnoDB ships with, not the faster-looking 4k."""
    axes = {"page_size": ["16k", "4k"]}
    measured = {1: (7214, 13256), 2: (9532, 11848), 3: (9996, 12806)}
    cells = []
    for block, pair in measured.items():
        for ps, tpmc in zip(("16k", "4k"), pair):
            settings = {"placement": {"datadir": "disk"}, "page_size": ps, "clients": 16}
            cells.append(CellRecord(run_id="r", cell_id=f"{ps}-r{block}", idx=len(cells) + 1, config_key=ps,
                                    repeat=block, label=f"ps={ps}", settings=settings, status="ok",
                                    started_at=0.0, finished_at=1.0,
                                    result={"tpmc": tpmc, "timeline": [{"t": 5, "seconds": 5, "tpmc": tpmc}]},
                                    check_ok=True))
    # no planned comparison given: the same branch as an undecided one, without the power search
    [finding] = recommend(configs_from(cells, axes), axes, verdicts=[])
    assert not finding.established and finding.winner.settings["page_size"] == "4k"
    assert finding.chosen.settings["page_size"] == "16k"
    assert "Safe default: page size 16k (a default, not a finding of this sweep)." in finding.text


def test_a_comparison_added_by_the_caller_is_answered_in_the_same_family():
    """`also` (the placement check's advisor-over-naive) is one more planned comparison: it is answered, and
    every interval of the family widens with it (the error is shared by one more comparison, never added after
    the fact)."""
    from tuner.sweep.analysis import family_target, planned

    three = {"placement": [{"datadir": "disk"}, {"datadir": "tmpfs"}, {"datadir": "pmem"}]}
    truth = {"disk": 1000.0, "tmpfs": 1800.0, "pmem": 1500.0}
    rng = random.Random(3)
    cells = []
    for b in range(1, 6):
        f = 1.0 + rng.uniform(-0.2, 0.2)
        for i, (tier, mu) in enumerate(truth.items()):
            c = _cell(b, tier, "ON", mu * f * math.exp(rng.gauss(0, 0.03)), idx=b * 3 + i)
            cells.append(CellRecord(**{**c.__dict__, "settings": {"placement": {"datadir": tier}, "clients": 4},
                                       "config_key": tier}))
    also = (("placement", {"datadir": "tmpfs"}, {"datadir": "pmem"}),)
    assert len(planned(three, also=also)) == len(planned(three)) + 1
    assert family_target(Target(adaptive=False), three, also=also).comparisons == 3
    configs = configs_from(cells, three)
    alone = {(v.num, v.den): v for v in questions(configs, three, Target(adaptive=False))}
    family = {(v.num, v.den): v for v in questions(configs, three, Target(adaptive=False), also=also)}
    head = family[("tmpfs", "pmem")]
    assert head.ratio.decided and 1.1 < head.ratio.ratio < 1.3 and head.ratio.low > 1.0
    for key, v in alone.items():  # same estimates, wider intervals
        assert family[key].ratio.ratio == pytest.approx(v.ratio.ratio)
        assert family[key].ratio.high - family[key].ratio.low > v.ratio.high - v.ratio.low
