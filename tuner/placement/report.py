"""Show a profile and an advice: rows for a table, and pictures (matplotlib, imported when drawing).

The profile's picture puts, for each candidate, where its I/O time went (read, write, fsync/misc wait,
seconds per second of workload) beside its size: the two numbers the advisor trades against each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.core.units import human_size
from tuner.placement.model import Advice, FileIo, IoProfile, sum_io

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: str | Path) -> Path:
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


PROFILE_COLUMNS = ["candidate", "kind", "size", "reads", "writes", "misc", "read ms/s", "write ms/s",
                   "misc ms/s", "share"]


def candidate_io(profile: IoProfile) -> list[tuple[str, str, int, FileIo]]:
    """(key, kind, size, whole-window I/O) per candidate, then one row for the other files; most wait first."""
    totals = profile.file_totals()
    rows = [(c.key, c.kind, c.size_bytes, sum_io(totals[f] for f in c.files if f in totals))
            for c in profile.candidates]
    others = sum_io(totals[f] for f in profile.other_files if f in totals)
    rows.sort(key=lambda r: (-r[3].wait_s, -r[3].ops, r[0]))
    if others.ops:
        rows.append(("(other files)", "other", 0, others))
    return rows


def profile_rows(profile: IoProfile) -> list[dict[str, Any]]:
    secs = profile.seconds or 1.0
    rows = candidate_io(profile)
    total = sum(io.wait_s for *_, io in rows) or 1.0
    out = []
    for key, kind, size, io in rows:
        timed = io.timed
        out.append({"candidate": key, "kind": kind, "size": human_size(size) if size else "",
                    "reads": io.reads, "writes": io.writes, "misc": io.misc,
                    "read ms/s": f"{1000 * io.read_s / secs:.2f}" if timed else "counted",
                    "write ms/s": f"{1000 * io.write_s / secs:.2f}" if timed else "counted",
                    "misc ms/s": f"{1000 * io.misc_s / secs:.2f}" if timed else "counted",
                    "share": f"{100 * io.wait_s / total:.1f}%" if timed else ""})
    return out


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None else f"[{1000 * low:.2f}, {1000 * high:.2f}]"


def advice_rows(advice: Advice) -> list[dict[str, Any]]:
    everything = next((p for p in advice.naive if p.name == "everything"), None)
    out = []
    for p in (advice.pick, *advice.naive):
        share = (f"{100 * p.saving / everything.saving:.0f}%" if everything and everything.saving > 0 else "")
        out.append({"pick": p.name, "size": human_size(p.size_bytes), "saving ms/s": f"{1000 * p.saving:.2f}",
                    "95% interval": _interval(p.low, p.high), "of everything's": share,
                    "ceiling x": f"{advice.bounds[p.name]:.2f}x" if p.name in advice.bounds else "",
                    "candidates": ", ".join(p.keys) or "(none)"})
    return out


ADVICE_COLUMNS = ["pick", "size", "saving ms/s", "95% interval", "of everything's", "ceiling x", "candidates"]


def write_profile_png(profile: IoProfile, path: str | Path, top: int = 20) -> Path:
    plt = _pyplot()
    rows = [r for r in candidate_io(profile) if r[0] != "(other files)"][:top][::-1]
    secs = profile.seconds or 1.0
    labels = [r[0] + ("" if r[3].timed else " (counted)") for r in rows]
    ys = range(len(rows))
    fig, (ax_t, ax_s) = plt.subplots(1, 2, sharey=True, figsize=(11, 0.35 * len(rows) + 1.8),
                                     gridspec_kw={"width_ratios": [3, 2]})
    left = [0.0] * len(rows)
    for what, attr in (("read", "read_s"), ("write", "write_s"), ("fsync/misc", "misc_s")):
        vals = [1000 * getattr(r[3], attr) / secs for r in rows]
        ax_t.barh(ys, vals, left=left, label=what)
        left = [a + b for a, b in zip(left, vals)]
    ax_t.set_yticks(list(ys), labels)
    ax_t.set_xlabel("I/O wait, ms per second of workload")
    ax_t.legend(loc="lower right")
    ax_s.barh(ys, [r[2] / (1 << 20) for r in rows], color="grey")
    ax_s.set_xlabel("size, MiB")
    fig.suptitle(f"Where the I/O time goes: {profile.profile_id} ({profile.server.get('flavor')} "
                 f"{profile.server.get('version')}, {profile.seconds:.0f} s)")
    return _save(plt, fig, path)


def write_curve_png(advice: Advice, path: str | Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([b / (1 << 20) for b, _ in advice.curve], [1000 * g for _, g in advice.curve],
            drawstyle="steps-post", label=f"best saving ({advice.curve_method})")
    for p, marker in zip((advice.pick, *advice.naive), "o^sD"):
        ax.plot([p.size_bytes / (1 << 20)], [1000 * p.saving], marker=marker, linestyle="", label=p.name)
        if p.low is not None:
            ax.errorbar([p.size_bytes / (1 << 20)], [1000 * p.saving], fmt="none", ecolor="black",
                        yerr=[[1000 * (p.saving - p.low)], [1000 * (p.high - p.saving)]])
    ax.axvline(advice.budget_bytes / (1 << 20), color="grey", linestyle=":", label="budget")
    ax.set_xlabel("bytes on the fast tier, MiB")
    ax.set_ylabel("predicted I/O wait saved, ms/s")
    ax.legend(fontsize="small")
    return _save(plt, fig, path)


def write_check_png(res, path: str | Path) -> Path:
    """A check's cells, measured throughput over none with their intervals, at the bytes each placed, beside the
    queueing model's throughput against budget (``check.CheckResult``; everything is off the scale, said)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if res.curve:
        ax.plot([p["bytes"] / (1 << 20) for p in res.curve], [p["queueing_ratio"] for p in res.curve],
                marker=".", label="advisor's pick at each budget, queueing model")
    rows = [r for r in res.rows if r.measured_ratio is not None and r.keys and r.name != "everything"]
    for r, marker in zip(rows, "o^sDvP<>"):
        x = (r.bytes_placed if r.bytes_placed is not None else r.bytes_advised) / (1 << 20)
        ax.plot([x], [r.measured_ratio], marker=marker, linestyle="", label=f"{r.name}, measured")
        if r.measured_low is not None:
            ax.errorbar([x], [r.measured_ratio], fmt="none", ecolor="black",
                        yerr=[[r.measured_ratio - r.measured_low], [r.measured_high - r.measured_ratio]])
        if r.queueing_ratio is not None:
            ax.plot([x], [r.queueing_ratio], marker=marker, linestyle="", markerfacecolor="none", color="grey")
    every = next((r for r in res.rows if r.name == "everything"), None)
    if every is not None and every.measured_ratio is not None:
        ax.set_title(f"everything on the fast tier: {every.measured_ratio:.1f}x (the model is fitted to it)",
                     fontsize="medium")
    ax.set_yscale("log")   # everything is often two orders of magnitude above the picks
    ax.set_xlabel("bytes on the fast tier, MiB")
    ax.set_ylabel("throughput over nothing moved, x (log)")
    ax.legend(fontsize="small")
    return _save(plt, fig, path)
