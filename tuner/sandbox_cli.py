"""`innotier sandbox ...`: create, start, stop, status, destroy, list, reconfigure."""

from __future__ import annotations

import time

from tuner.core import sandbox as sbx
from tuner.core.cliutil import parse_key_values, print_json, print_table
from tuner.core.errors import UsageError
from tuner.core.units import page_size_label
from profiles.apply import apply_profile_to_sandbox, load_profile_for_sandbox
from datadir_mover.move.executor import close_moves_of_sandbox


def register(sub) -> None:
    # `sandbox destroy` closes the moves of the sandbox (the mover's closer; commands import only their own module)
    sbx.on_destroy(close_moves_of_sandbox)
    p = sub.add_parser("sandbox", help="private server instances for tests and sweeps")
    s = p.add_subparsers(dest="sandbox_cmd", metavar="SUBCOMMAND")
    s.required = True

    c = s.add_parser("create", help="initialize a new sandbox (page size is fixed here)")
    c.add_argument("name")
    c.add_argument("--page-size", default=None, help="innodb_page_size: 4k, 8k, 16k, 32k or 64k (default 16k, or the profile's)")
    c.add_argument("--datadir", help="datadir (default: inside the sandbox directory); must be empty or new")
    c.add_argument("--port", type=int, help="TCP port on 127.0.0.1 (default: a free one)")
    c.add_argument("--option", action="append", metavar="KEY=VALUE", help="extra [mysqld] option (repeatable)")
    c.add_argument("--profile", help="a profile name or YAML file to apply (see `innotier profile list`)")
    c.add_argument("--basedir", help="server installation to use (default: binaries on PATH)")
    c.add_argument("--server", metavar="NAME",
                   help="an installed server distribution (mysql-9.7, mariadb-11.8, mariadb-10.11; "
                        "see `innotier server list`)")
    c.add_argument("--start", action="store_true", help="start it after creating")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_create)

    st = s.add_parser("start", help="start a sandbox and wait until it accepts connections")
    st.add_argument("name")
    st.add_argument("--recover", action="store_true", help="start a sandbox that crashed (runs crash recovery)")
    st.set_defaults(func=cmd_start)

    sp = s.add_parser("stop", help="stop a sandbox (clean shutdown by default)")
    sp.add_argument("name")
    sp.add_argument("--mode", choices=sorted(sbx.STOP_MODES), default="clean",
                    help="clean (fast shutdown), slow (innodb_fast_shutdown=0) or kill (SIGKILL, like a crash)")
    sp.add_argument("--slow", action="store_true", help="same as --mode slow")
    sp.set_defaults(func=cmd_stop)

    ss = s.add_parser("status", help="state of a sandbox: running, stopped or crashed")
    ss.add_argument("name")
    ss.add_argument("--json", action="store_true")
    ss.set_defaults(func=cmd_status)

    d = s.add_parser("destroy", help="remove a sandbox and its datadir")
    d.add_argument("name")
    d.add_argument("--force", action="store_true", help="kill it first if it is running")
    d.set_defaults(func=cmd_destroy)

    ls = s.add_parser("list", help="all sandboxes")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    r = s.add_parser("reconfigure", help="apply a profile to a sandbox (takes effect at next start)")
    r.add_argument("name")
    r.add_argument("--profile", required=True, help="a profile name or YAML file")
    r.add_argument("--restart", action="store_true", help="restart the sandbox if it is running")
    r.set_defaults(func=cmd_reconfigure)


def cmd_create(args) -> int:
    options = parse_key_values(args.option)
    t0 = time.monotonic()
    profile = None
    explicit = args.page_size is not None
    if args.profile:
        profile = load_profile_for_sandbox(args.profile, page_size=args.page_size or "16k", explicit_page_size=explicit)
        if profile.page_size and not explicit:
            args.page_size = profile.page_size
    args.page_size = args.page_size or "16k"
    sb = sbx.create(args.name, page_size=args.page_size, datadir=args.datadir, port=args.port,
                    options=options, basedir=args.basedir, server=args.server)
    if profile is not None:
        apply_profile_to_sandbox(sb, profile)
    created = time.monotonic() - t0
    started = sb.start() if args.start else None
    if args.json:
        out = sb.status()
        out.update({"create_seconds": round(created, 3), "start_seconds": started and round(started, 3)})
        print_json(out)
    else:
        print(f"created sandbox {sb.name}: {sb.flavor.value} {sb.version}, page size {page_size_label(sb.page_size)}, "
              f"port {sb.port}, datadir {sb.datadir} ({created:.1f} s)")
        if started is not None:
            print(f"started sandbox {sb.name} in {started:.1f} s (socket {sb.socket})")
    return 0


def cmd_start(args) -> int:
    sb = sbx.Sandbox.load(args.name)
    if sb.state() == sbx.SandboxState.CRASHED and args.recover:
        print(f"sandbox {sb.name} crashed earlier; starting it runs InnoDB crash recovery")
    secs = sb.start(recover=args.recover)
    print(f"started sandbox {sb.name} in {secs:.1f} s (port {sb.port}, socket {sb.socket})")
    return 0


def cmd_stop(args) -> int:
    sb = sbx.Sandbox.load(args.name)
    mode = "slow" if args.slow else args.mode
    secs = sb.stop(mode)
    print(f"stopped sandbox {sb.name} ({mode}) in {secs:.1f} s")
    return 0


def cmd_status(args) -> int:
    st = sbx.Sandbox.load(args.name).status()
    if args.json:
        print_json(st)
    else:
        for k, v in st.items():
            if v is not None:  # a stopped sandbox has no pid: the state line says so
                print(f"{k:<10} {v}")
    return 0 if st["state"] != "crashed" else 1


def cmd_destroy(args) -> int:
    sb = sbx.Sandbox.load(args.name)
    for line in sb.destroy(force=args.force):
        print(line)
    print(f"destroyed sandbox {args.name}")
    return 0


def cmd_list(args) -> int:
    rows = [sb.status() for sb in sbx.list_sandboxes()]
    if args.json:
        print_json(rows)
    elif not rows:
        print("no sandboxes; create one with `innotier sandbox create NAME`")
    else:
        print_table(rows, ["name", "state", "flavor", "version", "page_size", "port", "datadir"])
    return 0


def cmd_reconfigure(args) -> int:
    sb = sbx.Sandbox.load(args.name)
    profile = load_profile_for_sandbox(args.profile, page_size=sb.page_size, explicit_page_size=True)
    running = sb.state() == sbx.SandboxState.RUNNING
    if running and not args.restart:
        raise UsageError(f"sandbox {sb.name} is running; pass --restart to apply the profile now, or stop it first")
    apply_profile_to_sandbox(sb, profile)
    if running:
        sb.stop()
        sb.start()
    print(f"applied profile {profile.name} to sandbox {sb.name}" + (" and restarted it" if running else ""))
    return 0
