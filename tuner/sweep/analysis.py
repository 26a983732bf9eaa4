"""From stored cell runs to findings: per-cell statistics, comparisons and a recommendation per tier.

Reads only the results store's records (never a live server).  A *config* is a cell's settings
(its repeats pooled); its sample is the tpmC of each finished repeat.  Differences are judged with
Welch's t-test (tuner/sweep/stats.py); where a difference is within the noise the recommendation says
so, and prefers the safer of the tied settings (doublewrite on, a flush method that fsyncs, redo
flushed at every commit) instead of a number that may be luck.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.sweep.results import CellRecord
from tuner.sweep.spec import DEFAULT_PLACEMENT, config_label, placement_label
from tuner.sweep.stats import Comparison, Summary, compare, summarize

# lower is safer; settings not listed are neutral.  Sources: MySQL 8.0 manual 17.6.4 (doublewrite:
# without it a torn page cannot be repaired), 17.14 innodb_flush_method (O_DIRECT_NO_FSYNC skips the
# fsync of data files; nosync is "for performance testing only"), innodb_flush_log_at_trx_commit
# (only 1 is fully ACID).
RISK = {
    "doublewrite": {"ON": 0, "DETECT_AND_RECOVER": 0, "DETECT_ONLY": 2, "fast": 1, "OFF": 2},
    "flush_method": {"O_DIRECT": 0, "fsync": 0, "O_DSYNC": 0, "littlesync": 1, "O_DIRECT_NO_FSYNC": 1, "nosync": 3},
    "flush_log_at_trx_commit": {1: 0, 2: 1, 0: 2},
}


@dataclass
class Config:
    config_key: str
    label: str
    settings: dict[str, Any]
    varying: dict[str, Any]
    runs: list[CellRecord]
    failed: list[CellRecord] = field(default_factory=list)

    @property
    def tpmc_values(self) -> list[float]:
        return [r.tpmc for r in self.runs if r.tpmc is not None]

    @property
    def summary(self) -> Summary | None:
        vals = self.tpmc_values
        return summarize(vals) if vals else None

    def metric_values(self, key: str) -> list[float]:
        return [float((r.result or {}).get(key)) for r in self.runs if (r.result or {}).get(key) is not None]

    def latency(self, op: str = "new_order") -> dict[str, float]:
        """Mean across repeats of each latency percentile (ms)."""
        out: dict[str, list[float]] = {}
        for r in self.runs:
            lat = ((r.result or {}).get("latency_ms") or {}).get(op) or {}
            for k in ("p50", "p90", "p95", "p99", "max", "avg"):
                if lat.get(k) is not None:
                    out.setdefault(k, []).append(float(lat[k]))
        return {k: sum(v) / len(v) for k, v in out.items()}

    @property
    def tier(self) -> str:
        return self.settings["placement"][DEFAULT_PLACEMENT]

    @property
    def checks_ok(self) -> bool:
        return all(r.check_ok for r in self.runs)

    @property
    def risk(self) -> int:
        s = self.settings
        return sum(RISK[k].get(s.get(k), 0) for k in RISK if k in s)


def varying_of(settings: dict[str, Any], axes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in axes:
        if k == "options":
            out["options"] = {o: (settings.get("options") or {}).get(o) for o in axes["options"]}
        else:
            out[k] = settings.get(k)
    return out


def label_of(varying: dict[str, Any]) -> str:
    return config_label(varying) or "baseline"


def configs_from(cells: list[CellRecord], axes: dict[str, Any]) -> list[Config]:
    by_key: dict[str, Config] = {}
    for c in sorted(cells, key=lambda c: c.idx):
        cfg = by_key.get(c.config_key)
        if cfg is None:
            v = varying_of(c.settings, axes)
            # the label the plan gave the cell (axes in the spec's order; stored JSON sorts keys)
            cfg = by_key[c.config_key] = Config(c.config_key, c.label or label_of(v), c.settings, v, [])
        (cfg.runs if c.status == "ok" else cfg.failed).append(c)
    return list(by_key.values())


# ---------------------------------------------------------------------------
# Recommendations


@dataclass
class TierFinding:
    tier: str
    winner: Config
    chosen: Config  # the recommendation (the winner, or a safer config tied with it)
    runner_up: Config | None
    vs_runner_up: Comparison | None
    safer_tie: bool  # chosen != winner because the difference is within the noise
    volatile: bool | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "recommended": self.chosen.label, "recommended_settings": self.chosen.settings,
                "fastest": self.winner.label, "runner_up": self.runner_up.label if self.runner_up else None,
                "comparison": self.vs_runner_up.to_dict() if self.vs_runner_up else None,
                "safer_tie": self.safer_tie, "volatile": self.volatile, "text": self.text}


def _settings_text(cfg: Config, axes: dict[str, Any]) -> str:
    """The winning settings, named (what varies in the sweep, without the tier already named)."""
    v = dict(cfg.varying)
    placement = v.pop("placement", None)
    parts = []
    if placement and any(k != DEFAULT_PLACEMENT and t != placement.get(DEFAULT_PLACEMENT) for k, t in placement.items()):
        parts.append(placement_label(placement))
    names = {"page_size": "page size", "clients": "clients", "flush_method": "innodb_flush_method",
             "doublewrite": "innodb_doublewrite", "buffer_pool_size": "buffer pool",
             "buffer_pool_instances": "buffer pool instances", "log_file_size": "redo size",
             "flush_log_at_trx_commit": "innodb_flush_log_at_trx_commit", "io_capacity": "innodb_io_capacity"}
    for k, val in v.items():
        if k == "options":
            parts += [f"{o}={ov}" for o, ov in val.items()]
        else:
            parts.append(f"{names.get(k, k)} {val}")
    return ", ".join(parts) if parts else "the sweep's fixed settings"


def recommend(configs: list[Config], axes: dict[str, Any], tier_facts: dict[str, dict] | None = None) -> list[TierFinding]:
    """Per datadir tier: the best configuration and the evidence for it."""
    tier_facts = tier_facts or {}
    out: list[TierFinding] = []
    tiers: dict[str, list[Config]] = {}
    for c in configs:
        if c.summary is not None and c.checks_ok:
            tiers.setdefault(c.tier, []).append(c)
    for tier, cs in tiers.items():
        ranked = sorted(cs, key=lambda c: c.summary.mean, reverse=True)
        winner = ranked[0]
        runner = ranked[1] if len(ranked) > 1 else None
        comp = compare(runner.tpmc_values, winner.tpmc_values) if runner else None
        chosen, safer = winner, False
        if runner is not None:
            # among the configs not distinguishable from the winner, the safest (then the fastest)
            tied = [winner] + [c for c in ranked[1:] if compare(c.tpmc_values, winner.tpmc_values).significant is False]
            safest = min(tied, key=lambda c: (c.risk, -c.summary.mean))
            if safest is not winner and safest.risk < winner.risk:
                chosen, safer = safest, True
        vol = (tier_facts.get(tier) or {}).get("volatile")
        out.append(TierFinding(tier, winner, chosen, runner, comp, safer, vol,
                               _finding_text(tier, winner, chosen, runner, comp, safer, vol, axes)))
    return out


def _finding_text(tier: str, winner: Config, chosen: Config, runner: Config | None, comp: Comparison | None,
                  safer: bool, volatile: bool | None, axes: dict[str, Any]) -> str:
    s = chosen.summary
    head = f"On {tier}: use {_settings_text(chosen, axes)} -- {s.format()} tpmC"
    if runner is None:
        body = " (the only configuration measured on this tier)."
    elif safer:
        d = compare(chosen.tpmc_values, winner.tpmc_values)
        body = (f". {winner.label} measured {d.rel_diff * 100:.1f}% more, within the noise (Welch p = "
                f"{d.p_value:.3g}), so the safer settings are recommended.")
    elif comp is not None and comp.significant:
        body = f"; it beats the runner-up {runner.label} by {comp.verdict()}."
    elif comp is not None and comp.significant is False:
        body = (f"; the runner-up {runner.label} is {_slower_pct(comp):.1f}% slower, within the noise "
                f"(Welch p = {comp.p_value:.3g}): either is as good on this evidence.")
    else:
        body = (f"; the runner-up {runner.label} is {_slower_pct(comp):.1f}% slower (one repeat: the noise is "
                "unknown, so this ranking is not established).")
    tail = ""
    if volatile:
        tail = " This tier is volatile (lost at power-off): keep a consistent copy of the data (`innotier persist`)."
    return head + body + tail


def _slower_pct(comp: Comparison) -> float:
    """How much slower the runner-up is than the winner, in % of the winner (comp = runner-up -> winner)."""
    return comp.rel_diff / (1.0 + comp.rel_diff) * 100.0


def tier_comparison(findings: list[TierFinding]) -> list[dict[str, Any]]:
    """The best configuration of every tier against the best of the others (which tier, by how much)."""
    if len(findings) < 2:
        return []
    ranked = sorted(findings, key=lambda f: f.winner.summary.mean, reverse=True)
    best = ranked[0]
    rows = []
    for f in ranked[1:]:
        c = compare(f.winner.tpmc_values, best.winner.tpmc_values)
        rows.append({"best_tier": best.tier, "other_tier": f.tier, "best": best.winner.label, "other": f.winner.label,
                     "rel_diff": c.rel_diff, "verdict": c.verdict(), "significant": c.significant})
    return rows
