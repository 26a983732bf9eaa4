"""`innotier persist install|sync|restore|status`: keep a volatile tier's data in consistent generations."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from tuner.core.units import format_duration
from tuner.core.cliutil import add_connection_args, connection_from_args, print_json
from tuner.core.errors import UsageError
from datadir_mover import persist
from datadir_mover.persist import clone_staging, confinement
from datadir_mover.persist.config import write_config
from datadir_mover.move.control import systemd_is_pid1

ABOUT = ("A volatile tier (tmpfs, ramfs, zram) loses everything on a power loss. persist keeps consistent copies "
         "(mariadb-backup --backup/--prepare, xtrabackup or MySQL CLONE LOCAL; never a plain rsync of live files) "
         "in generations on persistent storage, and restores data files and redo together from one generation.")


def register(sub) -> None:
    p = sub.add_parser("persist", help="consistent copies of a volatile tier, restore after power loss", description=ABOUT)
    s = p.add_subparsers(dest="persist_cmd", metavar="SUBCOMMAND")
    s.required = True

    i = s.add_parser("install", help="set up the backing directory and the systemd units (verified)", description=ABOUT)
    i.add_argument("--tier", required=True, metavar="PATH", help="the volatile mount holding the server's files")
    i.add_argument("--backing", required=True, metavar="DIR", help="directory on persistent storage for the copies")
    i.add_argument("--interval", default="5m", help="how often the timer takes a consistent copy (default 5m)")
    i.add_argument("--server-unit", help="the server's systemd unit (default: mariadb.service / mysql.service)")
    i.add_argument("--unit-dir", default="/etc/systemd/system", help="where the units are written")
    i.add_argument("--dry-run", action="store_true", help="print the units and commands; write nothing")
    i.add_argument("--first-sync", action="store_true", help="take the first consistent copy right away")
    i.add_argument("--json", action="store_true")
    add_connection_args(i)
    i.set_defaults(func=cmd_install)

    u = s.add_parser("uninstall", help="remove the units and the AppArmor rule install added (the copies are kept)",
                     description=ABOUT)
    u.add_argument("--backing", required=True, metavar="DIR")
    u.add_argument("--unit-dir", default="/etc/systemd/system", help="where install wrote the units")
    u.add_argument("--json", action="store_true")
    u.set_defaults(func=cmd_uninstall)

    y = s.add_parser("sync", help="take a consistent copy now into a new generation and flip `current` to it")
    y.add_argument("--backing", required=True, metavar="DIR")
    y.add_argument("--offline", action="store_true", help="the server is stopped cleanly: copy its files directly")
    y.add_argument("--if-clean", action="store_true",
                   help="with --offline, the sync at shutdown: no copy (exit 0) unless the server shut down "
                        "cleanly; a copy not taken or failed is recorded and the next restore refuses to lose it "
                        "silently")
    y.add_argument("--json", action="store_true")
    y.set_defaults(func=cmd_sync)

    r = s.add_parser("restore", help="bring back the last consistent copy (all files from one generation)")
    r.add_argument("--backing", required=True, metavar="DIR")
    r.add_argument("--if-needed", action="store_true", help="only when the tier lost the server's files (boot)")
    r.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    r.add_argument("--accept-loss", action="store_true",
                   help="restore although the sync at the last shutdown did not happen (its commits are lost)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_restore)

    t = s.add_parser("status", help="the last consistent copy, its age and the data-loss window")
    t.add_argument("--backing", required=True, metavar="DIR")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_status)


def _echo(quiet: bool):
    return (lambda m: None) if quiet else (lambda m: print(f"innotier: {m}", file=sys.stderr))


def cmd_install(args) -> int:
    spec = connection_from_args(args)
    cfg = persist.configure(spec, args.tier, args.backing, args.interval, args.server_unit)
    units = persist.render_units(cfg)
    persist.verify_units(units)
    commands = persist.enable_commands(units)
    change = confinement.plan(cfg)    # a refusal here changes nothing
    if cfg.method == "clone" and Path(cfg.backing).is_dir():   # one install makes is 0711 (persist.config)
        clone_staging.require_reachable(cfg.backing, *clone_staging.server_owner(cfg.locations.datadir))
    cfg = dataclasses.replace(cfg, apparmor=change.to_dict() if change and change.action != "none" else None)
    result = {"units": units if args.dry_run else None, "unit_dir": args.unit_dir, "written": [],
              "apparmor": confinement.describe(change),
              "rpo_statement": (f"a power loss loses at most the last {format_duration(cfg.interval_s, compact=True)} of "
                                "commits plus the duration of one sync"),
              "commands": commands, "verified_with": "systemd-analyze verify"}
    if not args.dry_run:
        persist.save_config(cfg, spec)
        confinement.apply(change)
        result["written"] = persist.install_units(units, args.unit_dir)
        if systemd_is_pid1() and args.unit_dir == "/etc/systemd/system":
            for c in commands:
                subprocess.run(c.split(), check=True, timeout=120)
            result["enabled"] = True
        else:
            result["enabled"] = False
        if args.first_sync:
            result["first_sync"] = persist.sync(cfg.backing, echo=_echo(args.json)).to_dict()
    if args.json:
        print_json(result)
        return 0
    if args.dry_run:
        for name, text in sorted(units.items()):
            print(f"--- {args.unit_dir}/{name}")
            print(text)
    for path in result["written"]:
        print(f"wrote {path}")
    print("units verified with systemd-analyze verify")
    print(result["apparmor"])
    if not result.get("enabled"):
        print("systemd is not managing this host (or --unit-dir is not /etc/systemd/system); enable them with:")
        for c in commands:
            print(f"  {c}")
    print(f"recovery point: {result['rpo_statement']}")
    return 0


def cmd_uninstall(args) -> int:
    """The units and the AppArmor rule go; the backing directory and its generations stay (they are the data)."""
    cfg = persist.load_config(args.backing)
    units = persist.render_units(cfg)
    commands = persist.disable_commands(units)
    managed = systemd_is_pid1() and args.unit_dir == "/etc/systemd/system"
    if managed:
        for c in commands:
            subprocess.run(c.split(), check=False, timeout=120)   # a unit already gone is fine
    removed = persist.remove_units(units, args.unit_dir)
    if managed:
        subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=120)
    change = confinement.recorded(cfg)
    confinement.remove(change)
    clone_staging.remove_staging(cfg.backing)
    write_config(dataclasses.replace(cfg, apparmor=None))
    result = {"removed": removed, "disabled": managed, "commands": commands,
              "apparmor": (f"AppArmor: removed block {change.move_id} from {change.local_path}"
                           + ("; the profile was reloaded" if change.action == "apply" else ""))
              if change else "AppArmor: nothing install added", "kept": cfg.backing}
    if args.json:
        print_json(result)
        return 0
    for path in removed:
        print(f"removed {path}")
    if not managed:
        print("systemd is not managing this host (or --unit-dir is not /etc/systemd/system); disable them with:")
        for c in commands:
            print(f"  {c}")
    print(result["apparmor"])
    print(f"the copies in {cfg.backing} are kept")
    return 0


def cmd_sync(args) -> int:
    if args.if_clean and not args.offline:
        raise UsageError("--if-clean only applies to --offline syncs")
    if args.if_clean:
        gen = persist.sync_at_shutdown(args.backing, echo=_echo(args.json))
        if gen is None:
            print("innotier: the server did not stop cleanly; no offline sync (the last consistent copy stands; "
                  "recorded, so the next restore will not bring it back silently)", file=sys.stderr)
            return 0
    else:
        gen = persist.sync(args.backing, offline=args.offline, echo=_echo(args.json))
    if args.json:
        print_json(gen.to_dict())
    else:
        print(f"generation {gen.id}: {gen.files} files, {gen.bytes / 2**20:.1f} MiB by {gen.method} in "
              f"{gen.duration_s:.1f} s; `current` now points to it")
    return 0


def cmd_restore(args) -> int:
    cfg = persist.load_config(args.backing)
    gen = persist.current(args.backing)
    if not args.yes and not args.if_needed:
        if not sys.stdin.isatty():
            raise UsageError("restore replaces the server's files and needs confirmation; standard input is not a "
                             "terminal, so pass --yes")
        when = "no copy yet" if gen is None else f"generation {gen.id}"
        if input(f"Replace the server's files under {', '.join(cfg.locations.dirs())} with {when}? [y/N] "
                 ).strip().lower() not in ("y", "yes"):
            print("not confirmed; nothing was changed")
            return 1
    result = persist.restore(args.backing, echo=_echo(args.json), if_needed=args.if_needed,
                             accept_loss=args.accept_loss)
    if args.json:
        print_json(result)
    elif not result["restored"]:
        print(f"nothing restored: {result['reason']}")
    else:
        print(f"restored generation {result['generation']} into {', '.join(result['dirs'])}; start the server")
        for k in result["kept_previous_contents"]:
            print(f"  previous contents kept at {k} (remove it when the server is verified)")
    return 0


def cmd_status(args) -> int:
    st = persist.status(args.backing)
    if args.json:
        print_json(st)
    else:
        print(st["statement"])
        if st.get("missed_sync_at_shutdown"):
            print(f"the sync at the last shutdown did not happen ({st['missed_sync_at_shutdown']['reason']}); a "
                  "restore refuses until run with --accept-loss")
        if st.get("restore_interrupted"):
            print("a restore was interrupted: run `innotier persist restore` again before starting the server")
    return 0
