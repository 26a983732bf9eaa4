"""`innotier move plan|apply|status|resume|rollback|finalize`: relocate InnoDB components safely."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from tuner.core.cliutil import add_connection_args, connection_from_args, print_json, print_table
from tuner.core.errors import InnotierError, MoveError, UsageError
from tuner.core.server import COMPONENTS
from datadir_mover.move.plan import MoveRequest
from tuner.core import system_server
from datadir_mover.move import plan as planmod
from tuner.core.durable import write_json_atomic
# the executor's import also registers the sandbox-destroy closer
from datadir_mover.move.executor import MAX_WRITE_BLOCK_S, Executor, MoveSummary, status_of
from datadir_mover.move.step_records import VerifyServerRecord
from datadir_mover.move.journal import all_journals, find
from datadir_mover.journaled_args import RESUME_ID_HELP, STATUS_ID_HELP, add_journal_args, add_yes, confirm, echo
from datadir_mover.move import proof as proofmod
from tuner.core.units import parse_duration, parse_size

EPILOG = ("Components: datadir, redo (innodb_log_group_home_dir), ibdata (innodb_data_home_dir; holds the doublewrite "
          "buffer on MariaDB and MySQL < 8.0.20), doublewrite (innodb_doublewrite_dir, MySQL 8.0.20+), undo "
          "(innodb_undo_directory), tmpdir.  The source stays until `innotier move finalize`.")


def _add_request_args(p) -> None:
    p.add_argument("component", nargs="?", choices=COMPONENTS, help="what to move")
    p.add_argument("--to", metavar="PATH", help="the new directory (new or empty for a datadir)")
    p.add_argument("--precopy", action="store_true",
                   help="copy online first (server running), then only what changed while it is stopped")
    p.add_argument("--allow-same-fs", action="store_true",
                   help="allow a target on the same file system as the source (gains nothing; for tests)")
    p.add_argument("--no-shutdown", action="store_true",
                   help="do not stop the server: you stop it; innotier refuses while it still runs")
    p.add_argument("--slow-shutdown", action="store_true", help="stop with innodb_fast_shutdown=0 (full purge)")
    p.add_argument("--page-size", metavar="SIZE",
                   help="refused unless equal to the server's: the page size is fixed at initialization")
    p.add_argument("--service", metavar="UNIT", help="systemd unit of a system server (default: detected)")
    p.add_argument("--no-systemd-changes", action="store_true",
                   help="refuse a move whose target the unit's sandboxing (ProtectHome=, ProtectSystem=, ...) hides "
                        "instead of writing the drop-in that opens it")
    p.add_argument("--verify", choices=("files", "sample", "tables"), default="sample",
                   help="beyond the copy's own checksums: files (nothing more), sample (default: a bounded sample "
                        "of every table before and after), tables (CHECKSUM TABLE of everything and TPC-C checks "
                        "under a read lock: writes blocked for as long as they take)")
    add_connection_args(p)


def register(sub) -> None:
    p = sub.add_parser("move", help="relocate InnoDB components (datadir, redo, ibdata, undo, tmpdir) safely",
                       description="Plan and apply journaled moves of InnoDB components. " + EPILOG)
    s = p.add_subparsers(dest="move_cmd", metavar="SUBCOMMAND")
    s.required = True

    pl = s.add_parser("plan", help="print every step, the option-file and AppArmor change, space and downtime",
                      epilog=EPILOG)
    _add_request_args(pl)
    pl.add_argument("--save", metavar="FILE", help="also write the plan as JSON (for `move apply --plan FILE`)")
    pl.add_argument("--no-probe", action="store_true", help="do not measure the copy rate (estimate from a default)")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plan)

    ap = s.add_parser("apply", help="carry out a move under the journal (asks first unless --yes)", epilog=EPILOG)
    _add_request_args(ap)
    ap.add_argument("--plan", metavar="FILE", help="a plan saved with `move plan --save` (re-checked first)")
    add_yes(ap)
    ap.add_argument("--json", action="store_true")
    ap.set_defaults(func=cmd_apply)

    st = s.add_parser("status", help="moves and how far each got")
    add_journal_args(st, STATUS_ID_HELP)
    st.set_defaults(func=cmd_status)

    rs = s.add_parser("resume", help="carry on an interrupted move from its journal")
    add_journal_args(rs, RESUME_ID_HELP)
    rs.set_defaults(func=cmd_resume)

    rb = s.add_parser("rollback", help="undo an unfinished move: server back on the old location, verified")
    add_journal_args(rb, RESUME_ID_HELP, asks_first=True)
    rb.set_defaults(func=cmd_rollback)

    fz = s.add_parser("finalize", help="remove the source of a committed move")
    add_journal_args(fz, "the move (default: the only committed one)", asks_first=True)
    fz.set_defaults(func=cmd_finalize)
    _register_proof_options(s, ap, rb, fz)


# ---------------------------------------------------------------------------


def _request(args):
    if not args.component:
        raise UsageError("name the component to move (datadir, redo, ibdata, doublewrite, undo, tmpdir)")
    if not args.to:
        raise UsageError("give the new location with --to PATH")
    return MoveRequest(component=args.component, target=args.to, precopy=args.precopy,
                       allow_same_fs=args.allow_same_fs, no_shutdown=args.no_shutdown,
                       slow_shutdown=args.slow_shutdown, page_size=args.page_size, service=args.service,
                       systemd_changes=not args.no_systemd_changes,
                       probe=not getattr(args, "no_probe", False), verify=args.verify)


def _progress_factory(enabled: bool):
    """Rich progress bars on a terminal; nothing otherwise."""
    if not enabled or not sys.stderr.isatty():
        return lambda desc, total: (lambda n: None)
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    def factory(desc: str, total: int):
        progress = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                            TransferSpeedColumn(), transient=True)
        progress.start()
        task = progress.add_task(desc, total=total)
        seen = {"n": 0}

        def advance(n: int) -> None:
            seen["n"] += n
            progress.update(task, advance=n)
            if seen["n"] >= total:
                progress.stop()
        return advance
    return factory


def _connection(args):
    """The server --sandbox/--socket/--host/--defaults-file name; with none of them, the system server, found where
    its package put it (tuner.core.system_server: its running unit, its option files, the known sockets)."""
    named = any(getattr(args, a, None) for a in ("sandbox", "socket", "host", "port", "defaults_file"))
    if not named:
        args.socket = system_server.find_socket().socket
    return connection_from_args(args)


def cmd_plan(args) -> int:
    spec = _connection(args)
    plan = planmod.build(_request(args), spec)
    if args.save:
        write_json_atomic(args.save, plan.to_dict(), mode=0o600)
    if args.json:
        print_json(plan.to_dict())
    else:
        sys.stdout.write(planmod.render(plan))
        if args.save:
            print(f"plan saved to {args.save}; apply it with `innotier move apply --plan {args.save}`")
    return 0


def _load_saved(path: str):
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"plan file {path} does not exist; save one with `innotier move plan ... --save FILE`")
    try:
        saved = planmod.Plan.from_dict(json.loads(p.read_text()))
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"plan file {path} is not a plan innotier wrote ({exc.__class__.__name__}); make a new one")
    fresh = planmod.build(planmod.MoveRequest(**saved.request), saved.connection_spec())
    for key in ("source_dir", "target_dir", "placement_before", "component"):
        if getattr(fresh, key) != getattr(saved, key):
            raise MoveError(f"the server changed since the plan in {path} was made ({key} differs); make a new plan")
    return fresh


def cmd_apply(args) -> int:
    if args.plan:
        plan = _load_saved(args.plan)
    else:
        plan = planmod.build(_request(args), _connection(args))
    if not args.json:
        sys.stdout.write(planmod.render(plan))
        sys.stdout.flush()
    confirm(f"Move {plan.component} of {plan.control['describe']} to {plan.target_dir}?", args.yes)
    ex = Executor.create(plan, echo=echo(args.json), progress=_progress_factory(not args.json),
                         max_write_block_s=args.max_write_block)
    result = ex.run()
    _print_result(result, args.json)
    return 0


def _print_result(summary: MoveSummary, as_json: bool) -> None:
    if as_json:
        print_json(summary.to_dict())
        return
    print(f"move {summary.move_id}: {summary.state}")
    times = summary.timings
    if times.downtime_s is not None:
        print(f"  server unavailable {times.downtime_s:.1f} s (stop to accepting connections); "
              f"verified {times.until_verified_s or 0:.1f} s after the stop began")
    bd = {k: v for k, v in (times.downtime_breakdown or {}).items() if k != "preflush_before_stop_s"}
    if bd:
        print("  of which " + ", ".join(f"{k[:-2].replace('_', ' ')} {v:.1f} s" for k, v in bd.items()))
    passes = summary.precopy.passes
    if passes:
        print(f"  pre-copy: {len(passes)} passes (" + ", ".join(
            f"{p.seconds:.1f} s" for p in passes) + f"); expected downtime from the last pass "
            f"{summary.precopy.expected_downtime_s:.1f} s")
    if times.writes_blocked_s is not None:
        print(f"  writes blocked {times.writes_blocked_s:.1f} s in all")
    _print_check(summary.verify_server)


def proof_words(file_proof: str, whole_proof: str | None = None) -> str:
    """What proves the files equal to the stopped source, in words; "byte-identical" only where that was proven.
    ``file_proof``: the post-start check's (``benign.FileProof``); ``whole_proof``: the whole-file proof's status."""
    if file_proof == "read back" or whole_proof == "passed":
        return "the copied files are byte-identical"
    if file_proof == "source":
        return "the server runs on its own files"
    if file_proof == "pending":
        return "file proof pending (innotier move status)"
    return "no file-level proof"


def _print_check(vs: VerifyServerRecord) -> None:
    if not vs.mode:  # VERIFY_SERVER not done
        return
    at_stop, changed = vs.changed_at_stop, vs.changed_since_start
    stop_note = (f", {len(at_stop)} changed by the {vs.commits_waiting_at_stop} commits that waited on the "
                 "block and completed during the shutdown" if at_stop else "")
    start_note = f", {len(changed)} changed by the rows clients wrote since the start" if changed else ""
    if vs.mode == "tables":
        tp = ", ".join(f"{k}: {v}" for k, v in vs.schema_checks.get("tpcc", {}).items()) or "no tpcc schema"
        print(f"  {vs.tables} InnoDB tables checksummed, {vs.tables - len(at_stop)} equal"
              f"{stop_note}; TPC-C checks: {tp}")
    elif vs.mode == "sample":
        print(f"  {vs.tables} InnoDB tables sampled, {vs.tables - len(changed) - len(at_stop)} equal"
              f"{start_note}{stop_note}")
    print(f"  files: {proof_words(vs.file_proof)}")


def cmd_status(args) -> int:
    journals = [find(args.id, ())] if args.id else all_journals()
    rows = [status_of(j) for j in journals]
    if args.json:
        print_json(rows)
    elif not rows:
        print("no moves yet")
    else:
        print_table(rows, ["move_id", "component", "from", "to", "phase", "last", "downtime_s"], title="moves")
        for r in rows:
            if r["phase"] in ("open", "committed"):
                print(f"{r['move_id']}: {r['state']}")
    _print_proofs(journals, args.json)
    return 0


def cmd_resume(args) -> int:
    ex = Executor.open(find(args.id, ("open",)), echo=echo(args.json), progress=_progress_factory(not args.json))
    result = ex.run()
    _print_result(result, args.json)
    return 0


def cmd_rollback(args) -> int:
    journal = find(args.id, ("open", "committed"))
    ex = Executor.open(journal, echo=echo(args.json))
    ex.refuse_if_closed(args.discard_writes_since_start)   # before asking: a refusal needs no confirmation
    if journal.phase == "open" and journal.began("START"):
        confirm(f"The server has started on {ex.plan.target_dir}; rolling back returns it to the files as they were "
                 "at shutdown and discards writes made since. Roll back?", args.yes)
    else:
        confirm(f"Roll back move {ex.plan.move_id} ({ex.plan.component} to {ex.plan.target_dir})?", args.yes)
    result = ex.rollback(discard_writes_since_start=args.discard_writes_since_start)
    if args.json:
        print_json(result.to_journal())
    else:
        print(f"move {ex.plan.move_id}: rolled back; {ex.plan.component} is at {ex.plan.source_dir} "
              f"({result.removed} copied entries removed)")
    return 0


def cmd_finalize(args) -> int:
    journal = find(args.id, ("committed",))
    ex = Executor.open(journal, echo=echo(args.json))
    confirm(f"Remove the source of move {ex.plan.move_id} ({ex.plan.source_dir})?", args.yes)
    result = ex.finalize(accept_volatile=args.i_accept_volatile, persist_backing=args.persist_backing)
    if args.json:
        print_json(result.to_journal())
    else:
        kept = f"; kept (changed since the copy): {', '.join(result.kept)}" if result.kept else ""
        print(f"move {ex.plan.move_id}: finalized, {result.removed} source entries removed{kept}")
    return 0


# ---------------------------------------------------------------------------
# The proof, writes since the start, volatile targets: options of their own, kept apart


def _register_proof_options(s, ap, rb, fz) -> None:
    ap.add_argument("--max-write-block", metavar="SECONDS", type=_duration, default=MAX_WRITE_BLOCK_S,
                    help=f"with --precopy: block commits at most this long before the stop (the sample, a flush "
                         f"and a last pass); past it the plain stop follows (default {MAX_WRITE_BLOCK_S:g} s)")
    rb.add_argument("--discard-writes-since-start", action="store_true",
                    help="after the server accepted connections on the target: go back anyway, discarding the "
                         "commits it took there (the refusal says how many)")
    fz.add_argument("--i-accept-volatile", action="store_true",
                    help="finalize onto tmpfs/ramfs/zram without persistence: a power loss loses the data")
    fz.add_argument("--persist-backing", metavar="DIR",
                    help="the `innotier persist` backing that keeps a volatile target (its last copy must be fresh)")
    vf = s.add_parser("verify", help="run (or carry on) a move's proof: the target equals the stopped source")
    vf.add_argument("--id", help="the move (default: the only committed one)")
    vf.add_argument("--rate", metavar="SIZE", default="0",
                    help="read at most this many bytes a second (e.g. 64M; default 0: as fast as the device goes)")
    vf.add_argument("--json", action="store_true")
    vf.set_defaults(func=cmd_verify)


def _duration(text: str) -> float:
    try:
        return parse_duration(text, "--max-write-block")
    except InnotierError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_verify(args) -> int:
    journal = find(args.id, ("open", "committed"))
    proof = proofmod.run(journal, rate=parse_size(args.rate) if args.rate != "0" else 0, wait=True)
    if proof is None:
        raise MoveError(f"move {journal.dir.name} has no proof yet (it is recorded at VERIFY); "
                        "resume the move first (`innotier move resume`)")
    if args.json:
        print_json({"move_id": journal.dir.name, **asdict(proof)})
    else:
        print(f"move {journal.dir.name}: proof {proof.text()}")
    return 0 if proof.status == "passed" else 1


def _print_proofs(journals, as_json: bool) -> None:
    """One line per open or committed move's proof; a pending proof whose prover died is started again."""
    for j in journals:
        if j.phase not in ("open", "committed") or (proof := proofmod.Proof.load(j)) is None:
            continue
        restarted = ""
        if proofmod.pending(j) and j.done("START") and not proofmod.prover_alive(j):
            proofmod.start_background(j)
            restarted = " (its prover had stopped: started again in the background)"
        if not as_json:
            print(f"{j.dir.name}: proof {proof.text()}{restarted}")
