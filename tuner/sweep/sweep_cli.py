"""`innotier sweep plan|run|report`, `innotier results list|show|export`, and `innotier demo`."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tuner.core.units import format_duration
from tuner.core.errors import SweepError
from tuner.core.cliutil import print_json, print_table, to_jsonable
from tuner.sweep.plan import make_plan, print_plan
from tuner.sweep.spec import SPECS_DIR, TierSpec, load_spec, parse_stop_budget
from tuner.sweep.runner import Runner, RunnerOptions
from tuner.sweep.report import build_report
from tuner.sweep.power import power_plan, print_power
from tuner.sweep.results import ResultsStore, default_results_path
from tuner.sweep.evidence import SIGNALS, evidence_columns
from tuner.sweep.outliers import PRESSURE
from tuner.core.paths import innotier_home

DEFAULT_LISTEN = "127.0.0.1:9623"


def register(sub) -> None:
    p = sub.add_parser("sweep", help="TPC-C sweeps: plan, run (resumable), report",
                       description="Run a sweep spec (YAML; see tuner/sweep/specs/) cell by cell.")
    s = p.add_subparsers(dest="sweep_cmd", metavar="SUBCOMMAND")
    s.required = True

    pl = s.add_parser("plan", help="expand a spec into cells, validate every cell, estimate the time (changes nothing)")
    pl.add_argument("spec", help="a spec file, or a shipped spec name (demo, placement-media, ...)")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    pl.add_argument("--effect", metavar="SHARE", type=_share, default=0.10,
                    help="power planning: blocks needed to decide a difference this large (default 10%%)")
    _results_arg(pl)
    pl.set_defaults(func=cmd_plan)

    r = s.add_parser("run", help="run a spec; running it again resumes where it stopped")
    r.add_argument("spec", help="a spec file, or a shipped spec name")
    _results_arg(r)
    _metrics_args(r)
    _noise_args(r)
    _budget_arg(r)
    r.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    r.add_argument("--report", metavar="DIR", help="write the report to DIR when the run ends")
    r.add_argument("--no-pt-summary", action="store_true", help="do not store pt-mysql-summary output")
    r.add_argument("--json", action="store_true", help="print a JSON summary at the end")
    r.set_defaults(func=cmd_run)

    rp = s.add_parser("report", help="write the HTML and Markdown report of a run")
    rp.add_argument("run", help="a spec file or name (its run), or a run id from `innotier results list`")
    rp.add_argument("-o", "--output", metavar="DIR", required=True, help="directory for report.html, report.md, PNGs")
    _results_arg(rp)
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(func=cmd_report)

    res = sub.add_parser("results", help="the sweep results database: list, show, export")
    rs = res.add_subparsers(dest="results_cmd", metavar="SUBCOMMAND")
    rs.required = True
    ls = rs.add_parser("list", help="runs in the results database")
    _results_arg(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_results_list)
    sh = rs.add_parser("show", help="a run's cells, or everything stored about one cell")
    sh.add_argument("run", help="run id (or its prefix, or the spec name for its newest run)")
    sh.add_argument("cell", nargs="?", help="cell id, its prefix, or its number")
    _results_arg(sh)
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=cmd_results_show)
    ex = rs.add_parser("export", help="one row per cell run, as CSV or JSON")
    ex.add_argument("run")
    fmt = ex.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", action="store_true")
    fmt.add_argument("--json", action="store_true")
    ex.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    _results_arg(ex)
    ex.set_defaults(func=cmd_results_export)

    d = sub.add_parser("demo", help="the demo: a small sweep across this host's tiers, with metrics and a report",
                       description="Start sandboxes, run the shipped demo sweep on the disk (doublewrite on and off) "
                                   "and a tmpfs (doublewrite on), serve Prometheus metrics while it runs, and write "
                                   "the report.")
    d.add_argument("-o", "--output", metavar="DIR", help="report directory (default $INNOTIER_HOME/reports/RUN_ID)")
    _results_arg(d)
    _metrics_args(d)
    _noise_args(d)
    _budget_arg(d)
    d.add_argument("--dry-run", action="store_true", help="print the demo's plan and stop")
    d.set_defaults(func=cmd_demo)


def _results_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", metavar="PATH", help="results database (default $INNOTIER_HOME/results.db)")


def _noise_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait-quiet", metavar="SECONDS", type=float, nargs="?", const=120.0, default=None,
                   help="before each measured window wait (at most SECONDS, default 120) until other processes use "
                        "less than the noise threshold of the CPU")
    p.add_argument("--noise-threshold", metavar="SHARE", type=_share, default=None,
                   help="flag a run when other processes used more than this share of the CPU (default 0.25)")


def _budget_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", metavar="TIME", help="repeats: auto: time budget for cell runs, e.g. 30m (overrides the "
                   "spec's stop.budget; a larger one resumes a stopped run and adds blocks)")


def _with_budget(spec, text: str | None):
    """The spec with stop.budget replaced (the budget is not part of the run id: the same run continues)."""
    if not text:
        return spec
    if not spec.adaptive:
        raise SweepError("--budget applies only to specs with repeats: auto; remove it or set repeats: auto")
    seconds = parse_stop_budget(text)
    return dataclasses.replace(spec, stop=dataclasses.replace(spec.stop, budget=seconds))


def _share(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share; give a fraction like 0.25 or 25%") from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1; give a fraction like 0.25 or 25%")
    return v


def _metrics_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                   help=f"serve Prometheus metrics here while running (default {DEFAULT_LISTEN}; port 0: any free)")
    p.add_argument("--no-metrics", action="store_true", help="do not serve metrics")


# ---------------------------------------------------------------------------


def cmd_plan(args) -> int:
    plan = make_plan(load_spec(args.spec))
    path = args.results or default_results_path()
    store = ResultsStore(path, create=False) if os.path.exists(path) else None
    try:
        pp = power_plan(plan, store, args.effect)
    finally:
        if store is not None:
            store.close()
    if args.json:
        print_json({**plan.to_dict(), "power": pp.to_dict()})
    else:
        print_plan(plan)
        print_power(pp)
    return 0


def _sigterm_as_interrupt() -> None:
    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _run_plan(plan, args, echo=print):
    listen = None if args.no_metrics else args.metrics_listen
    opts = RunnerOptions(results=args.results, listen=listen, pt_summary=not getattr(args, "no_pt_summary", False),
                         echo=echo, wait_quiet=args.wait_quiet)
    if args.noise_threshold is not None:
        opts.noise_threshold = args.noise_threshold
    _sigterm_as_interrupt()
    return Runner(plan, opts).run()


def cmd_run(args) -> int:
    plan = make_plan(_with_budget(load_spec(args.spec), args.budget))
    if args.dry_run:
        print_plan(plan)
        return 0
    if plan.refusal:
        raise SweepError(f"sweep {plan.spec.name} cannot run on this machine: {plan.refusal}")
    print(f"sweep {plan.spec.name}: {len(plan.cells)} cell runs, estimated {format_duration(plan.estimate_seconds)}; "
          f"results in run {plan.run_id}", file=sys.stderr if args.json else sys.stdout)  # --json: stdout is JSON
    summary = _run_plan(plan, args, echo=(lambda m: print(m, file=sys.stderr)) if args.json else print)
    out = {"run_id": summary.run_id, "total": summary.total, "already_finished": summary.skipped_finished,
           "ran": summary.ran, "failed": summary.failed, "seconds": round(summary.seconds, 1),
           "results": summary.results, "metrics_url": summary.metrics_url, "stop": summary.stop}
    if args.report:
        rep = _write_report(summary.run_id, args.report, args.results)
        out["report"] = str(rep.html)
    if args.json:
        print_json(out)
    else:
        print(f"run {summary.run_id}: {summary.ran} cell runs now, {summary.skipped_finished} finished earlier, "
              f"{len(summary.failed)} failed, {format_duration(summary.seconds)}; results in {summary.results}")
        if summary.stop:
            print(f"stopped after block {summary.stop['blocks']}: {summary.stop['reason']}")
        if args.report:
            print(f"report: {out['report']}")
    return 1 if summary.failed else 0


def _write_report(run: str, out_dir: str, results: str | None):
    with ResultsStore(results, create=False) as store:
        return build_report(store, run, out_dir)


def _run_ref(text: str) -> str:
    """A spec file/name becomes its run id; anything else is a run id (or prefix)."""
    if Path(text).is_file() or (SPECS_DIR / f"{text}.yaml").is_file():
        return load_spec(text).run_id
    return text


def cmd_report(args) -> int:
    rep = _write_report(_run_ref(args.run), args.output, args.results)
    if args.json:
        print_json({"run_id": rep.run_id, "html": str(rep.html), "markdown": str(rep.markdown),
                    "figures": [str(p) for p in rep.figures], "recommendations": rep.recommendations})
    else:
        print(f"report of run {rep.run_id}: {rep.html} (and {rep.markdown.name}, {len(rep.figures)} plots)")
        for r in rep.recommendations:
            print(f"  {r}")
    return 0


# ---------------------------------------------------------------------------


def cmd_results_list(args) -> int:
    import time

    with ResultsStore(args.results, create=False) as store:
        runs = store.list_runs()
    if args.json:
        print_json(runs)
        return 0
    if not runs:
        print("no runs yet; start one with `innotier sweep run SPEC`")
        return 0
    rows = [{**r, "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created_at"])),
             "state": "complete" if r["finished_at"] else "incomplete",
             "cells": f"{r['ok_cells']}/{r['total_cells']}" + (f" ({r['failed_cells']} failed)" if r["failed_cells"] else "")}
            for r in runs]
    print_table(rows, ["run_id", "name", "created", "cells", "state"], title="sweep runs")
    return 0


def cmd_results_show(args) -> int:
    with ResultsStore(args.results, create=False) as store:
        run_id = store.resolve_run_id(_run_ref(args.run))
        if args.cell:
            c = store.cell(run_id, args.cell)
            d = dict(c.__dict__)
            d["timeline"] = store.timeline(run_id, c.cell_id)
            if args.json:
                print_json(d)
            else:
                _print_cell(d)
            return 0
        run = store.run(run_id)
        cells = store.cells(run_id)
    if args.json:
        print_json({"run": run, "cells": [{k: v for k, v in c.__dict__.items()
                                            if k not in ("variables", "pt_summary", "option_file")} for c in cells]})
        return 0
    print(f"run {run_id} ({run['name']}): {sum(c.status == 'ok' for c in cells)}/{run['total_cells']} cell runs finished")
    rows = [{"#": c.idx, "cell_id": c.cell_id, "cell": c.label, "block": c.block, "status": c.status,
             "tpmC": f"{c.tpmc:,.0f}" if c.tpmc is not None else "", "checks": {True: "pass", False: "FAIL"}.get(c.check_ok, ""),
             "others' CPU": _share_text(c), "noise": {True: "NOISY", False: "quiet"}.get(c.noisy, "-"),
             "failure": c.failure or ""} for c in cells]
    print_table(rows, ["#", "cell_id", "cell", "block", "status", "tpmC", "checks", "others' CPU", "noise", "failure"])
    if run.get("stop"):
        print(f"stopped after block {run['stop']['blocks']}: {run['stop']['reason']}")
    print(f"a cell's settings, option files, server version, tier facts and tool versions: "
          f"innotier results show {run_id} CELL (# or cell_id; --json adds every server variable)")
    return 0


def _share_text(c) -> str:
    w = (c.noise or {}).get("window") or {}
    return "-" if w.get("others_cpu_share") is None else f"{w['others_cpu_share'] * 100:.0f}%"


def _flat(value: Any, prefix: str = "") -> dict[str, str]:
    """Nested settings/facts as dotted keys with words for values (no Python reprs)."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return {prefix: ", ".join(_word(v) for v in value)}
        out = {}
        for i, v in enumerate(value, 1):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: _word(value)}


def _word(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.2f}".rstrip("0").rstrip(".")
    return str(v)


def _kv_table(title: str, mapping: dict | None, key: str = "setting") -> None:
    flat = _flat(mapping or {})
    if flat:
        print_table([{key: k, "value": v} for k, v in flat.items()], [key, "value"], title=title, fold=("value",))


def _print_cell(d: dict) -> None:
    result = d.get("result") or {}
    print(f"cell {d['cell_id']} (#{d['idx']}, repeat {d['repeat']}): {d['label']}: {d['status']}")
    if d.get("failure"):
        print(f"failure: {d['failure']}")
    _kv_table("settings", d.get("settings"))
    if result:
        print(f"tpmC {_word(result.get('tpmc'))}, NOPM {_word(result.get('nopm'))}, TPM {_word(result.get('tpm'))}; "
              f"measured {_word(result.get('measured_seconds'))} s; errors {_word(result.get('errors'))}")
        lat = result.get("latency_ms") or {}
        if lat:
            print_table([{"transaction": op, **{q: _word(v.get(q)) for q in ("p50", "p95", "p99", "max")}}
                         for op, v in sorted(lat.items())], ["transaction", "p50", "p95", "p99", "max"],
                        title="latency (ms)")
    ok = d.get("check_ok")
    failed = [c for c in ((d.get("check") or {}).get("results") or []) if not c.get("passed")]
    print("consistency checks: " + ("not run" if ok is None else "all passed" if ok else
          f"{len(failed)} FAILED ({', '.join(str(c.get('clause')) for c in failed)})"))
    print(f"server: {d.get('server_version') or 'unknown'}")
    phases = d.get("phases") or {}
    if phases:
        print("phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    w = (d.get("noise") or {}).get("window") or {}
    if w:
        print(f"noise: others used {w.get('others_cpu_share', 0) * 100:.0f}% of the CPU ({w.get('others_cores')} cores), "
              f"steal {w.get('steal_share', 0) * 100:.1f}%, load {w.get('loadavg_end')}; "
              + (f"FLAGGED: {w['flag_reason']}" if w.get("flagged") else "not flagged"))
    ev = d.get("evidence")
    if ev:
        print(f"InnoDB wait evidence: {ev['error']}" if "error" in ev else
              "InnoDB wait evidence over the measured window: " + ", ".join(
                  f"{SIGNALS[k][0]} {_word(v)}" for k, v in evidence_columns(ev).items()
                  if v is not None and k in SIGNALS and k not in PRESSURE))
    p = (d.get("noise") or {}).get("probe") or {}
    if p:
        print(f"probe: CPU loop {p.get('cpu_loop_s')} s, fsync median {p.get('fsync_ms_median')} ms on {p.get('directory')}")
    _kv_table("golden copy", d.get("golden"), key="fact")
    tiers = d.get("tiers") or {}
    _kv_table("placement", {"placement": tiers.get("placement"), "placed": tiers.get("placed")}, key="component")
    _kv_table("tier facts", {"tiers": tiers.get("facts"), "datadir": tiers.get("datadir")}, key="fact")
    _kv_table("environment (kernel, tools, versions)", d.get("environment"), key="fact")
    if d.get("option_file"):
        print("option files:\n" + d["option_file"].rstrip("\n"))
    print(f"timeline: {len(d.get('timeline') or [])} intervals; server variables: {len(d.get('variables') or {})}; "
          f"pt-mysql-summary: {'stored' if d.get('pt_summary') else 'not stored'} (all of them: --json)")


def cmd_results_export(args) -> int:
    with ResultsStore(args.results, create=False) as store:
        run_id = store.resolve_run_id(_run_ref(args.run))
        rows = list(store.iter_export_rows(run_id))
    out = open(args.output, "w", newline="") if args.output else sys.stdout
    try:
        if args.json:
            json.dump(to_jsonable(rows), out, indent=2, sort_keys=True, default=str)
            out.write("\n")
        else:
            cols: list[str] = []
            for r in rows:
                cols += [k for k in r if k not in cols]
            w = csv.DictWriter(out, fieldnames=cols)
            w.writeheader()
            for r in rows:
                w.writerow(r)
    finally:
        if args.output:
            out.close()
    return 0


# ---------------------------------------------------------------------------


def demo_spec():
    """The shipped demo spec, fitted to this host: without root there is no tmpfs to mount, so /dev/shm
    (the tmpfs every Linux has) stands in as an existing-path tier."""
    spec = load_spec("demo")
    notes = []
    if os.geteuid() != 0 and "tmpfs" in spec.tiers and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        tiers = dict(spec.tiers)
        tiers["tmpfs"] = TierSpec(name="tmpfs", kind="path", path="/dev/shm", note="not root: /dev/shm instead of a new tmpfs")
        spec = dataclasses.replace(spec, tiers=tiers)
        notes.append("not root: using /dev/shm (a tmpfs) instead of mounting one")
    return spec, notes


def cmd_demo(args) -> int:
    import time

    t0 = time.monotonic()
    spec, notes = demo_spec()
    spec = _with_budget(spec, args.budget)
    for n in notes:
        print(f"demo: {n}")
    plan = make_plan(spec)
    print_plan(plan)
    if args.dry_run:
        return 0
    summary = _run_plan(plan, args)

    out_dir = args.output or str(innotier_home() / "reports" / summary.run_id)
    rep = _write_report(summary.run_id, out_dir, args.results)
    print()
    print(f"demo finished in {format_duration(time.monotonic() - t0)}: {summary.ran} cell runs now "
          f"({summary.skipped_finished} finished earlier), {len(summary.failed)} failed")
    if summary.stop:
        print(f"stopped after block {summary.stop['blocks']}: {summary.stop['reason']}")
    print(f"report: {rep.html}")
    print(f"        {rep.markdown}")
    print("verdicts:")
    for v in rep.verdicts:
        print(f"  - {v}")
    print("recommendation:")
    for r in rep.recommendations:
        print(f"  - {r}")
    return 1 if summary.failed else 0
