"""Helpers every sub-command shares: connection options, JSON output, tables."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from pathlib import Path
from typing import Any

from tuner.core.cliwiring import register_modules  # noqa: F401  (its home before cliwiring)
from tuner.core.errors import UsageError
from tuner.core.sandbox import Sandbox
from tuner.core.server import ConnectionSpec


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """The one way to name a server: --sandbox, or --socket / --host --port, plus --defaults-file.

    Credentials never come from argv: they come from --defaults-file ([client]
    section) or from INNOTIER_USER / INNOTIER_PASSWORD (MYSQL_PWD is honoured too).
    """
    g = parser.add_argument_group("server connection")
    g.add_argument("--sandbox", metavar="NAME", help="a sandbox created by `innotier sandbox create`")
    g.add_argument("--socket", metavar="PATH", help="server's unix socket")
    g.add_argument("--host", metavar="H", help="server host (TCP)")
    g.add_argument("--port", type=int, metavar="N", help="server port (TCP)")
    g.add_argument("--defaults-file", metavar="FILE", help="option file with a [client] section (user, password)")
    g.add_argument("--database", metavar="DB", default=None, help="schema to use (default: tpcc for workload commands)")


def connection_from_args(args: Any, database: str | None = None) -> ConnectionSpec:
    """The server the --sandbox / --socket / --host --port / --defaults-file options name."""
    sandbox = getattr(args, "sandbox", None)
    socket = getattr(args, "socket", None)
    host = getattr(args, "host", None)
    port = getattr(args, "port", None)
    db = getattr(args, "database", None) or database
    if sandbox and (socket or host or port):
        raise UsageError("give either --sandbox or --socket/--host/--port, not both")
    if sandbox:
        spec = Sandbox.load(sandbox).connection_spec()
        spec.database = db
        return spec
    return ConnectionSpec.from_options(socket=socket, host=host, port=port,
                                       defaults_file=getattr(args, "defaults_file", None), database=db)


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_dict"):
            return to_jsonable(obj.to_dict())
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.name.startswith("_")}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [to_jsonable(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    json.dump(to_jsonable(obj), sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def parse_key_values(items: list[str] | None, what: str = "--option") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"{what} {item!r} is not key=value; write it as {what} name=value")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        if not k:
            raise UsageError(f"{what} {item!r} has an empty name; write it as {what} name=value")
        out[k] = v.strip()
    return out


def print_table(rows: list[dict[str, Any]], columns: list[str], title: str | None = None,
                fold: tuple[str, ...] = ()) -> None:
    """A table; columns named in ``fold`` (URLs, paths) break over lines instead of being cut with an ellipsis."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c, overflow="fold" if c in fold else "ellipsis")
    for r in rows:
        table.add_row(*["" if r.get(c) is None else str(r.get(c)) for c in columns])
    Console().print(table)
