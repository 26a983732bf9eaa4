"""A table move's request, its checked plan, and the checks that refuse bad input before anything changes.

``build(request, spec)`` reads the server and the tier, refuses in one line what cannot work (unknown
table, root not mounted or too small, a volatile tier without persistence, a MySQL root the server has
not registered, a table pt-online-schema-change cannot copy) and returns a ``TablePlan`` that the
executor carries out and the journal keeps (``plan.json``).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tuner.core.errors import MoveError
from tuner.core.sandbox import Sandbox
from tuner.core.server import ConnectionSpec, Flavor, ServerModel, inspect
from tuner.core.units import human_size

from datadir_mover import apparmor
from datadir_mover.move import volatile
from datadir_mover.move.preflight import check_space, tier_facts
from datadir_mover.tablemove import ptosc, redo_room, store, where

PLAN_VERSION = 1
METHODS = {Flavor.MYSQL: "tablespace", Flavor.MARIADB: "pt-osc"}
TABLESPACE_PREFIX = "innotier_"


@dataclass(frozen=True)
class TableMoveRequest:
    """What the user asked: ``root`` a tier directory, or None to move the table home to the datadir."""

    schema: str
    table: str
    root: str | None
    allow_same_fs: bool = False
    accept_volatile: bool = False
    persist_backing: str | None = None
    home_of: str | None = None  # the committed move whose table this one brings home
    copy_pause_s: float = 0.0  # MariaDB: a pause after each of the copier's chunks (pt-online-schema-change --sleep)
    apparmor_root: str = "/etc/apparmor.d"
    sys_root: str = "/sys"


@dataclass(frozen=True)
class TablePlan:
    version: int
    move_id: str
    request: dict[str, Any]
    connection: dict[str, Any]
    server: str  # what the user reads: "sandbox s1 (MariaDB 10.11.6)"
    server_key: str  # which server, for "one open move per table"
    flavor: str
    method: str  # "tablespace" (MySQL ALTER TABLE ... TABLESPACE) or "pt-osc" (MariaDB shadow table)
    schema: str
    table: str
    root: str | None
    file_before: str
    file_after: str  # where the table's file will be (the expected path, checked after the move)
    tablespace_before: str
    tablespace_after: str | None  # MySQL: the general tablespace (or innodb_file_per_table going home)
    shadow_table: str  # MariaDB: the copy pt-online-schema-change fills, then the original's name after the swap
    old_table: str  # MariaDB: the original's name after the swap, until it is dropped
    bytes: int
    apparmor: dict[str, Any]
    tier: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TablePlan":
        if d.get("version") != PLAN_VERSION:
            raise MoveError(f"table-move plan version {d.get('version')} is not supported (expected {PLAN_VERSION})")
        return cls(**d)

    @property
    def going_home(self) -> bool:
        return self.root is None

    def connection_spec(self) -> ConnectionSpec:
        return spec_from_dict(self.connection)

    def apparmor_change(self) -> apparmor.AppArmorChange:
        return apparmor.AppArmorChange.from_dict(self.apparmor)


def tablespace_name(schema: str, table: str) -> str:
    """A general tablespace per table (so going home drops it whole); at most 64 characters."""
    slug = re.sub(r"[^A-Za-z0-9_]", "_", f"{schema}_{table}")
    name = TABLESPACE_PREFIX + slug
    if len(name) > 64:
        name = name[:55] + "_" + hashlib.sha1(slug.encode()).hexdigest()[:8]
    return name


def side_names(table: str, move_id: str) -> tuple[str, str]:
    """The shadow's and the swapped-out original's names, unique to the move: a name an earlier move used can
    still be metadata-locked by client sessions (measured under TPC-C: DROP and CREATE of a reused `_stock_new`
    waited 24 s; docs/table-moves.md), and a fresh name never is."""
    token = move_id.rsplit("-", 1)[-1]
    base = table if len(table) <= 52 else hashlib.sha1(table.encode()).hexdigest()[:16]
    return f"_{base}_{token}_new", f"_{base}_{token}_old"


def new_move_id(schema: str, table: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{schema}.{table}")[:40]
    return f"{time.strftime('%Y%m%dT%H%M%S')}-table-{slug}-{secrets.token_hex(2)}"


def connection_dict(spec: ConnectionSpec) -> dict[str, Any]:
    """How to reach the server again, without the password (the defaults file or environment has it)."""
    return {"sandbox": spec.sandbox, "socket": spec.socket, "host": spec.host, "port": spec.port,
            "defaults_file": spec.defaults_file}


def spec_from_dict(c: dict[str, Any]) -> ConnectionSpec:
    if c.get("sandbox"):
        return Sandbox.load(c["sandbox"]).connection_spec()
    return ConnectionSpec.from_options(socket=c.get("socket"), host=c.get("host"), port=c.get("port"),
                                       defaults_file=c.get("defaults_file"))


def registered_dirs(model: ServerModel) -> list[str]:
    """MySQL: the directories InnoDB accepts data files in (innodb_directories plus those it always scans)."""
    raw = model.variables.get("innodb_directories") or ""
    listed = [p.strip() for p in raw.split(";") if p.strip()]
    return [os.path.realpath(p) for p in listed + [model.datadir, model.innodb_data_home_dir,
                                                    model.innodb_undo_directory] if p]


def is_registered(model: ServerModel, root: str) -> bool:
    root = os.path.realpath(root)
    return any(root == d or root.startswith(d.rstrip("/") + "/") for d in registered_dirs(model))


def build(request: TableMoveRequest, spec: ConnectionSpec) -> TablePlan:
    model = inspect(spec)
    if model.flavor not in METHODS:
        raise MoveError(f"table moves support MySQL and MariaDB, not {model.flavor.value}; "
                        "move the component instead (`innotier move`)")
    if request.copy_pause_s and model.flavor != Flavor.MARIADB:
        raise MoveError(f"--pace paces MariaDB's copier; {model.flavor.value}'s ALTER TABLE ... TABLESPACE has no "
                        "pace: leave it out; nothing was changed")
    conn = spec.with_database(None).connect()
    try:
        current = _check_table(conn, model, request)
        plan = (_home_plan if request.root is None else _tier_plan)(request, spec, model, conn, current)
        for name in (plan.shadow_table, plan.old_table) if model.flavor == Flavor.MARIADB else ():
            if where.exists(conn, plan.schema, name):
                raise MoveError(f"{plan.schema}.{name} exists already; drop or rename it and plan again; nothing "
                                "was changed")
        return _with_copy_notes(plan, model, conn)
    finally:
        conn.close()


def _with_copy_notes(plan: TablePlan, model: ServerModel, conn) -> TablePlan:
    """MariaDB's copier: what a paced copy costs, and whether the redo log has room for what the copy writes."""
    if plan.method != METHODS[Flavor.MARIADB]:
        return plan
    pace = plan.request.get("copy_pause_s") or 0.0
    paced = [f"paced copy: {pace:g} s after each {ptosc.CHUNK_S:g}-s chunk: it takes about "
             f"{1 + pace / ptosc.CHUNK_S:.0f}x as long and writes its redo that much slower"] if pace else []
    room = redo_room.read(conn, model.variables, plan.bytes)
    line = redo_room.note(room, model.flavor, model.version) if room else None
    return replace(plan, notes=[*plan.notes, *paced, *([line] if line else [])])


def _check_table(conn, model: ServerModel, request: TableMoveRequest) -> where.TableFile:
    s, t = request.schema, request.table
    kind = where.table_kind(conn, s, t)
    if kind is None:
        raise MoveError(f"no table {s}.{t} on this server; check the name (`SHOW TABLES FROM {s}`); nothing was changed")
    if kind[1] != "BASE TABLE" or kind[0].lower() != "innodb":
        raise MoveError(f"{s}.{t} is a {kind[1].lower()} with engine {kind[0] or 'none'}; only InnoDB tables can move "
                        "onto a tier; nothing was changed")
    current = where.table_file(conn, model.flavor, s, t)
    if current is None:
        raise MoveError(f"InnoDB does not list a tablespace for {s}.{t}; check the table (`CHECK TABLE {s}.{t}`)")
    if current.space_type not in ("Single", "General") or (current.space_type == "General"
                                                          and not current.space.startswith(TABLESPACE_PREFIX)):
        raise MoveError(f"{s}.{t} lives in the shared tablespace {current.space}, which innotier does not move tables "
                        "out of; rebuild it file-per-table first (`ALTER TABLE ... TABLESPACE=innodb_file_per_table`)")
    store.refuse_open_move(s, t, _server_key(model))
    if model.flavor == Flavor.MARIADB:
        _check_copyable(conn, s, t)
    return current


def _check_copyable(conn, s: str, t: str) -> None:
    """What pt-online-schema-change needs: a primary key, no foreign keys, no triggers, free shadow names."""
    ptosc.tool()
    if not where.primary_key(conn, s, t):
        raise MoveError(f"{s}.{t} has no primary key, which the online copier needs to copy in chunks and prove the "
                        "copy; add one (`ALTER TABLE ... ADD PRIMARY KEY`) or move the table offline; nothing was changed")
    if where.foreign_keys(conn, s, t):
        raise MoveError(f"{s}.{t} takes part in foreign keys, which a shadow-table swap would re-point; drop them first "
                        "or move the whole datadir (`innotier move datadir`); nothing was changed")
    trig = where.triggers(conn, s, t)
    leftover = [x for x in trig if x in ptosc.trigger_names(s, t)]
    if leftover:
        raise MoveError(f"{s}.{t} still has the triggers of an earlier pt-online-schema-change run ({', '.join(leftover)}); "
                        "finish or undo that run first (`innotier table-move status`); nothing was changed")
    if trig:
        raise MoveError(f"{s}.{t} has triggers of its own ({', '.join(trig)}), which the shadow copy would have to "
                        "duplicate; drop them for the move or move the whole datadir; nothing was changed")


def _server_key(model: ServerModel) -> str:
    return f"sandbox:{model.sandbox}" if model.managed == "sandbox" else f"system:{model.socket or model.port}"


def _server_words(model: ServerModel, spec: ConnectionSpec) -> str:
    return f"{spec.describe()} ({model.flavor.value} {model.version})"


def _size(path: str) -> int:
    try:
        st = os.stat(path)
        return max(st.st_size, st.st_blocks * 512)
    except OSError:
        return 0


def _tier_plan(request, spec, model, conn, current: where.TableFile) -> TablePlan:
    root = _check_root(request, model, current, server_args(spec))
    move_id = new_move_id(request.schema, request.table)
    tier = tier_facts(root)
    size = _size(current.path)
    check_space(root, size, tier.free_bytes)
    if tier.volatile and not request.accept_volatile:
        why = volatile.persistence_problem(root, request.persist_backing)
        if why is not None:
            raise MoveError(f"{root} is on a volatile tier ({tier.kind}) and {why}: the table would be lost at a power "
                            f"loss; set up persistence (`innotier persist install --tier {tier.mountpoint or root} "
                            "--backing DIR`, then pass --persist-backing DIR) or pass --i-accept-volatile; "
                            "nothing was changed")
    aa = apparmor.plan_change([root], model.flavor.value, move_id, request.apparmor_root, request.sys_root)
    apparmor.validate(aa, request.apparmor_root)
    if model.flavor == Flavor.MYSQL:
        ts = tablespace_name(request.schema, request.table)
        after, method_ts = os.path.join(root, ts + ".ibd"), ts
    else:
        after, method_ts = os.path.join(root, request.schema, request.table + ".ibd"), None
    if os.path.lexists(after):
        raise MoveError(f"{after} already exists on the tier; remove it (or choose another root); nothing was changed")
    notes = [f"tier {tier.kind} ({tier.fstype or 'unknown fs'} on {tier.mountpoint or '?'}), "
             f"{human_size(tier.free_bytes)} free, table file {human_size(size)}"]
    if tier.volatile:
        notes.append("volatile tier: " + ("accepted by --i-accept-volatile" if request.accept_volatile
                                          else f"kept by the persistence backing {request.persist_backing}"))
    return _plan(request, spec, model, move_id, current, after, method_ts, size, aa, tier.to_dict(), notes)


def server_args(spec: ConnectionSpec) -> str:
    """The options that name this server on innotier's command line (for the fixes errors print)."""
    if spec.sandbox:
        return f"--sandbox {spec.sandbox}"
    if spec.socket:
        return f"--socket {spec.socket}"
    return f"--host {spec.host} --port {spec.port or 3306}"


def _check_root(request, model: ServerModel, current: where.TableFile, named: str) -> str:
    root = request.root
    if not os.path.isabs(root):
        raise MoveError(f"tier root {root} is not an absolute path; give the full path, e.g. /mnt/fast/tables")
    root = os.path.normpath(root)
    if os.path.realpath(root) != root:
        raise MoveError(f"tier root {root} is or lies under a symlink (it resolves to {os.path.realpath(root)}); "
                        "give the resolved path")
    if not os.path.isdir(root):
        raise MoveError(f"tier root {root} is not a directory; mount the tier and create it first; nothing was changed")
    dd = os.path.realpath(model.datadir).rstrip("/") + "/"
    if (root.rstrip("/") + "/").startswith(dd):
        raise MoveError(f"tier root {root} is inside the datadir {model.datadir}; choose a directory on the tier")
    if current.under(root):
        raise MoveError(f"{request.schema}.{request.table} already lives in {root}; nothing to do")
    if not request.allow_same_fs and os.stat(root).st_dev == os.stat(os.path.dirname(current.path)).st_dev:
        raise MoveError(f"tier root {root} is on the same file system as {current.path}: the move would gain nothing; "
                        "if the tier is not mounted there, mount it (`innotier tiers list`), otherwise choose a "
                        "directory on the faster tier (or pass --allow-same-fs); nothing was changed")
    if model.flavor == Flavor.MYSQL and not is_registered(model, root):
        raise MoveError(f"{root} is not in the server's innodb_directories, so MySQL refuses data files there "
                        f"(ERROR 3121); register it once (a restart): `innotier table-move register-root {root} "
                        f"{named}`; nothing was changed")
    return root


def _home_plan(request, spec, model, conn, current: where.TableFile) -> TablePlan:
    if current.under(model.datadir):
        raise MoveError(f"{request.schema}.{request.table} already lives in the datadir ({current.path}); "
                        "nothing to do")
    move_id = new_move_id(request.schema, request.table)
    # the table ran confined on the tier through the rule of the move that took it there: that move's block is
    # retired once the table is home (no new rule is needed for the datadir)
    aa = apparmor.plan_change([], model.flavor.value, move_id, request.apparmor_root, request.sys_root,
                              retire=request.home_of)
    after = os.path.join(model.datadir, request.schema, request.table + ".ibd")
    ts = "innodb_file_per_table" if model.flavor == Flavor.MYSQL else None
    return _plan(request, spec, model, move_id, current, after, ts, _size(current.path), aa, {},
                 [f"home: back to the datadir {model.datadir}"])


def _plan(request, spec, model, move_id, current, after, ts_after, size, aa, tier, notes) -> TablePlan:
    shadow, old = side_names(request.table, move_id)
    return TablePlan(version=PLAN_VERSION, move_id=move_id, request=asdict(request),
                     connection=connection_dict(spec), server=_server_words(model, spec),
                     server_key=_server_key(model), flavor=model.flavor.value,
                     method=METHODS[model.flavor], schema=request.schema, table=request.table, root=request.root,
                     file_before=current.path, file_after=after, tablespace_before=current.space,
                     tablespace_after=ts_after, shadow_table=shadow, old_table=old, bytes=size, apparmor=aa.to_dict(), tier=tier, notes=notes,
                     created_at=time.time())


def render(plan: TablePlan) -> str:
    dest = "the datadir" if plan.going_home else plan.root
    lines = [f"table move {plan.move_id}: {plan.schema}.{plan.table} on {plan.server} -> {dest}",
             f"  now:   {plan.file_before} ({human_size(plan.bytes)})",
             f"  after: {plan.file_after}"]
    if plan.method == "tablespace":
        lines.append(f"  how:   ALTER TABLE {plan.schema}.{plan.table} TABLESPACE={plan.tablespace_after} "
                     "(the server's own online rebuild)" + ("" if plan.going_home else
                                                          f", after CREATE TABLESPACE {plan.tablespace_after}"))
    else:
        lines.append(f"  how:   {ptosc.TOOL} fills {plan.shadow_table} " +
                     ("in the datadir (--remove-data-dir)" if plan.going_home else f"with DATA DIRECTORY {plan.root}")
                     + "; both tables' row digests compared in one snapshot; then RENAME TABLE swaps them")
    lines.append(f"  apparmor: {plan.apparmor['action']}: {plan.apparmor['reason']}")
    lines += [f"  note: {n}" for n in plan.notes]
    return "\n".join(lines) + "\n"
