"""A move plan: every step, the option-file change, the AppArmor change, space and downtime, before anything changes.

Data flows one way: a ``MoveRequest`` (CLI flags) -> ``inspect()`` -> preflight checks ->
a ``Plan`` (printable, saved as JSON with ``--save``) -> ``executor.apply``.  A saved
plan is checked again against the live server before it is applied.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.errors import MoveError
from tuner.core.server import ConnectionSpec, ServerModel, fetch_status, inspect
from tuner.core.units import human_size

from datadir_mover import apparmor, selinux, unit_sandbox
from datadir_mover.move import components, followers, homecoming, log_indexes, placement, preflight, server_check
from datadir_mover.move.control import (SandboxControl, SystemdControl, by_hand, control_for, server_binary,
                                       server_pid, server_user)
from datadir_mover.move.copy import (REDO_NAME, TABLESPACE_NAME, allocated_bytes, copy_file, digest_file, logical_bytes,
                                     walk)
from datadir_mover.move.copy.blocks import data_extents  # the copy's own reading of the data regions
from datadir_mover.move.journal import State
from datadir_mover.move.server_check import table_sample
from tuner.core.sandbox import Sandbox

PLAN_VERSION = 1
SAMPLE_DESC = f"({table_sample.SAMPLE_ROWS} rows from each end of the primary key)"
RECENT_SECONDS = 60  # files modified this recently are counted as "changed again" for the pre-copy estimate
TYPICAL_START_S = 3.0  # server start and accept when this server's own start was never measured; an estimate
CHANGE_SAMPLE_S = 1.0  # how long the plan watches the server's write rate (pre-copy estimate)
SCAN_SPEEDUP = 2.0  # reading and hashing a changed file vs copying it whole (no write, no read-back); measured 2-3x
HEADER_READ_S = 3e-6  # one page header read (pread of 8 bytes, page cache warm), measured 1-4 us here
CHECKSUM_RATE = 150e6  # bytes/s CHECKSUM TABLE reads (assumed: it reads every row through the server)
PREFLUSH_RATE = 200e6  # bytes/s the page cleaner writes at the pre-flush's raised io_capacity (assumed)


@dataclass
class MoveRequest:
    component: str
    target: str
    precopy: bool = False
    allow_same_fs: bool = False
    no_shutdown: bool = False  # the operator stops the server; innotier refuses if it is still running
    slow_shutdown: bool = False
    page_size: str | None = None  # a page-size change asked through a move: refused with the reason
    service: str | None = None  # systemd unit of a system server
    systemd_changes: bool = True  # False (--no-systemd-changes): a move that needs a unit drop-in is refused
    units_root: str = unit_sandbox.UNITS_ROOT
    apparmor_root: str = "/etc/apparmor.d"
    sys_root: str = "/sys"
    etc_root: str = "/"
    probe: bool = True  # measure the copy rate to the target for the downtime estimate
    verify: str = server_check.DEFAULT_VERIFY  # files | sample | tables (see server_check)


@dataclass
class Step:
    state: str
    title: str
    detail: str
    offline: bool = False


@dataclass
class Plan:
    version: int
    move_id: str
    created_at: float
    component: str
    what: str
    variable: str
    source_dir: str
    target_dir: str
    target_exists: bool
    server_key: str
    server: dict[str, Any]
    connection: dict[str, Any]
    control: dict[str, Any]
    names: list[str]
    files: int
    bytes_logical: int
    bytes_allocated: int
    space_required: int
    space_available: int
    source_fs: dict[str, Any]
    target_tier: dict[str, Any]
    owner: dict[str, Any]
    placement_file: str
    placement_before: str | None
    placement_after: str | None  # None: the move removes the file (a move back home)
    also_options: dict[str, str]
    record_files: list[str]
    apparmor: dict[str, Any]
    selinux: list[str]
    shutdown_mode: str
    shutdown_reason: str
    precopy: bool
    no_shutdown: bool
    was_running: bool
    allow_same_fs: bool
    estimates: dict[str, Any]
    request: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    verify: str = server_check.DEFAULT_VERIFY
    unit_sandbox: dict[str, Any] = field(default_factory=dict)  # unit_sandbox.UnitChange (absent in older plans)
    # a datadir move: the log indexes in it naming files by an absolute path inside it (``log_indexes``; absent in
    # older plans), rewritten in the target at START
    log_indexes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        if d.get("version") != PLAN_VERSION:
            raise MoveError(f"plan file version {d.get('version')} is not supported (expected {PLAN_VERSION}); "
                            "make a new plan with `innotier move plan ... --save FILE`")
        d = dict(d)
        d["steps"] = [Step(**s) for s in d.get("steps", [])]
        return cls(**d)

    def connection_spec(self) -> ConnectionSpec:
        c = self.connection
        if c.get("sandbox"):
            return Sandbox.load(c["sandbox"]).connection_spec()
        return ConnectionSpec.from_options(socket=c.get("socket"), host=c.get("host"), port=c.get("port"),
                                           defaults_file=c.get("defaults_file"), database=c.get("database"))

    def control_obj(self):
        c = self.control
        if c["kind"] == "sandbox":
            return SandboxControl(c["name"])
        return SystemdControl(unit=c["unit"], spec=self.connection_spec(), conf_dir=c["conf_dir"])

    def apparmor_change(self) -> apparmor.AppArmorChange:
        return apparmor.AppArmorChange.from_dict(self.apparmor)

    def unit_change(self) -> unit_sandbox.UnitChange:
        return unit_sandbox.UnitChange.from_dict(self.unit_sandbox)


def new_move_id(component: str, server_key: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", server_key).strip("-")[:40]
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{component}-{slug}-{secrets.token_hex(2)}"


def _server_key(model: ServerModel) -> str:
    return f"sandbox:{model.sandbox}" if model.managed == "sandbox" else f"system:{model.socket or model.port}"


def _connection_dict(spec: ConnectionSpec) -> dict[str, Any]:
    """How to reach the server again, without the password (it comes from the defaults file or environment)."""
    return {"sandbox": spec.sandbox, "socket": spec.socket, "host": spec.host, "port": spec.port,
            "defaults_file": spec.defaults_file}


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _dirty_bytes(spec: ConnectionSpec, page_size: int) -> int:
    try:
        conn = spec.with_database(None).connect()
        try:
            st = fetch_status(conn)
        finally:
            conn.close()
        return int(st.get("Innodb_buffer_pool_pages_dirty", 0)) * page_size
    except Exception:
        return 0


def _table_stats(spec: ConnectionSpec) -> tuple[int, int]:
    """(InnoDB tables the verification reads, bytes of their data and indexes): the sample's own list of tables."""
    try:
        conn = spec.with_database(None).connect()
        try:
            tables = table_sample.innodb_tables(conn.cursor())
            return len(tables), sum(n for _, _, n in tables)
        finally:
            conn.close()
    except Exception:
        return 0, 0


def _change_rate(spec: ConnectionSpec, page_size: int, seconds: float = CHANGE_SAMPLE_S) -> float:
    """Bytes/s the server writes to its files now (pages flushed + redo), measured over ``seconds``."""
    def counters() -> tuple[int, int]:
        conn = spec.with_database(None).connect()
        try:
            st = fetch_status(conn)
        finally:
            conn.close()
        return int(st.get("Innodb_pages_written", 0)), int(st.get("Innodb_os_log_written", 0))

    try:
        p0, l0 = counters()
        time.sleep(seconds)
        p1, l1 = counters()
    except Exception:
        return 0.0
    return ((p1 - p0) * page_size + (l1 - l0)) / seconds


def _probe_rate(entries, source: str, target: str) -> float | None:
    """Bytes/s of the real copy pipeline (read, hash, write, fsync, read back) on up to 32 MiB into the target's parent."""
    import stat as st_mod
    import tempfile

    files = [(rel, st) for rel, st in entries if st_mod.S_ISREG(st.st_mode) and st.st_size > 0]
    if not files:
        return None
    rel, _ = max(files, key=lambda x: x[1].st_size)
    where = preflight.existing_ancestor(target)
    if not os.access(where, os.W_OK):
        return None
    limit = 32 << 20
    with tempfile.TemporaryDirectory(prefix=".innotier-probe-", dir=where) as tmp:
        src_part = os.path.join(tmp, "src")
        # a bounded sample of the largest file: the probe never reads a whole multi-GB tablespace
        with open(os.path.join(source, rel), "rb") as fh, open(src_part, "wb") as out:
            out.write(fh.read(limit))
        t0 = time.monotonic()
        fc = copy_file(src_part, os.path.join(tmp, "dst"))
        ok = digest_file(os.path.join(tmp, "dst")) == fc.digest
        dt = time.monotonic() - t0
    return (fc.st.st_size / dt) if ok and dt > 0 else None


def build(request: MoveRequest, spec: ConnectionSpec) -> Plan:
    """Inspect the server, run every preflight check, and return the plan (nothing changes)."""
    comp = components.get(request.component)
    model = inspect(spec)
    components.check_supported(comp.name, model)
    preflight.check_page_size(request.page_size, model)
    source = components.source_dir(comp.name, model)
    target = os.path.normpath(request.target) if os.path.isabs(request.target) else request.target
    preflight.check_target_path(comp.name, model, source, target)
    preflight.check_source(comp.name, model, source)
    control = control_for(model, spec, request.service, request.etc_root)
    ok, why = control.can_drive()
    if not ok:
        raise MoveError(f"{why}; {by_hand(control, comp, source, target)}")
    state = control.state()
    preflight.check_server_state(state, not request.no_shutdown, control.describe(), control.stop_hint())
    server_key = _server_key(model)
    preflight.check_no_open_move(server_key)
    uid, gid, user = server_user(model, source)
    preflight.check_owner(target, uid, user)
    target_exists = preflight.check_target_contents(comp.name, model, target)
    preflight.check_same_fs(source, target, request.allow_same_fs)

    names = components.top_names(comp.name, model, source) if comp.copies_files else []
    entries = walk(source, names) if names else []
    allocated, logical = allocated_bytes(entries), logical_bytes(entries)
    tier = preflight.tier_facts(target)
    need = preflight.check_space(target, allocated, tier.free_bytes) if comp.copies_files else 0

    move_id = new_move_id(comp.name, server_key)
    placement_file = control.placement_file()
    before = _read(placement_file)
    notes = _notes(comp.name, model, tier)
    home = homecoming.find(server_key, comp.name, source, target, model.datadir)
    configured = followers.configured_options(control, request.etc_root) if comp.name == "datadir" else {}
    followers.check_replica_position(spec, model, configured, source)
    after, also = _placement_after(comp, model, configured, source, target, before, home, notes)
    indexes = log_indexes.find(model, source) if comp.name == "datadir" else []
    notes += log_indexes.note(indexes, source)
    mode, why_mode = components.shutdown_mode(comp.name, model, request.slow_shutdown)
    aa = apparmor.plan_change([target], model.flavor.value, move_id, request.apparmor_root, request.sys_root,
                              retire=home.move_id if home and home.apparmor_applied else None,
                              binary=server_binary(server_pid(model.pid_file)) if model.managed == "system" else None)
    apparmor.validate(aa, request.apparmor_root)
    unit = unit_sandbox.plan_change(unit_sandbox.read(control.unit, control.systemctl_argv)
                                    if isinstance(control, SystemdControl) else None,
                                    target, move_id, request.systemd_changes, request.units_root,
                                    retire=home.move_id if home else None)
    se = _selinux_commands(comp.name, target, tier.fstype)

    if request.verify not in server_check.VERIFY_MODES:
        raise MoveError(f"--verify {request.verify} is not a verification level; use one of "
                        f"{', '.join(server_check.VERIFY_MODES)}")
    rate = _probe_rate(entries, source, target) if (request.probe and entries) else None
    change = _change_rate(spec, model.page_size) if (request.precopy and request.probe and state == "running") else None
    estimates = _estimates(entries, data_bytes(source, entries), rate, _dirty_bytes(spec, model.page_size), mode,
                           change, _table_stats(spec), model.page_size, control.timings(),
                           request.precopy and comp.copies_files)
    plan = Plan(
        version=PLAN_VERSION, move_id=move_id, created_at=time.time(), component=comp.name, what=comp.what,
        variable=comp.variable, source_dir=source, target_dir=target, target_exists=target_exists,
        server_key=server_key,
        server=_server_dict(model), connection=_connection_dict(spec), control=_control_dict(control, mode),
        names=names, files=sum(1 for _, st in entries if stat.S_ISREG(st.st_mode)),
        bytes_logical=logical, bytes_allocated=allocated, space_required=need, space_available=tier.free_bytes,
        source_fs=preflight.tier_facts(source).to_dict(), target_tier=tier.to_dict(),
        owner={"uid": uid, "gid": gid, "user": user,
               "mode": 0o750 if model.managed == "system" else (os.stat(source).st_mode & 0o7777)},
        placement_file=str(placement_file), placement_before=before, placement_after=after, also_options=also,
        record_files=[str(p) for p in control.record_files()] if comp.name == "datadir" else [],
        apparmor=aa.to_dict(), selinux=se, shutdown_mode=mode, shutdown_reason=why_mode,
        precopy=request.precopy and comp.copies_files, no_shutdown=request.no_shutdown,
        was_running=(state == "running"), allow_same_fs=request.allow_same_fs, estimates=estimates,
        request=asdict(request), notes=notes, verify=request.verify, unit_sandbox=unit.to_dict(),
        log_indexes=indexes)
    plan.steps = steps_of(plan)
    return plan


def _placement_after(comp, model: ServerModel, configured: dict[str, str], source: str, target: str, before: str,
                     home, notes: list[str]) -> tuple[str, dict[str, str]]:
    """(the placement drop-in after the switch, the other options it sets): a move back where an earlier move
    found the component undoes that move's options (``homecoming``); a datadir move carries the options given an
    absolute path inside it (``followers``)."""
    if home:
        notes.append(f"back where move {home.move_id} found {comp.what}: its changes to the option file and the "
                     "AppArmor profile are undone")
        also = {k: v for k, v in home.options_before.items() if k != comp.variable and v is not None}
        return homecoming.placement_after(before, home), also
    also = followers.follow(model, configured, source, target) if comp.name == "datadir" else {}
    if comp.name == "datadir":
        notes += followers.notes(model, configured, also, source)
    return placement.with_option(before, comp.variable, target, also), also


def _selinux_commands(component: str, target: str, fstype: str) -> list[str]:
    commands = selinux.commands(component, target, fstype)
    if selinux.enforcing() is None:
        return ["# SELinux is not enabled on this host; on an enforcing host run:"] + commands
    return commands


def _server_dict(model: ServerModel) -> dict[str, Any]:
    """What the plan keeps of the server: enough to name its files without connecting (``stepbase.model_stub``)."""
    return {"flavor": model.flavor.value, "version": str(model.version), "managed": model.managed,
            "sandbox": model.sandbox, "datadir": model.datadir, "page_size": model.page_size,
            "data_file_path": model.innodb_data_file_path,
            "undo_tablespaces": model.variables.get("innodb_undo_tablespaces", ""), "locations": model.locations()}


def _control_dict(control, mode: str) -> dict[str, Any]:
    return {"kind": control.kind, "name": getattr(control, "name", None), "unit": getattr(control, "unit", None),
            "conf_dir": getattr(control, "conf_dir", None), "describe": control.describe(),
            "stop_hint": control.stop_hint(mode), "start_hint": control.start_hint()}


def _notes(component: str, model: ServerModel, tier) -> list[str]:
    """What the operator should know about the target and the component (no refusal)."""
    notes = list(preflight.fs_notes(component, model, tier))
    if component == "datadir":
        notes += components.other_locations_inside(component, model)
    if component == "ibdata" and model.flavor.value == "mariadb":
        notes.append("on MariaDB the system tablespace also holds the doublewrite buffer"
                     + (" and the undo logs (innodb_undo_tablespaces=0)" if components.undo_in_ibdata(model) else ""))
    if component == "ibdata" and model.has_doublewrite_files and not model.variables.get("innodb_doublewrite_dir"):
        notes.append("innodb_doublewrite_dir is unset, so the doublewrite files follow innodb_data_home_dir; "
                     "they hold nothing after a clean shutdown and are recreated there")
    return notes


def data_bytes(source: str, entries) -> int:
    """Bytes the copy reads: the data regions of the files (``SEEK_DATA``), as the copy itself finds them.

    Not their length: a redo log InnoDB preallocated is mostly unwritten extents, which read as
    holes and are never copied (a 96 MiB ``ib_logfile0`` of a fresh server had 40 MiB of data).
    """
    total = 0
    for rel, st in entries:
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            continue
        try:
            fd = os.open(os.path.join(source, rel), os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        try:
            total += sum(b - a for a, b in data_extents(fd, 0, st.st_size))
        finally:
            os.close(fd)
    return total


def _estimates(entries, copy_bytes: int, rate: float | None, dirty: int, mode: str, change: float | None,
               tables: tuple[int, int], page_size: int = 16384, measured: dict[str, float] | None = None,
               precopy: bool = False) -> dict[str, Any]:
    """Seconds each step and each verification level will take, from the probes (or stated defaults).

    With the pre-copy, the offline delta pass reads one page header per page of the files
    that changed since the last online pass (those written in the last ``RECENT_SECONDS``)
    and copies the blocks the server wrote since that pass began: the measured change rate
    over one pass (a re-read of those files, ``SCAN_SPEEDUP`` times the copy rate) and the
    shutdown.  Files that are neither tablespaces nor a 10.8+ redo log are re-read whole.  Shutdown
    and start are this server's own last figures when it has them (sandboxes record them in
    timings.json), else typical ones.  The offline copy costs the bytes it reads (``data_bytes``)
    at the probed rate of the whole pipeline (read, hash, write, fsync, read back).  The dirty
    pages are written by the pre-flush while the server still serves, before the stop
    (``preflush``): their time is not downtime.
    """
    now = time.time()
    files = [(rel, st) for rel, st in entries if stat.S_ISREG(st.st_mode) and now - st.st_mtime < RECENT_SECONDS]
    recent = sum(st.st_size for _, st in files)
    plain = sum(st.st_size for rel, st in files if not (TABLESPACE_NAME.search(rel) or REDO_NAME.search(rel)))
    r = rate or 100e6
    measured = measured or {}
    stop_key = f"stop_{mode}_s"
    shutdown = measured[stop_key] if stop_key in measured else 1.0 + (5.0 if mode == "slow" else 0.0)
    start = measured.get("start_s", TYPICAL_START_S)
    copy_all = copy_bytes / r
    last_pass = recent / (r * SCAN_SPEEDUP)
    delta_written = min(recent, (change or 0.0) * (last_pass + shutdown))
    headers = (recent - plain) / max(page_size, 1) * HEADER_READ_S
    copy_delta = headers + plain / (r * SCAN_SPEEDUP) + delta_written / r + len(entries) * 0.0002
    n_tables, table_bytes = tables
    sample_s = table_sample.estimate_seconds(n_tables)
    return {"copy_rate_bytes_per_s": round(r), "copy_rate_measured": bool(rate),
            "shutdown_s": round(shutdown, 2), "start_s": round(start, 2),
            "server_times": "measured on this server" if ("start_s" in measured and stop_key in measured)
            else "typical",
            "copy_bytes": copy_bytes, "copy_offline_s": round(copy_all, 1), "delta_bytes": recent,
            "preflush_bytes": dirty, "preflush_s": round(dirty / PREFLUSH_RATE, 1), "copy_delta_s": round(copy_delta, 1),
            "change_rate_bytes_per_s": round(change or 0.0), "change_rate_measured": change is not None,
            "downtime_s": round(shutdown + copy_all + start, 1),
            "downtime_with_precopy_s": round(shutdown + copy_delta + start, 1),
            "downtime_expected_s": round(shutdown + (copy_delta if precopy else copy_all) + start, 1),
            "precopy": precopy,
            "tables": n_tables, "table_bytes": table_bytes,
            # files: the read-back is part of the copy (in the copy rate); sample: under the read lock before
            # the stop, again after the start without a lock; tables: CHECKSUM TABLE twice, writes blocked
            "verify_files_s": 0.0, "verify_sample_s": sample_s,
            "verify_tables_s": round(2 * table_bytes / CHECKSUM_RATE, 1)}


def files_words(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def steps_of(plan: Plan) -> list[Step]:
    size = human_size(plan.bytes_logical)
    c = plan.control
    aa = plan.apparmor
    steps = [Step(State.PLAN, "record the plan and the current option files",
                  f"journal in $INNOTIER_HOME/moves/{plan.move_id}/")]
    if plan.precopy:
        steps.append(Step(State.PRECOPY, f"copy {files_words(plan.files)} ({size}) while the server runs, then again "
                          "what changed, until the delta stops shrinking",
                          "each copy read back and checksummed; later passes rewrite only changed 64 KiB blocks"))
    stop = ("check the server is stopped (--no-shutdown)" if plan.no_shutdown else
            f"{plan.shutdown_mode} shutdown: {c['stop_hint']} ({plan.shutdown_reason})")
    e = plan.estimates
    lock = {"files": "stop (no table reads: the copy's checksums are the proof)",
            "sample": f"sample {SAMPLE_DESC} of every InnoDB table with commits blocked "
                      f"(~{e.get('verify_sample_s', 0):.1f} s), then stop",
            "tables": f"checksum every InnoDB table with commits blocked "
                      f"(~{e.get('verify_tables_s', 0) / 2:.0f} s, writes blocked), then stop"}[plan.verify]
    steps.append(Step(State.SHUTDOWN, lock, stop))
    if plan.names:
        what = "files changed since the pre-copy" if plan.precopy else f"{files_words(plan.files)} ({size})"
        steps.append(Step(State.COPY, f"copy {what} to {plan.target_dir}, reading each copy back from the target "
                          "and comparing xxh3-128 checksums",
                          "sparse-aware; fsync of every file and directory; owner, mode and mtime kept", True))
        steps.append(Step(State.VERIFY,
                          "confirm no source file changed during the copy and no copy since its read-back",
                          "a copy changed since is read back again", True))
    else:
        steps.append(Step(State.COPY, f"create {plan.target_dir}", "nothing to copy: temporary files only", True))
        steps.append(Step(State.VERIFY, "check the directory exists with the right owner", "", True))
    aa_line = {"apply": f"AppArmor: add rules to {aa['local_path']} and reload",
               "write": f"AppArmor: add rules to {aa['local_path']} (not active here: not loaded)",
               "none": "AppArmor: no change"}[aa["action"]]
    if aa.get("retires") and aa["action"] != "none":
        aa_line = f"AppArmor: remove move {aa['retires']}'s rules from {aa['local_path']}" + (
            " and reload" if aa["action"] == "apply" else " (not active here: not loaded)")
    extra = f"; also {', '.join(f'{k} = {v}' for k, v in sorted(plan.also_options.items()))}" if plan.also_options else ""
    rec = f"; rewrite {', '.join(Path(p).name for p in plan.record_files)}" if plan.record_files else ""
    write = (f"write {plan.placement_file} with {plan.variable} = {plan.target_dir}{extra}"
             if plan.placement_after is not None else f"remove {plan.placement_file} (no option left in it)")
    if plan.placement_after is not None and plan.variable not in placement.parse(plan.placement_after):
        write = f"remove {plan.variable} from {plan.placement_file} (the server's own configuration places it there)"
    how = "atomic (write, fsync, rename, fsync dir)" if plan.placement_after is not None else "unlink, fsync dir"
    steps.append(Step(State.SWITCH, write,
                      f"{how}{rec}; owner {plan.owner['user']} "
                      f"mode {plan.owner['mode']:04o} on {plan.target_dir}; {aa_line}{_unit_line(plan)}", True))
    steps.append(Step(State.START, "start the server", c["start_hint"]))
    after = {"files": ("server up and reports the new path", "no table reads; writes allowed from the start"),
             "sample": ("server up, reports the new path, every table's sample equal",
                        f"no lock: writes allowed from the start (~{e.get('verify_sample_s', 0):.1f} s)"),
             "tables": ("server up, reports the new path, every table's checksum equal",
                        f"under a read lock from the start (~{e.get('verify_tables_s', 0) / 2:.0f} s); "
                        "TPC-C consistency checks when a tpcc schema is present")}[plan.verify]
    steps.append(Step(State.VERIFY_SERVER, *after))
    steps.append(Step(State.COMMIT, "record success",
                      f"the source stays until `innotier move finalize --id {plan.move_id}`"))
    return steps


def _unit_line(plan: Plan) -> str:
    u = plan.unit_change()
    if u.action != "dropin":
        return ""
    parts = ([f"write {u.dropin_path}"] if u.dropin_path else []) + ([f"remove {u.retired_path}"] if u.retires else [])
    return f"; systemd: {' and '.join(parts)}, systemctl daemon-reload"


def render(plan: Plan) -> str:
    """The plan as people read it."""
    e = plan.estimates
    out = [f"move {plan.move_id}",
           f"  {plan.what} of {plan.control['describe']} ({plan.server['flavor']} {plan.server['version']})",
           f"  from {plan.source_dir}  [{plan.source_fs['fstype']} on {plan.source_fs['device']}]",
           f"  to   {plan.target_dir}  [{plan.target_tier['fstype']} on {plan.target_tier['device']}, "
           f"{plan.target_tier['kind']}{', volatile' if plan.target_tier['volatile'] else ''}, O_DIRECT "
           f"{ {True: 'yes', False: 'no', None: 'unknown'}[plan.target_tier['o_direct']] }]"]
    if plan.names:
        out.append(f"  files: {plan.files} ({human_size(plan.bytes_logical)}, {human_size(plan.bytes_allocated)} "
                   f"allocated): {', '.join(plan.names[:6])}{' ...' if len(plan.names) > 6 else ''}")
    out.append(f"  space: needs {human_size(plan.space_required)}, target has {human_size(plan.space_available)} free")
    rate = f"{human_size(e['copy_rate_bytes_per_s'])}/s {'measured' if e['copy_rate_measured'] else 'assumed'}"
    if plan.precopy:
        headline = (f"{e['downtime_with_precopy_s']:.1f} s with the online pre-copy "
                    f"({e['downtime_s']:.1f} s without it)")
    else:
        headline = f"{e['downtime_s']:.1f} s offline copy ({e['downtime_with_precopy_s']:.1f} s with --precopy)"
    out.append(f"  expected downtime: {headline}  [copy rate {rate}; shutdown ~{e['shutdown_s']:.1f} s and start "
               f"~{e['start_s']:.1f} s, {e.get('server_times', 'typical')}]")
    out.append(f"  verification ({plan.verify}): copy read back from the target, included in the copy time; "
               f"sample of {e.get('tables', 0)} tables ~{e.get('verify_sample_s', 0):.1f} s before the stop and "
               f"again after the start; CHECKSUM TABLE of {human_size(e.get('table_bytes', 0))} "
               f"~{e.get('verify_tables_s', 0):.0f} s with writes blocked (--verify tables)")
    if plan.precopy and e.get("change_rate_measured"):
        out.append(f"  server writes {human_size(e['change_rate_bytes_per_s'])}/s now: the offline delta is "
                   f"~{human_size(e['delta_bytes'])} to re-read, ~{e['copy_delta_s']:.1f} s")
    out.append("  steps:")
    for i, s in enumerate(plan.steps, 1):
        flag = " (server stopped)" if s.offline else ""
        out.append(f"    {i}. {s.state:<13} {s.title}{flag}")
        if s.detail:
            out.append(f"       {'':<13} {s.detail}")
    out.append(f"  option file {plan.placement_file}:")
    if plan.placement_before is not None:
        out.append("    before:")
        out += [f"      {ln}" for ln in plan.placement_before.rstrip("\n").splitlines()]
        out.append("    after:")
    if plan.placement_after is None:
        out.append("      (removed)")
    else:
        out += [f"      {ln}" for ln in plan.placement_after.rstrip("\n").splitlines()]
    aa = plan.apparmor
    out.append(f"  AppArmor: {aa['reason']}")
    out += [f"      {ln}" for ln in aa["rules"].rstrip("\n").splitlines()]
    u = plan.unit_change()
    if u.unit:
        out.append(f"  systemd unit {u.unit}: {u.reason}")
        if u.dropin_path:
            out += [f"      {ln}" for ln in u.dropin_text().rstrip("\n").splitlines()]
    out.append("  SELinux:")
    out += [f"      {ln}" for ln in plan.selinux]
    for n in plan.notes:
        out.append(f"  note: {n}")
    return "\n".join(out) + "\n"
