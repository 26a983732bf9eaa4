"""The sweep report: self-contained HTML (PNG plots embedded as base64) and Markdown, from the results store.

Plots follow the seeds' figures where the sweep has the axes for them:
- tpmC vs clients, one line per page size (DCPMM paper, seed 000, Fig. 6);
- doublewrite x flush method bars per page size or tier (seed 000, Fig. 7);
- placement comparison bars (dissertation, seed 004, Tables 4.2 and 4.7; RAID paper, seed 001, Fig. 8);
- New-Order latency percentiles per cell, and the tpmC timeline of every cell run.
Bars and points carry the 95% confidence interval across repeats (Student t) where there are >= 2.
The report reads the store only; it never talks to a server.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.errors import SweepError
from tuner.sweep.analysis import Config, configs_from, label_of, recommend, tier_comparison
from tuner.sweep.results import ResultsStore
from tuner.sweep.stats import compare
from tuner.sweep.spec import placement_label

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


def _err(cfg: Config) -> float:
    s = cfg.summary
    return 0.0 if s is None or s.half_width is None else s.half_width


def _yerr(cs: list[Config]) -> list[list[float]]:
    """Asymmetric whiskers: the 95% CI, its lower end clipped at 0 (throughput is never negative;
    with two repeats t(0.975, 1) = 12.7 makes the interval wide)."""
    return [[min(_err(c), c.summary.mean) for c in cs], [_err(c) for c in cs]]


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
    ax.invert_yaxis()
    ax.set_xlabel("tpmC (New-Order commits per minute), mean with 95% CI")
    return Figure("tpmc_by_cell.png", "tpmC per cell", "Mean tpmC of each cell across its repeats; whiskers are the "
                  "95% confidence interval (Student t; none with one repeat; clipped at 0).", _png(fig))


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
    ax.set_xlabel("clients")
    ax.set_ylabel("tpmC")
    ax.legend(fontsize=8)
    return Figure("tpmc_vs_clients.png", "tpmC vs clients per page size",
                  "As the DCPMM paper's Fig. 6: throughput against connected clients, one line per InnoDB page "
                  "size; whiskers are 95% CIs.", _png(fig))


def _grouped_bars(configs: list[Config], hue_of, group_of, ylabel: str):
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
    if len(hues) > 1:
        ax.legend(fontsize=8)
    return fig


def fig_consistency(configs: list[Config], axes: dict[str, Any]) -> Figure | None:
    if "doublewrite" not in axes and "flush_method" not in axes:
        return None

    def hue(c: Config) -> str:
        parts = []
        if "flush_method" in axes:
            parts.append(str(c.settings.get("flush_method")))
        if "doublewrite" in axes:
            parts.append(f"doublewrite {c.settings.get('doublewrite')}")
        return ", ".join(parts)

    drop = ("doublewrite", "flush_method")
    fig = _grouped_bars([c for c in configs if c.summary], hue, lambda c: _rest_label(c, drop), "tpmC")
    return Figure("doublewrite_flush.png", "doublewrite x flush method",
                  "As the DCPMM paper's Fig. 7: tpmC with the doublewrite buffer on/off and each flush method, "
                  "grouped by the other settings; whiskers are 95% CIs.", _png(fig))


def fig_placement(configs: list[Config], axes: dict[str, Any]) -> Figure | None:
    if "placement" not in axes:
        return None

    fig = _grouped_bars([c for c in configs if c.summary], lambda c: _rest_label(c, ("placement",)),
                        lambda c: placement_label(c.settings["placement"]), "tpmC")
    return Figure("placement.png", "placement comparison",
                  "As the dissertation's Tables 4.2 and 4.7: tpmC by where the InnoDB files live; bars grouped by "
                  "placement, coloured by the other settings; whiskers are 95% CIs.", _png(fig))


def fig_latency(configs: list[Config]) -> Figure | None:
    cs = [c for c in configs if c.latency()]
    if not cs:
        return None
    plt = _plt()
    pcts = ("p50", "p90", "p95", "p99")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cs) + 2), 4))
    width = 0.8 / len(pcts)
    for j, p in enumerate(pcts):
        ax.bar([i + (j - 1.5) * width for i in range(len(cs))], [c.latency().get(p, 0.0) for c in cs], width=width,
               label=p, color=PALETTE[j])
    ax.set_xticks(range(len(cs)), [c.label for c in cs], rotation=30, ha="right")
    ax.set_ylabel("New-Order latency (ms)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    return Figure("latency.png", "New-Order latency percentiles",
                  "Client-side New-Order latency (p50/p90/p95/p99, ms, log scale), mean across repeats.", _png(fig))


def fig_timeline(configs: list[Config]) -> Figure | None:
    runs = [(c, r) for c in configs for r in c.runs if r.timeline]
    if not runs:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for i, (c, r) in enumerate(runs):
        tl = r.timeline
        ax.plot([p["t"] for p in tl], [p["tpmc"] for p in tl], color=PALETTE[configs.index(c) % len(PALETTE)],
                alpha=0.8, label=f"{c.label} r{r.repeat}" if len(runs) <= 12 else None)
    ax.set_xlabel("seconds into the measured phase")
    ax.set_ylabel("tpmC per interval")
    if len(runs) <= 12:
        ax.legend(fontsize=7)
    return Figure("timeline.png", "tpmC over time", "tpmC in each report interval of every cell run: a steady line "
                  "means the warm-up was long enough.", _png(fig))


# ---------------------------------------------------------------------------
# Tables


def cell_rows(configs: list[Config], baseline: Config | None) -> list[dict[str, Any]]:
    rows = []
    for c in configs:
        s = c.summary
        row = {"cell": c.label, "n": s.n if s else 0, "tpmc": s.format() if s else "failed",
               "stdev": f"{s.stdev:,.0f}" if s and s.stdev is not None else "-",
               "ci": (f"{s.ci_low:,.0f} .. {s.ci_high:,.0f}" if s and s.ci_low is not None else "-"),
               "nopm": _mean_str(c.metric_values("nopm")),
               "p95": f"{c.latency().get('p95', 0):.1f}" if c.latency() else "-",
               "checks": "pass" if c.runs and c.checks_ok else ("FAIL" if c.runs else "-"),
               "failed": len(c.failed), "vs": "-"}
        if baseline is not None and c is not baseline and s and baseline.summary:
            row["vs"] = compare(baseline.tpmc_values, c.tpmc_values).verdict()
        rows.append(row)
    return rows


def _mean_str(vals: list[float]) -> str:
    return f"{sum(vals) / len(vals):,.0f}" if vals else "-"


def _baseline(configs: list[Config]) -> Config | None:
    """The first cell of the spec (the first value of every axis) is the reference of the table."""
    return next((c for c in configs if c.summary), None)


# ---------------------------------------------------------------------------
# The report


def build_report(store: ResultsStore, run: str, out_dir: str | Path) -> Report:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    info = store.run(run)
    run_id = info["run_id"]
    cells = store.cells(run_id)
    if not cells:
        raise SweepError(f"run {run_id} has no finished cells yet; run `innotier sweep run` first")
    spec = info["spec"]
    axes = spec.get("axes") or {}
    configs = configs_from(cells, axes)
    tier_facts: dict[str, dict] = {}
    for c in cells:
        for t, f in ((c.tiers or {}).get("facts") or {}).items():
            tier_facts.setdefault(t, f)
    findings = recommend(configs, axes, tier_facts)
    across = tier_comparison(findings)
    figures = [f for f in (fig_summary(configs), fig_clients(configs), fig_consistency(configs, axes),
                           fig_placement(configs, axes), fig_latency(configs), fig_timeline(configs)) if f]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in figures:
        p = out / f.name
        p.write_bytes(f.png)
        paths.append(p)
    baseline = _baseline(configs)
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    failed = [c for c in cells if c.status != "ok"]
    total = info["total_cells"]
    done = sum(1 for c in cells if c.status == "ok")
    context = {
        "run": info, "run_id": run_id, "spec": spec, "spec_yaml": info["spec_yaml"], "env": info["environment"],
        "figures": figures, "rows": cell_rows(configs, baseline), "baseline": baseline.label if baseline else None,
        "findings": findings, "across": across, "failed": failed, "done": done, "total": total,
        "complete": done == total, "configs": configs, "tier_facts": tier_facts,
        "goldens": sorted({json.dumps((c.golden or {}).get("key", {}), sort_keys=True) for c in cells}),
        "option_files": {cfg.label: cfg.runs[0].option_file for cfg in configs if cfg.runs and cfg.runs[0].option_file},
        "test": "Welch's unequal-variances t-test, two-sided, alpha 0.05",
        "min_n": min((c.summary.n for c in configs if c.summary), default=0),
    }
    html = out / "report.html"
    html.write_text(env.get_template("report.html.j2").render(**context))
    md = out / "report.md"
    md.write_text(env.get_template("report.md.j2").render(**context))
    summary = out / "summary.json"
    summary.write_text(json.dumps({
        "run_id": run_id, "complete": done == total, "cells": [
            {"cell": c.label, "settings": c.settings, "tpmc": c.summary.to_dict() if c.summary else None,
             "checks_ok": c.checks_ok} for c in configs],
        "recommendations": [f.to_dict() for f in findings], "tiers": across}, indent=2, sort_keys=True, default=str))
    return Report(run_id, html, md, paths, [f.text for f in findings], summary)
