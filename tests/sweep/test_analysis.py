"""Recommendations from synthetic results: winners, ties within the noise, one-repeat honesty."""

from __future__ import annotations

from tuner.sweep.analysis import configs_from, recommend, tier_comparison
from tuner.sweep.results import CellRecord, ResultsStore


def _cell(i: int, key: str, repeat: int, tier: str, dw: str, tpmc: float, ok: bool = True) -> CellRecord:
    settings = {"placement": {"datadir": tier}, "doublewrite": dw, "page_size": "16k", "clients": 4}
    return CellRecord(run_id="r", cell_id=f"{key}-r{repeat}", idx=i, config_key=key, repeat=repeat,
                      label=f"{tier} {dw}", settings=settings, status="ok" if ok else "failed", started_at=0.0,
                      finished_at=1.0, result={"tpmc": tpmc, "timeline": [{"t": 5, "seconds": 5, "tpmc": tpmc}],
                                               "latency_ms": {"new_order": {"p50": 1.0, "p95": 3.0}}},
                      check_ok=True)


AXES = {"placement": [{"datadir": "disk"}, {"datadir": "tmpfs"}], "doublewrite": ["ON", "OFF"]}


def test_clear_winner_is_named_with_its_evidence():
    cells = [_cell(1, "a", 1, "disk", "ON", 1000), _cell(2, "a", 2, "disk", "ON", 1010),
             _cell(3, "b", 1, "disk", "OFF", 1500), _cell(4, "b", 2, "disk", "OFF", 1490)]
    [f] = recommend(configs_from(cells, AXES), AXES)
    assert f.tier == "disk" and f.chosen.settings["doublewrite"] == "OFF" and not f.safer_tie
    assert "innodb_doublewrite OFF" in f.text and "exceeds the noise" in f.text


def test_tie_within_noise_recommends_the_safer_settings():
    cells = [_cell(1, "a", 1, "tmpfs", "ON", 1000), _cell(2, "a", 2, "tmpfs", "ON", 1100),
             _cell(3, "b", 1, "tmpfs", "OFF", 1020), _cell(4, "b", 2, "tmpfs", "OFF", 1120)]
    [f] = recommend(configs_from(cells, AXES), AXES, {"tmpfs": {"volatile": True}})
    assert f.winner.settings["doublewrite"] == "OFF"
    assert f.chosen.settings["doublewrite"] == "ON" and f.safer_tie
    assert "within the noise" in f.text and "safer" in f.text and "volatile" in f.text


def test_one_repeat_is_reported_as_unknown_noise():
    cells = [_cell(1, "a", 1, "disk", "ON", 1000), _cell(2, "b", 1, "disk", "OFF", 1300)]
    [f] = recommend(configs_from(cells, AXES), AXES)
    assert "noise is unknown" in f.text


def test_failed_cells_are_left_out_and_tiers_compared():
    cells = [_cell(1, "a", 1, "disk", "ON", 1000), _cell(2, "a", 2, "disk", "ON", 1020),
             _cell(3, "c", 1, "tmpfs", "ON", 3000), _cell(4, "c", 2, "tmpfs", "ON", 3050),
             _cell(5, "d", 1, "tmpfs", "OFF", 0, ok=False)]
    configs = configs_from(cells, AXES)
    findings = recommend(configs, AXES)
    assert {f.tier for f in findings} == {"disk", "tmpfs"}
    [row] = tier_comparison(findings)
    assert row["best_tier"] == "tmpfs" and row["significant"] is True


def test_results_store_roundtrip_one_transaction_per_cell(tmp_path):
    with ResultsStore(tmp_path / "r.db") as store:
        store.begin_run("r", "t", "d", "yaml", {"axes": AXES}, {}, 2, {"kernel": "Linux"})
        store.record_cell(_cell(1, "a", 1, "disk", "ON", 1000))
        assert store.finished_cell_ids("r") == {"a-r1"}
        store.record_cell(_cell(1, "a", 1, "disk", "ON", 1100))  # a rerun replaces, never duplicates
        [c] = store.cells("r")
        assert c.tpmc == 1100 and len(store.timeline("r", "a-r1")) == 1
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.integrity_check() == "ok"
        rows = list(store.iter_export_rows("r"))
        assert rows[0]["tpmc"] == 1100 and rows[0]["doublewrite"] == "ON"


def test_runner_up_within_noise_is_reported_as_a_positive_gap():
    cells = [_cell(1, "a", 1, "disk", "ON", 1100), _cell(2, "a", 2, "disk", "ON", 1000),
             _cell(3, "b", 1, "disk", "OFF", 1080), _cell(4, "b", 2, "disk", "OFF", 980)]
    [f] = recommend(configs_from(cells, AXES), AXES)
    assert f.chosen.settings["doublewrite"] == "ON" and not f.safer_tie
    assert "1.9% slower, within the noise" in f.text and "either is as good" in f.text
