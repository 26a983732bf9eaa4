"""The sweep report: self-contained HTML (PNG plots embedded as base64) and Markdown, from the results store.

It answers first: a verdict per question the spec asks (placement; doublewrite and the other axes per tier;
page size per client count), each a within-block ratio with its interval and "decided" or "undecided" with the
blocks 80% power needs, or why it could not be computed; the family-wise error rate and the model check in one
place; then what each tier's planned comparison establishes; the scale the sweep ran at against its seed's; the
noise of every run.

Plots follow the seeds' figures where the sweep has the axes for them:
- a forest plot of the paired ratios (what the verdicts rest on);
- tpmC vs clients, one line per page size (DCPMM paper, seed 000, Fig. 6);
- doublewrite x flush method bars, only when the flush method varies (seed 000, Fig. 7);
- placement comparison bars (dissertation, seed 004, Tables 4.2 and 4.7; RAID paper, seed 001, Fig. 8);
- New-Order latency percentiles per cell, and the tpmC timeline of every run (colour per cell, style per block).
Cell levels are geometric means with intervals computed on the log scale (never a negative bound).
The report reads the store only; it never talks to a server.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from tuner.core.durable import write_json_atomic
from tuner.core.errors import SweepError
from tuner.core.units import human_size, parse_size
from tuner.sweep import outliers as outliers_mod
from tuner.sweep.analysis import (Config, Verdict, configs_from, family_target, label_of, model_fit, questions, recommend,
                                  tier_comparison)
from tuner.sweep.plan import DATADIR_BYTES_PER_WAREHOUSE
from tuner.sweep.evidence import SIGNALS, evidence_columns
from tuner.sweep.results import ResultsStore, noise_columns
from tuner.sweep.sources import name_papers
from tuner.sweep.spec import placement_label
from tuner.sweep.stats import Target

TEMPLATES = Path(__file__).resolve().parent / "templates"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Figure:
    name: str  # file name (PNG)
    title: str
    caption: str
    png: bytes = b""

    @property
    def b64(self) -> str:
        return base64.b64encode(self.png).decode()


@dataclass
class Report:
    run_id: str
    html: Path
    markdown: Path
    figures: list[Path] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    summary_json: Path | None = None
    verdicts: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3, "font.size": 9})
    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


TPMC_AXIS = "tpmC (New-Orders/min)"


def _yerr(cs: list[Config]) -> list[list[float]]:
    """Asymmetric whiskers: the 95% interval of the geometric mean, computed on the log scale."""
    lo = [c.summary.mean - c.summary.low if c.summary.low is not None else 0.0 for c in cs]
    hi = [c.summary.high - c.summary.mean if c.summary.high is not None else 0.0 for c in cs]
    return [lo, hi]


def _thousands(ax, axis: str = "y") -> None:
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(lambda v, _: f"{v:,.0f}")
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(fmt)


def _rest_label(cfg: Config, drop: tuple[str, ...]) -> str:
    return label_of({k: v for k, v in cfg.varying.items() if k not in drop}) if any(
        k not in drop for k in cfg.varying) else "all"


def fig_summary(configs: list[Config]) -> Figure:
    plt = _plt()
    cs = [c for c in configs if c.summary]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(cs) + 1.2))
    labels = [c.label for c in cs]
    means = [c.summary.mean for c in cs]
    ax.barh(range(len(cs)), means, xerr=_yerr(cs), color=[PALETTE[i % len(PALETTE)] for i in range(len(cs))],
            capsize=3)
    ax.set_yticks(range(len(cs)), labels)
    ax.set_ylabel("cell")
    ax.invert_yaxis()
    ax.set_xlabel(f"{TPMC_AXIS}: geometric mean over blocks, 95% interval")
    _thousands(ax, "x")
    return Figure("tpmc_by_cell.png", "tpmC per cell", "Geometric mean tpmC of each cell over its blocks; whiskers "
                  "are the 95% interval computed on the log scale (none with one block). Absolute levels drift "
                  "between blocks; the paired ratios below are what the verdicts rest on.", _png(fig))


def fig_forest(verdicts: list[Verdict]) -> Figure | None:
    """Every paired comparison: ratio and interval on a log axis, 1.0 and the +/-3% band marked."""
    vs = [v for v in verdicts if v.ratio is not None and v.ratio.low is not None]
    if not vs:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(vs) + 1.6))
    for i, v in enumerate(vs):
        r = v.ratio
        colour = "#2ca02c" if r.decided else "#7f7f7f"
        ax.plot([r.low, r.high], [i, i], color=colour, lw=2.2)
        ax.plot([r.ratio], [i], "o", color=colour)
        ax.annotate(f"{r.ratio:.2f}x [{r.low:.2f}, {r.high:.2f}]", (r.high, i), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.axvline(1.0, color="black", lw=1)
    margin = 1.0 + vs[0].ratio.margin
    ax.axvspan(1 / margin, margin, color="#dddddd", alpha=0.6, lw=0,
               label=f"±{vs[0].ratio.margin * 100:.0f}% (equivalent)")
    ax.set_yticks(range(len(vs)), [f"{v.num} / {v.den}" + (f" ({v.scope})" if v.scope else "") for v in vs])
    ax.invert_yaxis()
    ax.set_xscale("log")
    lo = min(v.ratio.low for v in vs)
    hi = max(v.ratio.high for v in vs)
    ax.set_xlim(min(lo, 0.95) / 1.05, max(hi, 1.05) * 1.35)
    from matplotlib.ticker import FuncFormatter, LogLocator

    # fine ticks for a narrow span, 1-2-5 for a wide one (an undecided interval can span decades)
    subs = (1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 7.0) if hi / lo < 8 else (1.0, 2.0, 5.0) if hi / lo < 200 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    ax.set_xlabel("ratio of throughput within blocks (log scale); intervals at the family-wise 95% level")
    ax.set_ylabel("comparison")
    ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, -0.22 if len(vs) < 4 else -0.12), frameon=False)
    return Figure("forest.png", "paired ratios (forest plot)",
                  "Each comparison the report makes: the ratio of the two sides' tpmC within each block, averaged on "
                  "the log scale, with its interval. Green: decided (the interval excludes 1.0, or lies inside the "
                  "equivalence margin); grey: undecided.", _png(fig))


def fig_clients(configs: list[Config]) -> Figure | None:
    if len({c.settings["clients"] for c in configs}) < 2:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    groups: dict[str, list[Config]] = {}
    for c in configs:
        if c.summary:
            key = f"{c.settings['page_size']} pages" + (
                f", {_rest_label(c, ('clients', 'page_size'))}" if _rest_label(c, ("clients", "page_size")) != "all" else "")
            groups.setdefault(key, []).append(c)
    for i, (key, cs) in enumerate(sorted(groups.items())):
        cs = sorted(cs, key=lambda c: c.settings["clients"])
        ax.errorbar([c.settings["clients"] for c in cs], [c.summary.mean for c in cs], yerr=_yerr(cs),
                    marker="o", capsize=3, label=key, color=PALETTE[i % len(PALETTE)])
    ax.set_xscale("log", base=2)
    xs = sorted({c.settings["clients"] for c in configs})
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("clients (connections)")
    ax.set_ylabel(TPMC_AXIS)
    _thousands(ax)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure("tpmc_vs_clients.png", "tpmC vs clients per page size",
                  "As the DCPMM paper's Fig. 6: throughput against connected clients, one line per InnoDB page "
                  "size; whiskers are 95% intervals on the log scale.", _png(fig))


def _grouped_bars(configs: list[Config], hue_of, group_of, ylabel: str, xlabel: str):
    plt = _plt()
    groups = sorted({group_of(c) for c in configs})
    hues = sorted({hue_of(c) for c in configs})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * max(1, len(hues)) * 0.6 + 2), 4))
    width = 0.8 / max(1, len(hues))
    for j, h in enumerate(hues):
        xs, ys, picked = [], [], []
        for i, g in enumerate(groups):
            match = [c for c in configs if group_of(c) == g and hue_of(c) == h and c.summary]
            if match:
                xs.append(i + (j - (len(hues) - 1) / 2) * width)
                ys.append(match[0].summary.mean)
                picked.append(match[0])
        es = _yerr(picked)
        ax.bar(xs, ys, width=width, yerr=es, capsize=3, label=h, color=PALETTE[j % len(PALETTE)])
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel)
    _thousands(ax)
    if len(hues) > 1:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def fig_consistency(configs: list[Config], axes: dict[str, Any]) -> Figure | None:
    """Doublewrite x flush method bars: only when the flush method varies (with the doublewrite alone
    varying they would repeat the placement plot)."""
    if len(axes.get("flush_method") or []) < 2:
        return None

    def hue(c: Config) -> str:
        parts = [str(c.settings.get("flush_method"))]
        if "doublewrite" in axes:
            parts.append(f"doublewrite {c.settings.get('doublewrite')}")
        return ", ".join(parts)

    drop = ("doublewrite", "flush_method")
    fig = _grouped_bars([c for c in configs if c.summary], hue, lambda c: _rest_label(c, drop), TPMC_AXIS,
                        "other settings of the cell")
    return Figure("doublewrite_flush.png", "doublewrite x flush method",
                  "As the DCPMM paper's Fig. 7: tpmC with the doublewrite buffer on/off and each flush method, "
                  "grouped by the other settings; whiskers are 95% intervals on the log scale.", _png(fig))


def fig_placement(configs: list[Config], axes: dict[str, Any]) -> Figure | None:
    if "placement" not in axes:
        return None

    fig = _grouped_bars([c for c in configs if c.summary], lambda c: _rest_label(c, ("placement",)),
                        lambda c: placement_label(c.settings["placement"]), TPMC_AXIS, "where the InnoDB files live")
    return Figure("placement.png", "placement comparison",
                  "As the dissertation's Tables 4.2 and 4.7: tpmC by where the InnoDB files live; bars grouped by "
                  "placement, coloured by the other settings; whiskers are 95% intervals on the log scale.", _png(fig))


def fig_latency(configs: list[Config]) -> Figure | None:
    cs = [c for c in configs if c.latency()]
    if not cs:
        return None
    plt = _plt()
    from matplotlib.ticker import FuncFormatter

    pcts = ("p50", "p90", "p95", "p99")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cs) + 2), 4))
    width = 0.8 / len(pcts)
    for j, p in enumerate(pcts):
        ax.bar([i + (j - 1.5) * width for i in range(len(cs))], [c.latency().get(p, 0.0) for c in cs], width=width,
               label=p, color=PALETTE[j])
    ax.set_xticks(range(len(cs)), [c.label for c in cs], rotation=30, ha="right")
    ax.set_xlabel("cell")
    ax.set_ylabel("New-Order latency (ms, log scale)")
    ax.set_yscale("log")
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    vals = [v for c in cs for p in pcts for v in [c.latency().get(p)] if v]
    nice = [m * 10 ** e for e in range(-2, 6) for m in (1, 2, 5)]
    lo, hi = min(vals), max(vals)
    ticks = [t for t in nice if lo / 2 <= t <= hi * 1.5] or [lo, hi]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # plain ms, not 10^x
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(min(ticks[0], lo) * 0.8, max(ticks[-1], hi) * 1.1)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure("latency.png", "New-Order latency percentiles",
                  "Client-side New-Order latency (p50/p90/p95/p99, ms, log scale), mean across blocks.", _png(fig))


STYLES = ["-", "--", ":", "-."]


def fig_timeline(configs: list[Config]) -> Figure | None:
    runs = [(c, r) for c in configs for r in c.runs if r.timeline]
    if not runs:
        return None
    plt = _plt()
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(8.5, 4))
    blocks = sorted({r.block for _, r in runs})
    for c, r in runs:
        tl = r.timeline
        ax.plot([p["t"] for p in tl], [p["tpmc"] for p in tl], color=PALETTE[configs.index(c) % len(PALETTE)],
                ls=STYLES[blocks.index(r.block) % len(STYLES)], alpha=0.85, lw=1.3)
    ax.set_xlabel("seconds into the measured phase")
    ax.set_ylabel(f"{TPMC_AXIS} per interval")
    _thousands(ax)
    handles = [Line2D([], [], color=PALETTE[configs.index(c) % len(PALETTE)], label=c.label)
               for c in configs if any(cc is c for cc, _ in runs)]
    handles += [Line2D([], [], color="black", ls=STYLES[i % len(STYLES)], label=f"block {b}")
                for i, b in enumerate(blocks[:len(STYLES)])]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title="colour: cell; line: block" + (" (styles repeat every 4)" if len(blocks) > len(STYLES) else ""),
              title_fontsize=7)
    return Figure("timeline.png", "tpmC over time", "tpmC in each report interval of every cell run (colour per cell, "
                  "line style per block): a steady line means the warm-up was long enough; lines of one block moving "
                  "together are the machine's drift, which the paired comparisons cancel.", _png(fig))


def _signal_choice(runs: list[outliers_mod.Run], found: list[outliers_mod.Outlier], most: int = 3) -> list[str]:
    """The signals to plot: those that moved with the outliers (most often first), else the usual suspects."""
    counts: dict[str, int] = {}
    for o in found:
        for m in o.moved:
            counts[m.signal] = counts.get(m.signal, 0) + 1
    ordered = sorted(counts, key=lambda k: -counts[k]) + [k for k in DEFAULT_SIGNALS if k not in counts]
    # a signal the server does not report (None) or that stayed at 0 in every run has nothing to show
    present = [k for k in ordered if any(r.signals.get(k) for r in runs)]
    return present[:most]


DEFAULT_SIGNALS = ("server_cpu_cores", "row_lock_waits", "free_page_waits", "lru_flushed", "iowait_share")


def fig_outliers(runs: list[outliers_mod.Run], found: list[outliers_mod.Outlier]) -> Figure | None:
    """Throughput against each signal, cell by cell (colour), the outlier runs ringed: what moved with them."""
    signals = _signal_choice(runs, found)
    if not found or not signals:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(signals), figsize=(3.6 * len(signals) + 1.5, 3.6), squeeze=False)
    cells = sorted({r.cell for r in runs})
    ringed = {(o.run.cell, o.run.block) for o in found}
    for ax, key in zip(axes[0], signals):
        for i, cell in enumerate(cells):
            pts = [r for r in runs if r.cell == cell and r.signals.get(key) is not None]
            ax.scatter([r.signals[key] for r in pts], [r.tpmc for r in pts], color=PALETTE[i % len(PALETTE)],
                       label=cell, s=28, zorder=3)
            for r in pts:
                ax.annotate(f"b{r.block}", (r.signals[key], r.tpmc), xytext=(4, 3), textcoords="offset points",
                            fontsize=7)
                if (r.cell, r.block) in ringed:
                    ax.scatter([r.signals[key]], [r.tpmc], s=160, facecolors="none", edgecolors="#d62728", lw=1.5,
                               zorder=4)
        label = SIGNALS.get(key, (key, ""))[0]
        ax.set_xlabel(label + (" per second" if key in outliers_mod.RATES else ""))
        ax.set_ylabel(TPMC_AXIS)
        _thousands(ax)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="cell (red ring: outlier)",
                       title_fontsize=7)
    return Figure("outliers.png", "throughput against InnoDB's wait evidence",
                  "Each point is one cell run (b1 = block 1), its tpmC against a signal InnoDB recorded over the same "
                  "measured window; a red ring marks a run whose throughput is an outlier of its cell. A signal that "
                  "moves with the ringed runs names what the server waited on.", _png(fig))


# ---------------------------------------------------------------------------
# Tables


def cell_rows(configs: list[Config]) -> list[dict[str, Any]]:
    rows = []
    for c in configs:
        s = c.summary
        row = {"cell": c.label, "n": s.n if s else 0, "tpmc": s.format() if s else "failed",
               "cv": f"{s.log_sd * 100:.0f}%" if s and s.log_sd is not None else "-",
               "nopm": _mean_str(c.metric_values("nopm")),
               "p95": f"{c.latency().get('p95', 0):.1f}" if c.latency() else "-",
               "checks": "pass" if c.runs and c.checks_ok else ("FAIL" if c.runs else "-"),
               "noisy": sum(bool(r.noisy) for r in c.runs), "failed": len(c.failed)}
        rows.append(row)
    return rows


def evidence_rows(cells) -> list[dict[str, Any]]:
    """InnoDB's wait evidence of every run, beside its throughput and pressure."""
    rows = []
    for c in sorted(cells, key=lambda c: c.idx):
        if c.status != "ok":
            continue
        e = evidence_columns(c.evidence, c.noise)
        num = lambda k: "-" if e[k] is None else f"{e[k]:,.0f}"  # noqa: E731
        rows.append({"block": c.block, "cell": c.label, "tpmc": f"{c.tpmc:,.0f}" if c.tpmc else "-",
                     "wait_free": num("free_page_waits"), "lru": num("lru_flushed"), "flush_list": num("flush_list_flushed"),
                     "row_lock": num("row_lock_waits"), "row_lock_ms": num("row_lock_time_ms"), "log_waits": num("log_waits"),
                     "os_waits": num("os_waits"), "pending_fsyncs": num("pending_fsyncs"),
                     "checkpoint_age": "-" if e["checkpoint_age"] is None else human_size(e["checkpoint_age"]),
                     "cleaner": num("page_cleaner_warnings"), "free_min": num("free_pages_min"),
                     "waiters": num("lock_waiters_max"), "oldest": oldest_text(c.evidence),
                     "cpu": "-" if e["server_cpu_cores"] is None else f"{e['server_cpu_cores']:.2f}",
                     "iowait": "-" if e["iowait_share"] is None else f"{e['iowait_share'] * 100:.0f}%",
                     "error": (c.evidence or {}).get("error") if c.evidence else "not recorded (stored before schema 4)"})
    return rows


def oldest_text(evidence: dict[str, Any] | None) -> str:
    """'34 s: CALL tpcc_new_order, RUNNING (inserting), 12 rows locked' ('-': not sampled: no transaction was open at any sample, or a run recorded before the
    sampler read it)."""
    old = ((evidence or {}).get("peaks") or {}).get("oldest_trx")
    if not old:
        return "-"
    what = ", ".join(x for x in (old.get("statement"), old.get("state")) if x)
    op = f" ({old['operation']})" if old.get("operation") else ""
    return f"{old['age_s']} s: {what}{op}, {old.get('rows_locked') or 0} rows locked"


def evidence_note(cells) -> str:
    """What the servers of this run report and do not report, so that a 0 is not read as 'no waits'."""
    ok = [c for c in cells if c.status == "ok"]
    mariadb = [c for c in ok if "mariadb" in (c.server_version or "").lower()]
    parts = ["Counts are over each run's measured window (SHOW GLOBAL STATUS and SHOW ENGINE INNODB STATUS at "
             "both ends, the error log between them); CPU is the sweep's own processes' (the server and the "
             "driver), iowait the machine's."]
    if mariadb:
        parts.append("MariaDB counts almost no free-page waits (0 was recorded even where every page write was an "
                     "LRU flush): its page cleaner frees pages ahead of the threads, so read the LRU-flushed pages "
                     "(dirty pages written to free a page) as the eviction pressure. It prints no OS-wait or spin "
                     "counts (its SEMAPHORES section is empty since 10.6) and no page-cleaner overrun warnings "
                     "(since 10.5): \"-\" there means not reported, not zero.")
    if any(c.server_version and "mariadb" not in c.server_version.lower() for c in ok):
        parts.append("MySQL counts free-page waits and OS waits but does not split LRU flushing out of the pages "
                     "flushed in SHOW STATUS.")
    missing = [c for c in ok if not c.evidence]
    if missing:
        parts.append(f"{len(missing)} run{'s' if len(missing) != 1 else ''} carry no evidence (recorded before "
                     "innotier stored it).")
    return " ".join(parts)


def noise_rows(cells) -> list[dict[str, Any]]:
    rows = []
    for c in sorted(cells, key=lambda c: c.idx):
        n = noise_columns(c.noise)
        pct = lambda v: "-" if v is None else f"{v * 100:.0f}%"  # noqa: E731
        rows.append({"block": c.block, "cell": c.label, "tpmc": f"{c.tpmc:,.0f}" if c.tpmc else "-",
                     "others": pct(n["others_cpu_share"]), "steal": pct(n["steal_share"]),
                     "load": "-" if n["load1_end"] is None else f"{n['load1_end']:.1f}",
                     "psi_cpu": pct(n["psi_cpu_some"]), "psi_io": pct(n["psi_io_some"]),
                     "probe_cpu": "-" if n["probe_cpu_s"] is None else f"{n['probe_cpu_s'] * 1000:.0f} ms",
                     "probe_fsync": "-" if n["probe_fsync_ms"] is None else f"{n['probe_fsync_ms']:.2f} ms",
                     "flag": "NOISY" if n["noisy"] else ("" if n["noisy"] is not None else "-")})
    return rows


def noise_explains(cells, configs: list[Config]) -> str | None:
    """Does the noise explain the spread?  Within blocks: each run's log deviation from its cell's mean, less its
    block's mean deviation, against others' CPU share less its block's mean (Spearman).  Comparing runs of one
    block with each other keeps the machine's drift between blocks out of the correlation."""
    from scipy.stats import spearmanr  # deferred: SciPy at CLI start-up costs ~1 s of CPU (see numlib.py)

    gm = {c.config_key: math.log(c.summary.mean) for c in configs if c.summary}
    by_block: dict[int, list[tuple[float, float]]] = {}
    for c in cells:
        w = (c.noise or {}).get("window") or {}
        if c.status == "ok" and c.tpmc and c.config_key in gm and w.get("others_cpu_share") is not None:
            by_block.setdefault(c.block, []).append((math.log(c.tpmc) - gm[c.config_key], w["others_cpu_share"]))
    dev, share = [], []
    for runs in by_block.values():
        if len(runs) < 2:
            continue
        md = sum(d for d, _ in runs) / len(runs)
        ms = sum(x for _, x in runs) / len(runs)
        dev += [d - md for d, _ in runs]
        share += [x - ms for _, x in runs]
    if len(dev) < 6 or len(set(share)) < 2:
        return None
    rho, p = spearmanr(share, dev)
    if p < 0.05 and rho < 0:
        return (f"The noise explains part of the spread: within a block, runs taken while other processes used more "
                f"CPU were slower than their cell's mean (Spearman rho = {rho:.2f}, p = {p:.2g}, {len(dev)} runs).")
    return (f"Within blocks, others' CPU use does not explain the spread of the runs (Spearman rho = {rho:.2f}, "
            f"p = {p:.2g}, {len(dev)} runs): the spread comes from elsewhere (I/O, caches) or is the cells' own.")


def noise_warning(cells) -> str | None:
    """When most runs were taken on a busy machine, say what that does to the answers."""
    flagged = [c for c in cells if c.noisy]
    known = [c for c in cells if c.noisy is not None]
    if not known or len(flagged) < 0.8 * len(known):
        return None
    shares = sorted(((c.noise or {}).get("window") or {}).get("others_cpu_share") or 0.0 for c in flagged)
    median = shares[len(shares) // 2]
    return (f"{len(flagged)} of {len(known)} runs were taken while other processes used most of the CPU (median "
            f"{median * 100:.0f}%): the server under test was short of CPU, which shrinks storage differences and "
            "widens the spread within blocks. Run it again when the machine is quieter, with --wait-quiet and a "
            "larger --budget: the run resumes and adds blocks.")


def _mean_str(vals: list[float]) -> str:
    return f"{sum(vals) / len(vals):,.0f}" if vals else "-"


def scale_note(spec: dict[str, Any], cells, design: dict[str, Any] | None = None) -> dict[str, Any]:
    """The regime the sweep ran in: data size against the buffer pool, and the run length."""

    w = spec.get("workload") or {}
    # the TPC-C tables and indexes (what competes for the buffer pool), not the datadir with its redo and ibdata
    data = int(w.get("warehouses") or 0) * DATADIR_BYTES_PER_WAREHOUSE
    bps = {c.settings.get("buffer_pool_size") for c in cells if c.settings.get("buffer_pool_size")}
    bp = min((parse_size(b) for b in bps), default=None)
    regime = (design or {}).get("regime") or {}
    out: dict[str, Any] = {"data": human_size(data) if data else "unknown", "buffer_pool": human_size(bp) if bp else
                           "server default", "ratio": (data / bp) if data and bp else None,
                           "warehouses": w.get("warehouses"), "duration": w.get("duration"), "warmup": w.get("warmup")}
    seed_ratio = None
    if regime.get("seed_data") and regime.get("seed_buffer_pool"):
        seed_ratio = regime["seed_data"] / regime["seed_buffer_pool"]
    out["seed_ratio"] = seed_ratio
    out["seed_source"] = name_papers(regime.get("seed_source") or "") or None
    out["seed_note"] = name_papers(regime.get("note") or "") or None
    ratio = out["ratio"]
    lines = [f"This sweep ran {w.get('warehouses')} warehouse(s), about {out['data']} of TPC-C tables and indexes, "
             f"against a "
             f"{out['buffer_pool']} buffer pool" + (f" (data : buffer pool = {ratio:.1f} : 1)" if ratio else "") +
             f", with {w.get('warmup')} s warm-up and {w.get('duration')} s measured per cell run."]
    if seed_ratio:
        lines.append(f"The seed it reproduces ({out['seed_source']}) ran at {seed_ratio:.2g} : 1.")
    if ratio is not None and ratio < 1.5:
        lines.append("The data fit in the buffer pool: reads never reach the storage, so effects that come from page "
                     "reads and evictions (page size, tiers under a read-heavy load) cannot appear; what is measured "
                     "is the write path (redo, doublewrite, flushing).")
    if (w.get("duration") or 0) < 300:
        lines.append("Runs this short measure the first minutes after a warm start: checkpoint and purge cycles of a "
                     "10-minute run (the DCPMM paper's) are not reached, so absolute tpmC is not comparable with "
                     "published figures; the ratios between cells are what this report establishes.")
    out["text"] = " ".join(lines)
    return out


# ---------------------------------------------------------------------------
# The report


def target_of(info: dict[str, Any]) -> Target:
    """The decision target stored with the run at its first start (the family and the whole procedure's
    calibration from the spec when a run stored before them lacks them)."""
    t = ((info.get("design") or {}).get("target")) or {}
    fields = {k: t[k] for k in ("equivalence", "alpha", "min_blocks", "max_blocks", "adaptive", "comparisons", "cells")
              if k in t}
    if "contrasts" in t:
        fields["contrasts"] = tuple((tuple(a), tuple(b)) for a, b in t["contrasts"])
    target = Target(**fields) if fields else Target(adaptive=False)
    spec = info.get("spec") or {}
    return target if t.get("cells") else family_target(target, spec.get("axes") or {}, spec.get("exclude"),
                                                      spec.get("fixed"))


def _code(text: str) -> Markup:
    """`innotier persist` as <code> in HTML (the text is escaped first)."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def build_report(store: ResultsStore, run: str, out_dir: str | Path) -> Report:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    info = store.run(run)
    run_id = info["run_id"]
    cells = store.cells(run_id)
    if not cells:
        raise SweepError(f"run {run_id} has no finished cells yet; run `innotier sweep run` first")
    spec = info["spec"]
    axes = spec.get("axes") or {}
    target = target_of(info)
    configs = configs_from(cells, axes)
    tier_facts: dict[str, dict] = {}
    for c in cells:
        for t, f in ((c.tiers or {}).get("facts") or {}).items():
            tier_facts.setdefault(t, f)
    verdicts = questions(configs, axes, target, spec.get("exclude"), spec.get("fixed"))
    findings = recommend(configs, axes, tier_facts, target, verdicts)
    tw = model_fit(configs)
    across = tier_comparison(findings, target)
    runs = outliers_mod.runs_of(cells)
    outliers = outliers_mod.find(runs)
    figures = [f for f in (fig_forest(verdicts), fig_summary(configs), fig_clients(configs),
                           fig_consistency(configs, axes), fig_placement(configs, axes), fig_latency(configs),
                           fig_timeline(configs), fig_outliers(runs, outliers)) if f]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in figures:
        p = out / f.name
        p.write_bytes(f.png)
        paths.append(p)
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["code"] = _code
    failed = [c for c in cells if c.status != "ok"]
    total = info["total_cells"]
    done = sum(1 for c in cells if c.status == "ok")
    blocks = sorted({c.block for c in cells if c.status == "ok"})
    by_question: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_question.setdefault(v.question, []).append(v)
    design = info.get("design") or {}
    stop = info.get("stop")
    complete = info.get("finished_at") is not None
    context = {
        "run": info, "run_id": run_id, "spec": spec, "spec_yaml": info["spec_yaml"], "env": info["environment"],
        "figures": figures, "rows": cell_rows(configs), "verdicts": verdicts, "by_question": by_question,
        "findings": findings, "across": across, "failed": failed, "done": done, "total": total,
        "complete": complete, "configs": configs, "tier_facts": tier_facts, "blocks": len(blocks),
        "design": design, "stop": stop, "target": target, "noise": noise_rows(cells),
        "model_text": tw.check_text() if tw else "The two-way model needs 2 cells and 2 complete blocks; every "
                      "comparison uses its own paired interval.",
        "noisy_runs": sum(bool(c.noisy) for c in cells), "noise_explains": noise_explains(cells, configs),
        "noise_warning": noise_warning(cells),
        "outliers": outliers, "evidence": evidence_rows(cells), "evidence_note": evidence_note(cells),
        "scale": scale_note(spec, cells, info.get("design")),
        "goldens": sorted({json.dumps((c.golden or {}).get("key", {}), sort_keys=True) for c in cells}),
        "option_files": {cfg.label: cfg.runs[0].option_file for cfg in configs if cfg.runs and cfg.runs[0].option_file},
    }
    html = out / "report.html"
    html.write_text(env.get_template("report.html.j2").render(**context))
    md = out / "report.md"
    md.write_text(env.get_template("report.md.j2").render(**context))
    summary = out / "summary.json"
    write_json_atomic(summary, {
        "run_id": run_id, "complete": complete, "blocks": len(blocks), "design": design, "stop": stop,
        "family": target.family_text(), "model": tw.to_dict() if tw else None,
        "scale": context["scale"], "verdicts": [v.to_dict() for v in verdicts], "cells": [
            {"cell": c.label, "settings": c.settings, "tpmc": c.summary.to_dict() if c.summary else None,
             "checks_ok": c.checks_ok} for c in configs],
        "noise": context["noise"], "outliers": [o.to_dict() for o in outliers],
        "recommendations": [f.to_dict() for f in findings], "tiers": across})
    return Report(run_id, html, md, paths, [f.text for f in findings], summary, [v.text() for v in verdicts])
