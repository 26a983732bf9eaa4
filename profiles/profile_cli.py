"""`innotier profile ...`: generate, lint, diff, list, show, catalog."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tuner.core.cliutil import add_connection_args, connection_from_args, parse_key_values, print_json, print_table
from profiles.recorded import RECORDED_SERIES, check_series, load_recording
from tuner.core.errors import ProfileError, UsageError
from profiles.model import list_profiles, load_profile, profile_from_mapping
from profiles.render import header_for, render, render_option_file, target_in_header
from profiles.target import make_target, parse_target
from tuner.core.durable import write_atomic
from tuner.core.server import inspect
from profiles.lint import has_errors, lint_file
from profiles.diff import diff, pt_config_diff, resolve_side, side_from_server
from profiles.catalog import load_catalog, short_source

DEFAULT_DROP_IN = "40-innotier-profile.cnf"


def register(sub) -> None:
    p = sub.add_parser("profile", help="my.cnf profiles: generate, lint and diff option files per flavor/version")
    s = p.add_subparsers(dest="profile_cmd", metavar="SUBCOMMAND")
    s.required = True

    g = s.add_parser("generate", help="render a profile (flags or a named/YAML profile) into a conf.d drop-in",
                     description="Render InnoDB storage settings for one flavor/version. Writes a conf.d drop-in "
                                 f"({DEFAULT_DROP_IN}) in --conf-d (default: the current directory), or -o FILE, "
                                 "or --stdout. Everything is validated before anything is written.")
    g.add_argument("--profile", help="start from a shipped profile name or a YAML file; flags override it")
    g.add_argument("--name", help="profile name written in the header (default: the profile's, else 'custom')")
    g.add_argument("--flavor", help="target, e.g. mariadb-10.11, mysql-8.0, mysql-8.0.25, mysql-8.4")
    g.add_argument("--page-size", help="innodb_page_size: 4k, 8k, 16k, 32k or 64k (fixed at datadir init)")
    g.add_argument("--flush-method", help="fsync, O_DSYNC, O_DIRECT, O_DIRECT_NO_FSYNC (littlesync, nosync)")
    g.add_argument("--doublewrite", help="on or off (MySQL 8.0.30+: detect_and_recover, detect_only; MariaDB 11.0.6+: fast)")
    g.add_argument("--buffer-pool", help="innodb_buffer_pool_size, e.g. 2G")
    g.add_argument("--buffer-pool-instances", help="1-64 (MySQL; dropped with a note on MariaDB 10.6+)")
    g.add_argument("--redo-capacity", help="total redo, e.g. 1G (innodb_redo_log_capacity or innodb_log_file_size)")
    g.add_argument("--placement", action="append", metavar="COMPONENT=PATH",
                   help="datadir|ibdata|redo|undo|doublewrite|tmpdir=/abs/dir (repeatable)")
    g.add_argument("--set", action="append", metavar="KEY=VALUE", help="another [mysqld] option, checked against the catalog")
    out = g.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="FILE", help="write the option file here")
    out.add_argument("--stdout", action="store_true", help="print the option file instead of writing it")
    out.add_argument("--conf-d", metavar="DIR", default=".", help=f"write DIR/{DEFAULT_DROP_IN} (default: .)")
    g.add_argument("--json", action="store_true", help="print the rendered options and notes as JSON")
    g.set_defaults(func=cmd_generate)

    li = s.add_parser("lint", help="check an option file against the catalog and the target server, datadir and tier",
                      description="Exit status 1 when there are errors.")
    li.add_argument("file", help="my.cnf or conf.d file (!include / !includedir are followed)")
    li.add_argument("--flavor", help="target, e.g. mariadb-10.11 (default: the 'target:' line of a file "
                                     "`profile generate` wrote; or use --server)")
    li.add_argument("--server", action="store_true", help="take flavor, version and datadir from a live server")
    li.add_argument("--tier", metavar="PATH", help="where the data files live or will live (O_DIRECT probe, DAX checks)")
    li.add_argument("--datadir", metavar="PATH", help="an existing datadir to compare the page size with")
    li.add_argument("--json", action="store_true")
    add_connection_args(li)
    li.set_defaults(func=cmd_lint)

    d = s.add_parser("diff", help="what differs between two option files, profiles or a live server (`server`)")
    d.add_argument("a", help="option file, profile name/YAML, or `server`")
    d.add_argument("b", help="option file, profile name/YAML, or `server`")
    d.add_argument("--flavor", help="target for rendering profiles and defaults (default: the server's, else mariadb-10.11)")
    d.add_argument("--pt-config-diff", action="store_true", help="also show percona-toolkit's pt-config-diff view")
    d.add_argument("--json", action="store_true")
    add_connection_args(d)
    d.set_defaults(func=cmd_diff)

    ls = s.add_parser("list", help="shipped profiles")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    sh = s.add_parser("show", help="a profile's settings, and its option file for a target")
    sh.add_argument("name", help="shipped profile name or YAML file")
    sh.add_argument("--flavor", help="render for this target (default: the profile's flavor, if any)")
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=cmd_show)

    c = s.add_parser("catalog", help="catalog coverage: options x reference versions, each row citing the manual; "
                                     "or one option's rows")
    c.add_argument("--option", help="show the rows of one option, each with its full source URL")
    c.add_argument("--wide", action="store_true", help="full source URLs instead of the short form")
    c.add_argument("--json", action="store_true", help="print JSON (full source URLs)")
    c.set_defaults(func=cmd_catalog)


# ---------------------------------------------------------------------------
# generate


def profile_from_args(args):
    base = load_profile(args.profile) if args.profile else None
    m: dict = {}
    if base is not None:
        d = base.to_dict()
        m = {k: d[k] for k in ("name", "flavor", "page_size", "flush_method", "doublewrite", "buffer_pool_size",
                               "buffer_pool_instances", "redo_capacity", "description", "cites") if d.get(k)}
        m["options"] = dict(base.extra)
    flags = {"flavor": args.flavor, "page_size": args.page_size, "flush_method": args.flush_method,
             "doublewrite": args.doublewrite, "buffer_pool_size": args.buffer_pool,
             "buffer_pool_instances": args.buffer_pool_instances, "redo_capacity": args.redo_capacity}
    m.update({k: v for k, v in flags.items() if v is not None})
    m["name"] = args.name or m.get("name") or "custom"
    placements = [f"{k}={v}" for k, v in (base.placements.items() if base else [])] + list(args.placement or [])
    m["placements"] = placements
    try:
        extra = parse_key_values(args.set, "--set")
    except UsageError as exc:
        raise ProfileError(str(exc)) from None
    m["options"] = {**m.get("options", {}), **extra}
    source = (base.source if base else "command line") + (" + flags" if base and (args.set or args.placement or any(
        v is not None for v in flags.values())) else "")
    profile = profile_from_mapping(m, "command line" if base is None else source)
    if base is not None:
        profile.source = base.source
    return profile


def cmd_generate(args) -> int:
    profile = profile_from_args(args)
    if not profile.flavor:
        raise UsageError("no target; give --flavor, e.g. --flavor mariadb-10.11 or --flavor mysql-8.0")
    target = parse_target(profile.flavor)
    rendered = render(profile, target.flavor, target.version)
    text = render_option_file(rendered.options, header_for(profile, rendered))
    if args.json:
        print_json({"profile": profile.to_dict(), "target": target.describe(), "options": rendered.options,
                    "notes": rendered.notes, "text": text})
        if args.stdout or not (args.output or args.conf_d):
            return 0
    if args.stdout:
        if not args.json:
            sys.stdout.write(text)
        return 0
    path = args.output or os.path.join(args.conf_d, DEFAULT_DROP_IN)
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory; give a file with -o or a directory with --conf-d")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"directory {parent} does not exist; create it or give another -o/--conf-d")
    write_atomic(path, text, mode=0o644)
    if not args.json:
        print(f"wrote {path} ({len(rendered.options)} options for {target.describe()})")
        for n in rendered.notes:
            print(f"  note: {n}")
    return 0


# ---------------------------------------------------------------------------
# lint


def _lint_target(args):
    """The target: --server's, --flavor, else the `target:` line a generated file's header carries."""
    if not os.path.isfile(args.file):
        raise ProfileError(f"option file {args.file} does not exist; give the path of a my.cnf or conf.d file")
    if args.server:
        model = inspect(connection_from_args(args))
        t = make_target(model.flavor, model.version)
        return t, args.datadir or (model.datadir if os.path.isdir(model.datadir) else None)
    flavor = args.flavor or target_in_header(Path(args.file).read_text(errors="replace"))
    if not flavor:
        raise UsageError(f"no target; {args.file} has no '# target:' header line, so give --flavor "
                         "(e.g. mariadb-10.11) or --server with connection options")
    return parse_target(flavor), args.datadir


def cmd_lint(args) -> int:
    target, datadir = _lint_target(args)
    findings = lint_file(args.file, target.flavor, target.version, tier_path=args.tier, datadir=datadir)
    if args.json:
        print_json({"file": args.file, "target": target.describe(), "findings": [f.to_dict() for f in findings],
                    "errors": sum(f.severity == "error" for f in findings)})
    elif not findings:
        print(f"{args.file}: no findings for {target.describe()}")
    else:
        for f in findings:
            print(f"{f.where or args.file}: {f.severity}: {f.option}: {f.reason}")
            print(f"    fix: {f.fix}")
        counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
        print(f"{args.file} for {target.describe()}: " + ", ".join(f"{n} {s}(s)" for s, n in counts.items()))
    return 1 if has_errors(findings) else 0


# ---------------------------------------------------------------------------
# diff


def cmd_diff(args) -> int:
    spec = None
    sides = {}
    target = parse_target(args.flavor) if args.flavor else None
    for key in ("a", "b"):
        if getattr(args, key) == "server":
            spec = spec or connection_from_args(args)
            sides[key], server_target = side_from_server(spec)
            target = target or server_target
    target = target or parse_target("mariadb-10.11")
    for key in ("a", "b"):
        if key not in sides:
            sides[key] = resolve_side(getattr(args, key), target)
    rows = diff(sides["a"], sides["b"], target)
    if args.json:
        print_json({"a": sides["a"].label, "b": sides["b"].label, "target": target.describe(),
                    "differences": [r.to_dict() for r in rows]})
    elif not rows:
        print(f"no differences between {sides['a'].label} and {sides['b'].label} ({target.describe()})")
    else:
        # the legend on its own lines: as a table title it wraps to the (narrow) table's width
        print(f"A = {sides['a'].label}")
        print(f"B = {sides['b'].label}")
        print_table([{"option": r.option, "A": (r.a if r.a is not None else "(unset)") + (" (default)" if r.a_default else ""),
                      "B": (r.b if r.b is not None else "(unset)") + (" (default)" if r.b_default else "")}
                     for r in rows], ["option", "A", "B"])
    if args.pt_config_diff:
        print("--- pt-config-diff ---")
        sys.stdout.write(pt_config_diff(sides["a"], sides["b"], spec))
    return 0


# ---------------------------------------------------------------------------
# list / show / catalog


def cmd_list(args) -> int:
    profiles = list_profiles()
    if args.json:
        print_json([p.to_dict() for p in profiles])
    else:
        print_table([p.to_dict() for p in profiles],
                    ["name", "flavor", "page_size", "flush_method", "doublewrite", "buffer_pool_size",
                     "buffer_pool_instances", "description"], title="shipped profiles")
    return 0


def cmd_show(args) -> int:
    profile = load_profile(args.name)
    flavor = args.flavor or profile.flavor
    text = None
    rendered = None
    if flavor:
        target = parse_target(flavor)
        rendered = render(profile, target.flavor, target.version)
        text = render_option_file(rendered.options, header_for(profile, rendered))
    if args.json:
        print_json({"profile": profile.to_dict(), "options": rendered.options if rendered else None,
                    "notes": rendered.notes if rendered else None})
        return 0
    for k, v in profile.to_dict().items():
        if v not in (None, "", {}, []):
            print(f"{k:<22} {v}")
    if text:
        print()
        sys.stdout.write(text)
    else:
        print("\n(give --flavor to see the option file for a target)")
    return 0


def cmd_catalog(args) -> int:
    cat = load_catalog()
    if args.option:
        rows = cat.rows_for(args.option)
        if not rows:
            raise UsageError(f"{args.option} is not in the catalog; `innotier profile catalog` lists the options")
        data = [{"flavor": r.flavor, "since": str(r.since), "until": str(r.until) if r.until else "",
                 "status": r.status, "type": r.type, "values": ", ".join(r.values), "default": r.default,
                 "change": r.change, "replaced_by": r.replaced_by, "note": r.note, "source": r.source,
                 "evidence": r.evidence} for r in rows]
        if args.json:
            print_json(data)
        else:
            print_table(data, ["flavor", "since", "until", "status", "values", "default", "change"],
                        title=args.option, fold=("values",))
            # whole URLs on their own lines: never cut, and a terminal can open them
            print("sources:")
            for r in data:
                span = f"{r['since']}-{r['until']}" if r["until"] else f"{r['since']}+"
                print(f"  {r['flavor']} {span}: {r['source']}")
        return 0
    cov = cat.coverage()
    cols = list(next(iter(cov.values())).keys())
    if args.json:
        print_json({"options": {o: {**row, "sources": cat.sources_for(o)} for o, row in cov.items()},
                    "verified": verified_counts(cat, cols)})
        return 0
    cite = (lambda url: url) if args.wide else short_source
    rows = [{"option": o, **row, "sources": "\n".join(dict.fromkeys(cite(u) for u in cat.sources_for(o)))}
            for o, row in cov.items()]
    print_table(rows, ["option", *cols, "sources"], fold=("sources",),
                title=f"catalog coverage: {len(cov)} options x {len(cols)} versions"
                      + ("" if args.wide else " (full source URLs: --wide, --json, --option NAME)"))
    print_table(verified_counts(cat, cols), ["series", "rows", "verified", "recording"],
                title="rows read back from a real binary (profiles/catalog/recorded/)")
    return 0


def verified_counts(cat, series_labels: list[str]) -> list[dict]:
    """Per series: rows that apply, and how many of them were compared with a real binary's recording."""
    out = []
    for label in series_labels:
        fam, series = label.split("-", 1)
        target = parse_target(label)
        rows = sum(1 for r in cat.rows if r.applies(fam, target.version))
        if label in RECORDED_SERIES:
            checked, problems = check_series(label)
            rec = load_recording(label)
            out.append({"series": label, "rows": rows, "verified": checked - len(problems),
                        "recording": rec.version})
        else:
            out.append({"series": label, "rows": rows, "verified": 0, "recording": "none (manual only)"})
    return out
