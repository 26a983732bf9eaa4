"""From stored cell runs to answers: the questions a spec asks, paired within blocks, and a recommendation.

Reads only the results store's records (never a live server).  A *config* is a cell's settings; its
runs are one per block (repeat).  Every comparison is **paired within blocks** (tuner/sweep/stats.py):
the per-block ratio of the two sides' throughput on the log scale, so the drift of the machine between
blocks cancels.

The questions (``questions``), one per axis of the spec:
- placement: each placement against the first one (the spec's reference, usually the disk), the other
  axes pooled (geometric mean of their cells within the block);
- every other axis per datadir tier when placement varies ("doublewrite OFF / ON on tmpfs"), and page
  size per client count when clients vary ("ps=4k / ps=16k at 16 clients").
Each comparison is decided when its interval excludes 1.0, lies within +/-3% of it, or is narrower
than +/-5% (``stats.Target``); otherwise it says how many more blocks the current spread suggests.

Recommendations per tier prefer the safer of settings that are not shown to differ (doublewrite on, a
flush method that fsyncs, redo flushed at every commit), and state the cost of the safer choice as a
paired ratio with its interval.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from tuner.sweep.results import CellRecord
from tuner.sweep.spec import DEFAULT_PLACEMENT, config_label, placement_label
from tuner.sweep.stats import Comparison, LogSummary, PairedRatio, Target, compare, log_summarize, paired_ratio

# lower is safer; settings not listed are neutral.  Sources: MySQL 8.0 manual 17.6.4 (doublewrite:
# without it a torn page cannot be repaired), 17.14 innodb_flush_method (O_DIRECT_NO_FSYNC skips the
# fsync of data files; nosync is "for performance testing only"), innodb_flush_log_at_trx_commit
# (only 1 is fully ACID).
RISK = {
    "doublewrite": {"ON": 0, "DETECT_AND_RECOVER": 0, "DETECT_ONLY": 2, "fast": 1, "OFF": 2},
    "flush_method": {"O_DIRECT": 0, "fsync": 0, "O_DSYNC": 0, "littlesync": 1, "O_DIRECT_NO_FSYNC": 1, "nosync": 3},
    "flush_log_at_trx_commit": {1: 0, 2: 1, 0: 2},
}
AXIS_NAMES = {"placement": "placement", "page_size": "page size", "clients": "clients",
              "flush_method": "flush method", "doublewrite": "doublewrite", "buffer_pool_size": "buffer pool",
              "buffer_pool_instances": "buffer pool instances", "log_file_size": "redo size",
              "flush_log_at_trx_commit": "flush_log_at_trx_commit", "io_capacity": "io_capacity"}


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
        return [r.tpmc for r in self.runs if r.tpmc]

    @property
    def by_block(self) -> dict[int, float]:
        return {r.block: r.tpmc for r in self.runs if r.tpmc}

    @property
    def quiet_by_block(self) -> dict[int, float]:
        """tpmC per block of the runs not flagged noisy (others used more than the threshold share of the CPU)."""
        return {r.block: r.tpmc for r in self.runs if r.tpmc and not r.noisy}

    @property
    def summary(self) -> LogSummary | None:
        """Geometric mean and its interval on the log scale (never a negative bound)."""
        vals = self.tpmc_values
        return log_summarize(vals) if vals else None

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


def paired(num: list[Config], den: list[Config], target: Target, quiet_only: bool = False) -> PairedRatio | None:
    """Geometric mean of ``num``'s cells over that of ``den``'s, per block where every cell of both has a run.

    ``quiet_only``: only blocks where none of those runs was flagged noisy.
    """
    blocks = None
    for c in num + den:
        b = set(c.quiet_by_block if quiet_only else c.by_block)
        blocks = b if blocks is None else blocks & b
    blocks = sorted(blocks or [])
    if not blocks:
        return None

    def gm(cs: list[Config], b: int) -> float:
        return math.exp(sum(math.log(c.by_block[b]) for c in cs) / len(cs))

    return paired_ratio([gm(num, b) for b in blocks], [gm(den, b) for b in blocks], target)


def unpaired(num: list[Config], den: list[Config]) -> Comparison | None:
    """Welch's test on the same question, ignoring the blocks (shown beside the paired answer)."""
    a = [v for c in den for v in c.tpmc_values]
    b = [v for c in num for v in c.tpmc_values]
    return compare(a, b) if a and b else None


# ---------------------------------------------------------------------------
# The questions


@dataclass
class Verdict:
    question: str  # "placement", "doublewrite on tmpfs", "page size at 16 clients"
    axis: str
    num: str  # value label: "tmpfs", "dw=OFF"
    den: str
    ratio: PairedRatio
    welch: Comparison | None
    num_configs: list[Config] = field(default_factory=list, repr=False)
    den_configs: list[Config] = field(default_factory=list, repr=False)
    # the same comparison over the blocks without a flagged run, when flagged blocks were left out
    # (a sensitivity line beside the verdict, never the verdict itself: the stopping rule used all blocks)
    quiet: PairedRatio | None = None

    @property
    def decided(self) -> bool:
        return self.ratio.decided

    @property
    def name(self) -> str:
        return f"{self.num} / {self.den}" + (f" ({self.scope})" if self.scope else "")

    @property
    def scope(self) -> str:
        return self.question[len(AXIS_NAMES.get(self.axis, self.axis)):].strip()

    def text(self) -> str:
        return f"{self.question}: {self.num} / {self.den} = {self.ratio.interval()}, {self.ratio.state()}"

    def quiet_text(self) -> str:
        """'without the 1 block with a noisy run: 1.61x [1.24, 2.09], decided' (empty when none was left out)."""
        if self.quiet is None:
            return ""
        left = self.ratio.n - self.quiet.n
        return (f"without the {left} block{'s' if left != 1 else ''} with a noisy run: "
                f"{self.quiet.interval()}, {self.quiet.state()}")

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "axis": self.axis, "num": self.num, "den": self.den,
                "paired": self.ratio.to_dict(), "welch": self.welch.to_dict() if self.welch else None,
                "quiet_blocks": self.quiet.to_dict() if self.quiet else None,
                "text": self.text(), "quiet_text": self.quiet_text()}


def value_label(axis: str, value: Any) -> str:
    if axis == "placement":
        p = value if isinstance(value, dict) else {DEFAULT_PLACEMENT: value}
        return p[DEFAULT_PLACEMENT] if len(set(p.values())) == 1 else placement_label(p)
    if axis == "options":
        return ", ".join(f"{o}={v}" for o, v in value.items())
    return config_label({axis: value})


def group_axis(axis: str, axes: dict[str, Any]) -> str | None:
    """The axis a question is asked per value of: page size per clients, the rest per datadir tier."""
    if axis == "page_size" and len(axes.get("clients") or []) > 1:
        return "clients"
    if axis != "placement" and len(axes.get("placement") or []) > 1:
        return "placement"
    return None


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _group_text(g_axis: str | None, g_val: Any) -> str:
    if g_axis is None:
        return ""
    if g_axis == "clients":
        return f" at {g_val} clients"
    return f" on {value_label('placement', g_val)}"


def questions(configs: list[Config], axes: dict[str, Any], target: Target | None = None) -> list[Verdict]:
    """Every comparison the report makes, paired within blocks."""
    target = target or Target(adaptive=False)
    cs = [c for c in configs if c.runs and c.checks_ok]
    out: list[Verdict] = []
    # placement first (the question a sweep across tiers asks first), then the rest in the spec's order
    for axis, values in sorted(axes.items(), key=lambda kv: kv[0] != "placement"):
        if axis == "options":
            continue  # several options: compared as cells in the per-tier recommendation
        if len(values) < 2:
            continue
        g_axis = group_axis(axis, axes)
        groups = [None] if g_axis is None else list(axes[g_axis])
        for g in groups:
            members = [c for c in cs if g is None or _key(c.settings.get(g_axis)) == _key(g)]
            by_val = {_key(v): [c for c in members if _key(c.settings.get(axis)) == _key(v)] for v in values}
            ref = values[0]
            den = by_val[_key(ref)]
            if not den:
                continue
            for v in values[1:]:
                num = by_val[_key(v)]
                if not num:
                    continue
                # pair like with like: the other axes' values present on both sides
                rest = lambda c: _key({k: c.settings.get(k) for k in axes if k not in (axis, g_axis)})  # noqa: E731
                common = {rest(c) for c in num} & {rest(c) for c in den}
                n_side = [c for c in num if rest(c) in common]
                d_side = [c for c in den if rest(c) in common]
                r = paired(n_side, d_side, target) if n_side and d_side else None
                if r is None:
                    continue
                title = AXIS_NAMES.get(axis, axis) + _group_text(g_axis, g)
                quiet = paired(n_side, d_side, target, quiet_only=True)
                if quiet is not None and (quiet.n == r.n or quiet.n < 2):
                    quiet = None  # nothing left out, or too little left to say anything
                out.append(Verdict(title, axis, value_label(axis, v), value_label(axis, ref), r,
                                   unpaired(n_side, d_side), n_side, d_side, quiet))
    return out


# ---------------------------------------------------------------------------
# Recommendations


@dataclass
class TierFinding:
    tier: str
    winner: Config
    chosen: Config  # the recommendation (the winner, or a safer config not shown to differ from it)
    runner_up: Config | None
    vs_runner_up: PairedRatio | None  # winner / runner-up
    safer_tie: bool  # chosen != winner because the difference is not established
    cost_of_safer: PairedRatio | None  # chosen / winner when chosen is the safer one
    volatile: bool | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "recommended": self.chosen.label, "recommended_settings": self.chosen.settings,
                "fastest": self.winner.label, "runner_up": self.runner_up.label if self.runner_up else None,
                "winner_vs_runner_up": self.vs_runner_up.to_dict() if self.vs_runner_up else None,
                "cost_of_safer": self.cost_of_safer.to_dict() if self.cost_of_safer else None,
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


def recommend(configs: list[Config], axes: dict[str, Any], tier_facts: dict[str, dict] | None = None,
              target: Target | None = None) -> list[TierFinding]:
    """Per datadir tier (and per client count when clients vary): the best configuration and the evidence."""
    target = target or Target(adaptive=False)
    tier_facts = tier_facts or {}
    out: list[TierFinding] = []
    tiers: dict[str, list[Config]] = {}
    for c in configs:
        if c.summary is not None and c.checks_ok:
            scope = c.tier + (f" at {c.settings['clients']} clients" if len(axes.get("clients") or []) > 1 else "")
            tiers.setdefault(scope, []).append(c)
    for tier, cs in tiers.items():
        ranked = sorted(cs, key=lambda c: c.summary.mean, reverse=True)
        winner = ranked[0]
        runner = ranked[1] if len(ranked) > 1 else None
        comp = paired([winner], [runner], target) if runner else None
        chosen, safer, cost = winner, False, None
        if runner is not None:
            # among the configs not shown to be slower than the winner, the safest (then the fastest)
            tied = [winner] + [c for c in ranked[1:] if _not_shown_slower(c, winner, target)]
            safest = min(tied, key=lambda c: (c.risk, -c.summary.mean))
            if safest is not winner and safest.risk < winner.risk:
                chosen, safer = safest, True
                cost = paired([safest], [winner], target)
            else:
                safer_ones = [c for c in ranked if c.risk < winner.risk]
                if safer_ones:
                    cost = paired([min(safer_ones, key=lambda c: (c.risk, -c.summary.mean))], [winner], target)
        vol = (tier_facts.get(winner.tier) or {}).get("volatile")
        out.append(TierFinding(tier, winner, chosen, runner, comp, safer, cost, vol,
                               _finding_text(tier, winner, chosen, runner, comp, safer, cost, vol, axes)))
    return out


def _not_shown_slower(c: Config, winner: Config, target: Target) -> bool:
    r = paired([c], [winner], target)
    return r is not None and r.low is not None and r.high >= 1.0


def _finding_text(tier: str, winner: Config, chosen: Config, runner: Config | None, comp: PairedRatio | None,
                  safer: bool, cost: PairedRatio | None, volatile: bool | None, axes: dict[str, Any]) -> str:
    s = chosen.summary
    head = f"On {tier}: use {_settings_text(chosen, axes)} -- {s.format()} tpmC"
    if runner is None:
        body = " (the only configuration measured here)."
    elif safer:
        body = (f". The fastest, {winner.label}, is not shown to be faster (safer / fastest = {cost.interval()}, "
                f"{cost.state()}), so the safer settings are recommended.")
    elif comp is not None and comp.low is None:
        body = (f"; the runner-up {runner.label} measured {comp.ratio:.2f}x less (one block: the noise is unknown, so "
                "this ranking is not established).")
    elif comp is not None and comp.low > 1.0:
        body = f"; it beats the runner-up {runner.label}: {comp.interval()}, {comp.state()}."
    else:
        body = (f"; the runner-up {runner.label}: fastest / runner-up = {comp.interval()}, {comp.state()}: either is "
                "as good on this evidence.")
    if cost is not None and not safer:
        safest = "the safer settings"
        body += f" Cost of {safest} on this tier: {cost.interval()} of the fastest ({cost.state()})."
    tail = ""
    if volatile:
        tail = " This tier is volatile (lost at power-off): keep a consistent copy of the data (`innotier persist`)."
    return head + body + tail


def tier_comparison(findings: list[TierFinding], target: Target | None = None) -> list[dict[str, Any]]:
    """The best configuration of every tier against the best of the others (which tier, by how much)."""
    target = target or Target(adaptive=False)
    if len(findings) < 2:
        return []
    ranked = sorted(findings, key=lambda f: f.winner.summary.mean, reverse=True)
    best = ranked[0]
    rows = []
    for f in ranked[1:]:
        r = paired([best.winner], [f.winner], target)
        if r is None:
            continue
        rows.append({"best_tier": best.tier, "other_tier": f.tier, "best": best.winner.label, "other": f.winner.label,
                     "ratio": r.to_dict(), "verdict": f"{r.interval()}, {r.state()}", "decided": r.decided,
                     "significant": r.low is not None and (r.low > 1.0 or r.high < 1.0)})
    return rows
