"""Apply a stored advice: the pick's tables moved onto the tier online, its components named for `move apply`.

advice (StoredAdvice) -> plan (ApplyPlan: one table-move plan per table of the pick, every refusal of every
table before the first moves; the pick's components with the command that moves each) -> execution (the table
moves one after another, largest predicted saving first, each under its own journal) -> result (ApplyResult).

Tables move online (datadir_mover/tablemove: MariaDB's proven shadow swap, MySQL's tablespace ALTER).  The
components (redo, undo, doublewrite, tmpdir, ibdata) need a restart each, so this command does not stop the
server for them: it prints the `innotier move apply` command of each, to run in a maintenance window.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from datadir_mover.tablemove.plan import TableMoveRequest, TablePlan, build
from datadir_mover.tablemove.steps import TableMover
from tuner.core.errors import InnotierError, UsageError
from tuner.core.server import ConnectionSpec
from tuner.core.units import human_size
from tuner.placement.model import COMPONENT_KINDS, StoredAdvice


@dataclass(frozen=True)
class ApplyRequest:
    root: str                        # the tier directory the tables go to
    accept_volatile: bool = False
    persist_backing: str | None = None
    allow_same_fs: bool = False


@dataclass(frozen=True)
class ApplyPlan:
    advice_id: str
    tables: tuple[TablePlan, ...]    # in the order they move: largest predicted saving first
    components: tuple[tuple[str, str], ...]   # (component, the command that moves it)
    notes: tuple[str, ...] = ()


@dataclass
class ApplyResult:
    advice_id: str
    moved: list[dict[str, Any]] = field(default_factory=list)
    components: list[tuple[str, str]] = field(default_factory=list)


def plan(stored: StoredAdvice, kinds: dict[str, str], request: ApplyRequest, spec: ConnectionSpec) -> ApplyPlan:
    """``kinds``: each candidate's kind from the advice's profile.  Every table is planned (and refused, in one
    line naming it) before anything moves."""
    advice = stored.advice
    gains = advice.gains or {}
    keys = sorted(advice.pick.keys, key=lambda k: -gains.get(k, 0.0))
    unknown = [k for k in keys if kinds.get(k) not in ("table", *COMPONENT_KINDS)]
    if unknown:
        kind = kinds.get(unknown[0]) or "not in its profile"
        raise UsageError(f"advice {stored.advice_id} picks {unknown[0]} ({kind}), which cannot be moved on its own; "
                         "move it by hand or advise again without it")
    tables = []
    for key in (k for k in keys if kinds[k] == "table"):
        schema, _, table = key.partition(".")
        req = TableMoveRequest(schema=schema, table=table, root=request.root, allow_same_fs=request.allow_same_fs,
                               accept_volatile=request.accept_volatile, persist_backing=request.persist_backing)
        try:
            tables.append(build(req, spec))
        except InnotierError as exc:
            raise type(exc)(f"{key} of advice {stored.advice_id}: {exc}; nothing was moved") from None
    components = tuple((k, f"innotier move apply {k} --to {os.path.join(request.root, k)}")
                       for k in keys if kinds[k] != "table")
    notes = () if not components else (
        f"{len(components)} component(s) of the pick need a restart each: run their commands in a maintenance "
        "window (docs/relocation.md)",)
    if not tables and not components:
        raise UsageError(f"advice {stored.advice_id} picks nothing to move; advise with a larger --budget")
    return ApplyPlan(stored.advice_id, tuple(tables), components, notes)


def execute(p: ApplyPlan, echo: Callable[[str], None] = print) -> ApplyResult:
    """The tables one after another; the first that fails stops the rest (its own journal says how to go on)."""
    out = ApplyResult(p.advice_id, components=list(p.components))
    for i, tp in enumerate(p.tables, 1):
        echo(f"[{i}/{len(p.tables)}] {tp.schema}.{tp.table} ({human_size(tp.bytes)}) -> {tp.root}")
        try:
            out.moved.append(TableMover.create(tp, echo).run())
        except InnotierError as exc:
            done = ", ".join(r["table"] for r in out.moved) or "no table"
            raise type(exc)(f"{exc} (moved before it: {done}; the tables after it were not started)") from None
    return out


def describe(p: ApplyPlan, echo: Callable[[str], None] = print) -> None:
    echo(f"advice {p.advice_id}: {len(p.tables)} table(s) online, {len(p.components)} component(s) by restart")
    for tp in p.tables:
        how = ("pt-online-schema-change shadow, proven, swapped" if tp.method == "pt-osc"
               else "ALTER TABLE ... TABLESPACE")
        echo(f"  table {tp.schema}.{tp.table}: {human_size(tp.bytes)}, {tp.file_before} -> {tp.file_after} ({how})")
        for note in tp.notes:  # the tier's facts, a volatile tier's acceptance, a MariaDB copy's redo room
            echo(f"    note: {note}")
    for comp, command in p.components:
        echo(f"  {comp}: {command}")
    for note in p.notes:
        echo(f"note: {note}")
