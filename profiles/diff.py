"""Diff two option sets: option files, profiles (rendered for a target) or a live server, with units and defaults normalized.

`512M` and `536870912` are the same; an option absent on one side compares as the target's
default (from the catalog) and is marked so.  Options the catalog does not know are compared as
text.  ``pt_config_diff`` offers percona-toolkit's own view of the same two sides.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from profiles.catalog import load_catalog
from profiles.optionfile import parse_option_file, server_groups
from profiles.target import Target, make_target
from tuner.core.errors import ProfileError, ToolMissing
from profiles.model import load_profile
from profiles.render import render_option_file, render_options
from tuner.core.server import fetch_variables, model_from_variables

# variables a live server reports that are not settings worth comparing
LIVE_ONLY = {"version", "version_comment", "version_compile_os", "innodb_version", "hostname", "server_uuid",
             "pid_file", "socket", "port", "log_error", "general_log_file", "slow_query_log_file"}


@dataclass
class Side:
    label: str
    options: dict[str, str]
    kind: str  # file | profile | server
    path: str | None = None  # a file pt-config-diff can read (files, rendered profiles)


@dataclass(frozen=True)
class DiffRow:
    option: str
    a: str | None
    b: str | None
    a_default: bool
    b_default: bool

    def to_dict(self) -> dict:
        return {"option": self.option, "a": self.a, "b": self.b, "a_is_default": self.a_default,
                "b_is_default": self.b_default}


def side_from_file(path: str, target: Target) -> Side:
    parsed = parse_option_file(path, load_catalog().known_names(target))
    groups = server_groups(target)
    opts = {ln.name: ("" if ln.value is None else ln.value) for ln in parsed.lines if ln.group in groups}
    return Side(label=path, options=opts, kind="file", path=path)


def side_from_profile(name_or_path: str, target: Target) -> Side:
    profile = load_profile(name_or_path)
    return Side(label=f"profile {profile.name} ({target.describe()})",
                options=render_options(profile, target.flavor, target.version), kind="profile")


def side_from_server(spec) -> tuple[Side, Target]:
    conn = spec.with_database(None).connect()
    try:
        variables = {k.lower(): v for k, v in fetch_variables(conn).items()}
    finally:
        conn.close()
    model = model_from_variables(variables, sandbox=spec.sandbox)
    target = make_target(model.flavor, model.version)
    opts = {k: ("" if v is None else str(v)) for k, v in variables.items() if k not in LIVE_ONLY}
    return Side(label=f"server {spec.describe()}", options=opts, kind="server"), target


def resolve_side(spec: str, target: Target) -> Side:
    """A file path, else a profile name or YAML file."""
    if os.path.isfile(spec) and not spec.endswith((".yaml", ".yml")):
        return side_from_file(spec, target)
    return side_from_profile(spec, target)


def _normalized(name: str, value: str | None, target: Target) -> str | None:
    if value is None:
        return None
    row = load_catalog().row(name, target)
    if row is None:
        return value.strip()
    try:
        return row.normalize(value)
    except ProfileError:
        return value.strip()


def diff(a: Side, b: Side, target: Target) -> list[DiffRow]:
    """Rows where the two sides differ after normalization.  A live server reports every variable, so against a
    server only the options the other side sets are compared."""
    names = set(a.options) | set(b.options)
    if a.kind == "server":
        names = set(b.options)
    if b.kind == "server":
        names = set(a.options) if a.kind != "server" else names
    rows = []
    for name in sorted(names):
        row = load_catalog().row(name, target)
        default = row.default_normalized() if row else None
        va, vb = _normalized(name, a.options.get(name), target), _normalized(name, b.options.get(name), target)
        a_def, b_def = va is None and default is not None, vb is None and default is not None
        va = default if a_def else va
        vb = default if b_def else vb
        if va != vb:
            rows.append(DiffRow(name, va, vb, a_def, b_def))
    return rows


def pt_config_diff(a: Side, b: Side, spec=None) -> str:
    """percona-toolkit's pt-config-diff on the same two sides (profiles rendered to temporary files)."""
    tool = shutil.which("pt-config-diff")
    if not tool:
        raise ToolMissing("pt-config-diff not found; install percona-toolkit (apt-get install percona-toolkit)")

    with tempfile.TemporaryDirectory(prefix="innotier-diff-") as tmp:
        args = []
        client = None
        for i, side in enumerate((a, b)):
            if side.kind == "file":
                args.append(side.path)
            elif side.kind == "profile":
                p = os.path.join(tmp, f"side{i}.cnf")
                with open(p, "w") as fh:
                    fh.write(render_option_file(side.options, [side.label]))
                args.append(p)
            else:
                if spec is None:
                    raise ProfileError("a server side needs connection options (--sandbox/--socket/--host)")
                client = spec.client_option_file()
                path = client.__enter__()
                dsn = f"F={path}" + (f",S={spec.socket}" if spec.socket else f",h={spec.host},P={spec.port or 3306}")
                args.append(dsn)
        try:
            proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)
        finally:
            if client is not None:
                client.__exit__(None, None, None)
    if proc.returncode not in (0, 1):
        raise ProfileError(f"pt-config-diff failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[:300]}")
    return proc.stdout or "(pt-config-diff found no differences)\n"
