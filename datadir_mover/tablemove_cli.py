"""`innotier table-move plan|apply|resume|back|status|register-root`: move one table onto a tier online."""

from __future__ import annotations

import sys

from tuner.core.cliutil import add_connection_args, connection_from_args, print_json, print_table
from tuner.core.errors import MoveError, UsageError

from datadir_mover.journaled_args import RESUME_ID_HELP, STATUS_ID_HELP, add_journal_args, add_yes, confirm, echo
from datadir_mover.tablemove import register as registermod
from datadir_mover.tablemove import status as statusmod
from datadir_mover.tablemove import store
from datadir_mover.tablemove.plan import TableMoveRequest, TablePlan, build, render
from datadir_mover.tablemove.steps import TableMover

HELP = "move one table onto a tier (and back) online, clients running, under a journal"
EPILOG = ("MySQL: a general tablespace in a root registered in innodb_directories (`register-root`, one restart), "
          "ALTER TABLE ... TABLESPACE online.  MariaDB: pt-online-schema-change fills a shadow table in the root, "
          "innotier proves it equal in one snapshot and swaps it with RENAME TABLE.  docs/table-moves.md")


def _add_request_args(p) -> None:
    p.add_argument("table", metavar="SCHEMA.TABLE", help="the table to move")
    p.add_argument("--to", metavar="ROOT", help="the tier directory (on MySQL registered with `register-root`)")
    p.add_argument("--allow-same-fs", action="store_true", help="allow a root on the table's file system (for tests)")
    p.add_argument("--i-accept-volatile", action="store_true",
                   help="a root on tmpfs/ramfs/zram without persistence: a power loss loses the table")
    p.add_argument("--persist-backing", metavar="DIR", help="the `innotier persist` backing that keeps a volatile root")
    _add_pace_arg(p)
    p.add_argument("--json", action="store_true")
    add_connection_args(p)


def _add_pace_arg(p) -> None:
    p.add_argument("--pace", type=float, default=0.0, metavar="SECONDS",
                   help="MariaDB: pause this long after each of the copier's 0.02-s chunks, so its redo comes slower "
                        "(0.1: the copy about 6x as long; docs/table-moves.md, Redo)")


def _pace(args) -> float:
    if not 0 <= args.pace <= 10:
        raise UsageError(f"--pace takes seconds from 0 to 10 (got {args.pace:g}); 0.1 spreads the copy about 6-fold")
    return args.pace


def register(sub) -> None:
    p = sub.add_parser("table-move", help=HELP, description=HELP + ". " + EPILOG)
    s = p.add_subparsers(dest="table_move_cmd", metavar="SUBCOMMAND")
    s.required = True
    pl = s.add_parser("plan", help="check the request and print what apply would do", epilog=EPILOG)
    _add_request_args(pl)
    pl.set_defaults(func=cmd_plan)
    ap = s.add_parser("apply", help="move the table under a journal (asks first unless --yes)", epilog=EPILOG)
    _add_request_args(ap)
    add_yes(ap)
    ap.set_defaults(func=cmd_apply)
    rs = s.add_parser("resume", help="carry on an interrupted table move (or register-root) from its journal")
    add_journal_args(rs, RESUME_ID_HELP)
    rs.set_defaults(func=cmd_resume)
    bk = s.add_parser("back", help="undo an unfinished table move, or bring a moved table home to the datadir")
    bk.add_argument("table", nargs="?", metavar="SCHEMA.TABLE",
                    help="the table whose move to undo or bring home (default: the only unfinished or committed move)")
    add_journal_args(bk, "the move (default: the only unfinished or committed one of TABLE, or of all)",
                     asks_first=True)
    _add_pace_arg(bk)
    bk.set_defaults(func=cmd_back)
    st = s.add_parser("status", help="table moves, and whether each moved table is still on its tier")
    add_journal_args(st, STATUS_ID_HELP)
    st.set_defaults(func=cmd_status)
    rr = s.add_parser("register-root", help="MySQL: add a tier root to innodb_directories (one restart, once)")
    rr.add_argument("root", metavar="ROOT")
    add_yes(rr)
    rr.add_argument("--json", action="store_true")
    add_connection_args(rr)
    rr.set_defaults(func=cmd_register_root)


def _request(args) -> TableMoveRequest:
    schema, dot, table = args.table.partition(".")
    if not dot or not schema or not table:
        raise UsageError(f"name the table as SCHEMA.TABLE (got {args.table!r})")
    if not args.to:
        raise UsageError("give the tier directory with --to ROOT (to bring a table home: `innotier table-move back`)")
    return TableMoveRequest(schema=schema, table=table, root=args.to, allow_same_fs=args.allow_same_fs,
                            accept_volatile=args.i_accept_volatile, persist_backing=args.persist_backing,
                            copy_pause_s=_pace(args))


def cmd_plan(args) -> int:
    plan = build(_request(args), connection_from_args(args))
    print_json(plan.to_dict()) if args.json else sys.stdout.write(render(plan))
    return 0


def cmd_apply(args) -> int:
    plan = build(_request(args), connection_from_args(args))
    return _carry_out(plan, args)


def _carry_out(plan: TablePlan, args) -> int:
    if not args.json:
        sys.stdout.write(render(plan))
        sys.stdout.flush()
    confirm(f"Move {plan.schema}.{plan.table} to {plan.root or 'the datadir'}?", args.yes)
    result = TableMover.create(plan, echo(args.json)).run()
    _print_result(result, args.json)
    return 0


def _print_result(result: dict, as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    if "root" in result:
        print(f"register-root {result['move_id']}: innodb_directories={result['innodb_directories']} "
              f"(restart {result['restart_s']:.1f} s)")
        return
    print(f"table move {result['move_id']}: {result['table']} {result['phase']}, now in {result['file']}")
    extra = f"; rows equal in one snapshot ({result['digest']})" if result.get("digest") else ""
    print(f"  took {result['seconds']:.1f} s (copy {result['copy_s'] or 0:.1f} s, swap {result['swap_s'] or 0:.3f} s)"
          + extra)


def cmd_resume(args) -> int:
    j = store.find(args.id, ("open",))
    if j.plan().get("kind") == "register-root":
        result = registermod.run(j, echo(args.json))
    else:
        result = TableMover.open(j, echo(args.json)).run()
    _print_result(result, args.json)
    return 0


def cmd_back(args) -> int:
    pace = _pace(args)
    j = store.find(args.id, ("open", "committed"), args.table)
    if j.plan().get("kind") == "register-root":
        raise MoveError(f"{j.dir.name} registered a root; to unregister it remove "
                        f"{j.plan()['option_file']} and restart the server")
    mover = TableMover.open(j, echo(args.json))
    p = mover.plan
    if store.phase(j) == "open":
        confirm(f"Undo table move {p.move_id} ({p.schema}.{p.table})?", args.yes)
        result = mover.undo()
        print_json(result) if args.json else print(f"table move {p.move_id}: undone; {p.schema}.{p.table} is in "
                                                   f"{result['file']}")
        return 0
    request = TableMoveRequest(schema=p.schema, table=p.table, root=None, home_of=p.move_id, copy_pause_s=pace,
                               apparmor_root=p.request.get("apparmor_root", "/etc/apparmor.d"),
                               sys_root=p.request.get("sys_root", "/sys"))
    return _carry_out(build(request, p.connection_spec()), args)


def cmd_status(args) -> int:
    journals = [store.find(args.id, ())] if args.id else store.all_journals()
    rows = [statusmod.status_of(j) for j in journals]
    if args.json:
        print_json(rows)
    elif not rows:
        print("no table moves yet")
    else:
        print_table(rows, ["move_id", "table", "to", "phase", "last", "where"], title="table moves", fold=("where",))
        for r in rows:
            if r.get("problem"):
                print(f"{r['move_id']}: {r['problem']}")
    return 1 if any(r.get("drifted") for r in rows) else 0


def cmd_register_root(args) -> int:
    p = registermod.plan(args.root, connection_from_args(args))
    if not args.json:
        sys.stdout.write(registermod.render(p))
        sys.stdout.flush()
    confirm(f"Restart {p['control']['describe']} to register {p['root']}?", args.yes)
    _print_result(registermod.apply(p, echo(args.json)), args.json)
    return 0
