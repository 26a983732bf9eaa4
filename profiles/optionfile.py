"""Reading MySQL/MariaDB option files the way the server does: groups, `!include`, `!includedir`, prefixes.

Syntax (MySQL manual "Using Option Files", https://dev.mysql.com/doc/refman/8.0/en/option-files.html):
`[group]`, `name`, `name=value`, `#`/`;` comment lines, `#` comments after a value, quoted values,
`!include FILE` and `!includedir DIR` (files ending in .cnf; read here in name order).  Dashes and
underscores in names are the same.  Prefixes: `loose-` (unknown names are only a warning),
`skip-`/`disable-` (a boolean set to OFF), `enable-` (ON), `maximum-` (a session limit).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from profiles.target import Target

_GROUP_RE = re.compile(r"^\[\s*([^\]]+?)\s*\]\s*(?:[#;].*)?$")


@dataclass(frozen=True)
class OptionLine:
    group: str
    raw_name: str
    name: str  # normalized: lower case, underscores, prefix removed
    value: str | None  # None: given without a value (a boolean switch)
    file: str
    line: int
    prefix: str = ""  # loose / skip / disable / enable / maximum

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class ParsedFile:
    path: str
    lines: list[OptionLine] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # this file and everything it included
    problems: list[tuple[str, str]] = field(default_factory=list)  # (where, message)


def normalize_name(raw: str, known: frozenset[str] | set[str] = frozenset()) -> tuple[str, str, str | None]:
    """(name, prefix, implied value) for an option name as written: `skip-innodb-doublewrite` -> (innodb_doublewrite, skip, OFF)."""
    name = raw.strip().lower().replace("-", "_")
    if name in known:
        return name, "", None
    for prefix, implied in (("loose_", None), ("skip_", "OFF"), ("disable_", "OFF"), ("enable_", "ON"),
                            ("maximum_", None)):
        if name.startswith(prefix) and len(name) > len(prefix):
            rest = name[len(prefix):]
            if prefix == "loose_":
                inner, inner_prefix, inner_value = normalize_name(rest, known)
                return inner, "loose" + (f"+{inner_prefix}" if inner_prefix else ""), inner_value
            return rest, prefix.rstrip("_"), implied
    return name, "", None


def _value(text: str) -> str:
    """A value with quotes and a trailing `#` comment removed (escapes as the manual lists)."""
    s = text.strip()
    if s[:1] in ("'", '"'):
        q = s[0]
        end = s.find(q, 1)
        if end > 0:
            inner = s[1:end]
            return (inner.replace("\\n", "\n").replace("\\t", "\t").replace("\\s", " ")
                    .replace("\\\\", "\\"))
    cut = re.search(r"(^|\s)#", s)
    if cut:
        s = s[:cut.start()].rstrip()
    return s


def parse_option_text(text: str, path: str = "<text>", known: frozenset[str] = frozenset(),
                      _seen: set[str] | None = None, _out: ParsedFile | None = None) -> ParsedFile:
    out = _out or ParsedFile(path=path)
    seen = _seen if _seen is not None else set()
    out.files.append(path)
    group = ""
    base = os.path.dirname(path) if path != "<text>" else os.getcwd()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{path}:{n}"
        if not line or line[0] in "#;":
            continue
        if line.startswith("!include ") or line.startswith("!includedir "):
            directive, arg = line.split(None, 1)
            target = os.path.join(base, arg.strip())
            if directive == "!include":
                _include(target, where, known, seen, out)
            elif os.path.isdir(target):
                for f in sorted(os.listdir(target)):
                    if f.endswith(".cnf"):
                        _include(os.path.join(target, f), where, known, seen, out)
            else:
                out.problems.append((where, f"!includedir {arg.strip()} is not a directory"))
            continue
        m = _GROUP_RE.match(line)
        if m:
            group = m.group(1).strip().lower()
            continue
        if not group:
            out.problems.append((where, f"option {line!r} comes before any [group]; the server ignores or rejects it"))
            continue
        if "=" in line:
            raw_name, raw_value = line.split("=", 1)
            value: str | None = _value(raw_value)
        else:
            raw_name, value = _value(line), None
        name, prefix, implied = normalize_name(raw_name, known)
        if implied is not None:
            value = implied if value is None else value
        out.lines.append(OptionLine(group=group, raw_name=raw_name.strip(), name=name, value=value,
                                    file=path, line=n, prefix=prefix))
    return out


def _include(path: str, where: str, known, seen: set[str], out: ParsedFile) -> None:
    real = os.path.realpath(path)
    if real in seen:
        out.problems.append((where, f"{path} is included twice (an include loop); remove one of the !include lines"))
        return
    if not os.path.isfile(path):
        out.problems.append((where, f"included file {path} does not exist"))
        return
    seen.add(real)
    parse_option_text(Path(path).read_text(errors="replace"), path, known, seen, out)


def parse_option_file(path: str | os.PathLike, known: frozenset[str] = frozenset()) -> ParsedFile:
    p = os.fspath(path)
    text = Path(p).read_text(errors="replace")
    seen = {os.path.realpath(p)}
    return parse_option_text(text, p, known, seen)


def server_groups(target: Target) -> set[str]:
    """The groups the target's server reads (MySQL manual "Using Option Files"; MariaDB "Configuring with Option Files")."""
    series = target.version.series
    groups = {"mysqld", "server", f"mysqld-{series}"}
    if target.family == "mariadb":
        groups |= {"mariadb", f"mariadb-{series}", "mariadbd", f"mariadbd-{series}", "client-server", "galera"}
    return groups


FOREIGN_SERVER_GROUPS = re.compile(r"^(mysqld|server|mariadb|mariadbd)(-\d+\.\d+)?$")
