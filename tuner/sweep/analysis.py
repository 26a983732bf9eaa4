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
The comparisons are known before any data (``planned``): their number shares the error rate
(``family_target``).  Each is answered by the two-way block x cell model when its checks hold
(tuner/sweep/model.py), else by its own paired interval; one that cannot be computed says why.  It is
decided when its interval excludes 1.0 or lies inside the equivalence margin (``stats.Target``);
otherwise it says how many more blocks 80% power needs.

Recommendations per tier say "use X" only when the planned comparison of the tier's two best cells
decides; otherwise "ranking not established", and the safest settings (doublewrite on, a flush method
that fsyncs, redo flushed at every commit) are named as a default, not as a finding.  Best-vs-best
rows across tiers are selected by the data, so they are labelled exploratory.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from tuner.sweep.model import TwoWay, fit
from tuner.sweep.results import CellRecord
from tuner.sweep.spec import DEFAULT_PLACEMENT, config_label, excluded, placement_label
from tuner.sweep.stats import (Comparison, LogSummary, PairedRatio, Target, compare, log_summarize, paired_ratio,
                               ratio_from)

# lower is safer; settings not listed are neutral.  Sources: MySQL 8.0 manual 17.6.4 (doublewrite:
# without it a torn page cannot be repaired), 17.14 innodb_flush_method (O_DIRECT_NO_FSYNC skips the
# fsync of data files; nosync is "for performance testing only"), innodb_flush_log_at_trx_commit
# (only 1 is fully ACID).
RISK = {
    "doublewrite": {"ON": 0, "DETECT_AND_RECOVER": 0, "DETECT_ONLY": 2, "fast": 1, "OFF": 2},
    "flush_method": {"O_DIRECT": 0, "fsync": 0, "O_DSYNC": 0, "littlesync": 1, "O_DIRECT_NO_FSYNC": 1, "nosync": 3},
    "flush_log_at_trx_commit": {1: 0, 2: 1, 0: 2},
}
# The servers' own defaults: when no planned comparison decides and the risks tie, the safe default is the
# setting the server ships with, not the one that happened to measure higher (that is picked by the same data).
SERVER_DEFAULTS = {"page_size": "16k", "doublewrite": "ON", "flush_log_at_trx_commit": 1}
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

    @property
    def departures(self) -> int:
        """How many of the settings with a known server default this cell changes."""
        s = self.settings
        return sum(1 for k, v in SERVER_DEFAULTS.items() if k in s and str(s[k]).lower() != str(v).lower())


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


def _common_blocks(cs: list[Config], quiet_only: bool = False) -> list[int]:
    blocks = None
    for c in cs:
        b = set(c.quiet_by_block if quiet_only else c.by_block)
        blocks = b if blocks is None else blocks & b
    return sorted(blocks or [])


def paired(num: list[Config], den: list[Config], target: Target, quiet_only: bool = False) -> PairedRatio | None:
    """Geometric mean of ``num``'s cells over that of ``den``'s, per block where every cell of both has a run.

    ``quiet_only``: only blocks where none of those runs was flagged noisy.
    """
    blocks = _common_blocks(num + den, quiet_only)
    if not blocks:
        return None

    def gm(cs: list[Config], b: int) -> float:
        return math.exp(sum(math.log(c.by_block[b]) for c in cs) / len(cs))

    return paired_ratio([gm(num, b) for b in blocks], [gm(den, b) for b in blocks], target)


def per_block(num: list[Config], den: list[Config]) -> list[float]:
    """The comparison's ratio within each block where every cell of both sides has a run."""
    def gm(cs: list[Config], b: int) -> float:
        return math.exp(sum(math.log(c.by_block[b]) for c in cs) / len(cs))

    return [gm(num, b) / gm(den, b) for b in _common_blocks(num + den)]


def from_model(fit: TwoWay, num: list[Config], den: list[Config], target: Target) -> PairedRatio:
    est, se = fit.contrast([c.config_key for c in num], [c.config_key for c in den])
    return ratio_from(est, se, fit.n, fit.df, fit.df_per_block, target, "two-way model", per_block(num, den))


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
    ratio: PairedRatio | None  # None: could not be computed (``missing`` says why)
    welch: Comparison | None
    num_configs: list[Config] = field(default_factory=list, repr=False)
    den_configs: list[Config] = field(default_factory=list, repr=False)
    # the same comparison over the blocks without a flagged run, when flagged blocks were left out
    # (a sensitivity line beside the verdict, never the verdict itself: the stopping rule used all blocks)
    quiet: PairedRatio | None = None
    missing: str | None = None

    @property
    def decided(self) -> bool:
        return self.ratio is not None and self.ratio.decided

    @property
    def name(self) -> str:
        return f"{self.num} / {self.den}" + (f" ({self.scope})" if self.scope else "")

    @property
    def scope(self) -> str:
        return self.question[len(AXIS_NAMES.get(self.axis, self.axis)):].strip()

    def text(self) -> str:
        if self.ratio is None:
            return f"{self.question}: {self.num} / {self.den} could not be computed: {self.missing}"
        return f"{self.question}: {self.num} / {self.den} = {self.ratio.text()}"

    def quiet_text(self) -> str:
        """'without the 1 block with a noisy run: 1.61x [1.24, 2.09], decided' (empty when none was left out)."""
        if self.quiet is None or self.ratio is None:
            return ""
        left = self.ratio.n - self.quiet.n
        return (f"without the {left} block{'s' if left != 1 else ''} with a noisy run: "
                f"{self.quiet.text()}")

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "axis": self.axis, "num": self.num, "den": self.den,
                "paired": self.ratio.to_dict() if self.ratio else None, "missing": self.missing,
                "welch": self.welch.to_dict() if self.welch else None,
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


Also = tuple[tuple[str, Any, Any], ...]  # (axis, value, ref): comparisons added to the spec's own


@dataclass(frozen=True)
class Planned:
    """One comparison the spec asks, known before any data: ``value`` against ``ref`` on ``axis``."""

    axis: str
    g_axis: str | None  # asked per value of this axis (or None)
    group: Any
    value: Any
    ref: Any

    @property
    def title(self) -> str:
        return AXIS_NAMES.get(self.axis, self.axis) + _group_text(self.g_axis, self.group)


def _cells(axes: dict[str, Any], exclude: list[dict[str, Any]], fixed: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The cells the spec runs (the axes' product less its ``exclude:`` rules), as settings, before any data."""
    names = [(k, None) for k in axes if k != "options"] + [("options", o) for o in (axes.get("options") or {})]
    values = [axes[k] if o is None else axes["options"][o] for k, o in names]
    out = []
    for combo in itertools.product(*values):
        settings = {k: v for k, v in (fixed or {}).items() if k != "options"}
        settings["options"] = dict((fixed or {}).get("options") or {})
        for (k, o), v in zip(names, combo):
            if o is None:
                settings[k] = v
            else:
                settings["options"][o] = v
        if not excluded(settings, exclude):
            out.append(settings)
    return out


def _contrast(cells: list[dict[str, Any]], q: Planned, axes: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The design cells (indices) of each side of ``q``, paired like with like as ``_sides`` pairs configs."""
    rest = lambda c: _key({k: c.get(k) for k in axes if k not in (q.axis, q.g_axis)})  # noqa: E731
    members = [i for i, c in enumerate(cells) if q.g_axis is None or _key(c.get(q.g_axis)) == _key(q.group)]
    num = [i for i in members if _key(cells[i].get(q.axis)) == _key(q.value)]
    den = [i for i in members if _key(cells[i].get(q.axis)) == _key(q.ref)]
    common = {rest(cells[i]) for i in num} & {rest(cells[i]) for i in den}
    return tuple(i for i in num if rest(cells[i]) in common), tuple(i for i in den if rest(cells[i]) in common)


def planned(axes: dict[str, Any], exclude: list[dict[str, Any]] | None = None,
            fixed: dict[str, Any] | None = None, also: Also = ()) -> list[Planned]:
    """Every comparison the spec asks: placement first, then the other axes in the spec's order, then ``also``
    (comparisons between two values of one axis that a caller adds to the family, e.g. two picks of a check).

    A comparison whose side the spec's ``exclude:`` removes is not asked (a 3-cell design of 2 x 2 axes asks 2)."""
    return [q for q, contrast in _design(axes, exclude, fixed, also)[1]]


def _design(axes: dict[str, Any], exclude: list[dict[str, Any]] | None,
            fixed: dict[str, Any] | None, also: Also = ()) -> tuple[list[dict[str, Any]], list[tuple[Planned, tuple]]]:
    """The design's cells, and each planned comparison with its contrast over them (``also``'s last)."""
    cells = _cells(axes, exclude or [], fixed)
    out = []
    for axis, values in sorted(axes.items(), key=lambda kv: kv[0] != "placement"):
        if axis == "options" or len(values) < 2:
            continue  # several options: compared as cells in the per-tier recommendation
        g_axis = group_axis(axis, axes)
        for g in ([None] if g_axis is None else list(axes[g_axis])):
            for v in values[1:]:
                q = Planned(axis, g_axis, g, v, values[0])
                num, den = _contrast(cells, q, axes)
                if num and den:
                    out.append((q, (num, den)))
    for axis, value, ref in also:
        q = Planned(axis, None, None, value, ref)
        num, den = _contrast(cells, q, axes)
        if num and den:
            out.append((q, (num, den)))
    return cells, out


def family_target(target: Target, axes: dict[str, Any], exclude: list[dict[str, Any]] | None = None,
                  fixed: dict[str, Any] | None = None, also: Also = ()) -> Target:
    """The target with its family: the number of planned comparisons shares the error, and the whole procedure
    (the choice between the model and the paired fallback included) is calibrated on the design's cells."""
    cells, asked = _design(axes, exclude, fixed, also)
    return dataclasses.replace(target, comparisons=max(len(asked), 1), cells=len(cells),
                               contrasts=tuple(c for _, c in asked))


def _sides(q: Planned, configs: list[Config], axes: dict[str, Any]) -> tuple[list[Config], list[Config]]:
    members = [c for c in configs if q.g_axis is None or _key(c.settings.get(q.g_axis)) == _key(q.group)]
    num = [c for c in members if _key(c.settings.get(q.axis)) == _key(q.value)]
    den = [c for c in members if _key(c.settings.get(q.axis)) == _key(q.ref)]
    # pair like with like: the other axes' values present on both sides
    rest = lambda c: _key({k: c.settings.get(k) for k in axes if k not in (q.axis, q.g_axis)})  # noqa: E731
    common = {rest(c) for c in num} & {rest(c) for c in den}
    return [c for c in num if rest(c) in common], [c for c in den if rest(c) in common]


def _missing(q: Planned, num: list[Config], den: list[Config]) -> str:
    """Why a planned comparison has no answer (named so the report can say it)."""
    if not num or not den:
        side = value_label(q.axis, q.value if not num else q.ref) + _group_text(q.g_axis, q.group)
        return f"no run of {side} is recorded (not run yet, skipped on this host, or excluded by the spec)"
    bad = [c.label for c in num + den if not c.runs]
    if bad:
        return f"no finished run of {', '.join(bad)} (see the failed runs)"
    bad = [c.label for c in num + den if not c.checks_ok]
    if bad:
        return f"consistency checks failed on {', '.join(bad)}"
    return "no block in which every cell of both sides finished"


def model_fit(configs: list[Config]) -> TwoWay | None:
    """The two-way model over every cell with runs and passing checks."""
    return fit({c.config_key: c.by_block for c in configs if c.runs and c.checks_ok})


def questions(configs: list[Config], axes: dict[str, Any], target: Target | None = None,
              exclude: list[dict[str, Any]] | None = None, fixed: dict[str, Any] | None = None,
              also: Also = ()) -> list[Verdict]:
    """Every planned comparison, each answered (the two-way model when it holds, else paired) or said missing."""
    target = family_target(target or Target(adaptive=False), axes, exclude, fixed, also)
    tw = model_fit(configs)
    out: list[Verdict] = []
    for q in planned(axes, exclude, fixed, also):
        num, den = _sides(q, configs, axes)
        ok = all(c.runs and c.checks_ok for c in num + den) and num and den
        blocks = _common_blocks(num + den) if ok else []
        v = Verdict(q.title, q.axis, value_label(q.axis, q.value), value_label(q.axis, q.ref), None,
                    unpaired(num, den) if ok else None, num, den)
        if not blocks:
            v.missing = _missing(q, num, den)
        elif tw is not None and tw.holds and all(c.config_key in tw.keys for c in num + den):
            v.ratio = from_model(tw, num, den, target)
        else:
            v.ratio = paired(num, den, target)
        if v.ratio is not None and any(r.noisy for c in num + den for r in c.runs):
            quiet = paired(num, den, target, quiet_only=True)
            v.quiet = None if quiet is None or quiet.n == len(blocks) or quiet.n < 2 else quiet
        out.append(v)
    return out


# ---------------------------------------------------------------------------
# Recommendations


@dataclass
class TierFinding:
    tier: str
    winner: Config  # the highest geometric mean (a selection: not evidence by itself)
    chosen: Config  # what the text names: the winner when its planned comparison decides, else the safe default
    runner_up: Config | None
    evidence: Verdict | None  # the planned comparison between winner and runner-up, when the spec asks it
    established: bool  # "use X" is backed by a decided planned comparison
    volatile: bool | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "recommended": self.chosen.label, "recommended_settings": self.chosen.settings,
                "fastest": self.winner.label, "runner_up": self.runner_up.label if self.runner_up else None,
                "evidence": self.evidence.to_dict() if self.evidence else None, "established": self.established,
                "safe_default": not self.established and self.chosen is not self.winner,
                "volatile": self.volatile, "text": self.text}


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


def _evidence(a: Config, b: Config, verdicts: list[Verdict]) -> Verdict | None:
    """The planned comparison of exactly these two cells, if the spec asks it."""
    for v in verdicts:
        sides = ({c.config_key for c in v.num_configs}, {c.config_key for c in v.den_configs})
        if sides in (({a.config_key}, {b.config_key}), ({b.config_key}, {a.config_key})):
            return v
    return None


def recommend(configs: list[Config], axes: dict[str, Any], tier_facts: dict[str, dict] | None = None,
              target: Target | None = None, verdicts: list[Verdict] | None = None) -> list[TierFinding]:
    """Per datadir tier (and per client count when clients vary): what the planned comparisons establish."""
    tier_facts = tier_facts or {}
    verdicts = questions(configs, axes, target) if verdicts is None else verdicts
    tiers: dict[str, list[Config]] = {}
    for c in configs:
        if c.summary is not None and c.checks_ok:
            scope = c.tier + (f" at {c.settings['clients']} clients" if len(axes.get("clients") or []) > 1 else "")
            tiers.setdefault(scope, []).append(c)
    out: list[TierFinding] = []
    for tier, cs in tiers.items():
        ranked = sorted(cs, key=lambda c: c.summary.mean, reverse=True)
        winner, runner = ranked[0], (ranked[1] if len(ranked) > 1 else None)
        ev = _evidence(winner, runner, verdicts) if runner else None
        safest = min(ranked, key=lambda c: (c.risk, c.departures, -c.summary.mean))
        if runner is None:
            chosen, established = winner, False
        elif ev is not None and ev.ratio is not None and ev.ratio.status == "equivalent":
            chosen, established = min((winner, runner), key=lambda c: (c.risk, -c.summary.mean)), True
        elif ev is not None and ev.ratio is not None and ev.ratio.status == "differs":
            chosen, established = winner, True
        else:
            chosen, established = safest, False
        vol = (tier_facts.get(winner.tier) or {}).get("volatile")
        text = _finding_text(tier, winner, chosen, runner, ev, established, axes)
        if vol:
            text += " This tier is volatile (lost at power-off): keep a consistent copy of the data (`innotier persist`)."
        out.append(TierFinding(tier, winner, chosen, runner, ev, established, vol, text))
    return out


def _finding_text(tier: str, winner: Config, chosen: Config, runner: Config | None, ev: Verdict | None,
                  established: bool, axes: dict[str, Any]) -> str:
    if runner is None:
        return f"On {tier}: {_settings_text(winner, axes)} -- {winner.summary.format()} tpmC (the only configuration measured here)."
    if established and ev.ratio.status == "differs":
        return (f"On {tier}: use {_settings_text(chosen, axes)} -- {chosen.summary.format()} tpmC; it beats "
                f"{runner.label} ({ev.text()}).")
    if established:
        return (f"On {tier}: {winner.label} and {runner.label} are equivalent within ±{ev.ratio.margin * 100:.0f}% "
                f"({ev.text()}); use {_settings_text(chosen, axes)}, the safer of the two.")
    why = ev.text() if ev is not None else (f"{winner.label} against {runner.label} is not a planned comparison "
                                            "(exploratory: picked by the same data)")
    return (f"On {tier}: ranking not established ({why}). Safe default: {_settings_text(chosen, axes)} "
            "(a default, not a finding of this sweep).")


def tier_comparison(findings: list[TierFinding], target: Target | None = None) -> list[dict[str, Any]]:
    """Exploratory: each tier's best cell against the best of the best tier.  Both sides are picked by the same
    data, so the interval (nominal 95%, paired) is not covered by the family-wise rate and decides nothing."""
    if len(findings) < 2:
        return []
    nominal = Target(adaptive=False, equivalence=(target or Target()).equivalence)
    ranked = sorted(findings, key=lambda f: f.winner.summary.mean, reverse=True)
    best = ranked[0]
    rows = []
    for f in ranked[1:]:
        r = paired([best.winner], [f.winner], nominal)
        if r is None:
            rows.append({"best_tier": best.tier, "other_tier": f.tier, "best": best.winner.label,
                         "other": f.winner.label, "ratio": None, "exploratory": True,
                         "verdict": "could not be computed: no block in which both finished"})
            continue
        rows.append({"best_tier": best.tier, "other_tier": f.tier, "best": best.winner.label, "other": f.winner.label,
                     "ratio": r.to_dict(), "exploratory": True,
                     "verdict": f"{r.interval()} (nominal 95%, exploratory: the best cells were picked by the same data)"})
    return rows
