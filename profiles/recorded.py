"""Catalog rows checked against what real server binaries said (``catalog/recorded/``).

A recording of a series (written by ``scripts/record-server-catalog`` from a real sandbox) holds the option
names of ``--verbose --help``, its compiled defaults, ``SHOW GLOBAL VARIABLES``, and the ranges: MariaDB's
``information_schema.SYSTEM_VARIABLES`` (defaults, ranges, enum values, read-only) or MySQL's
``performance_schema.variables_info`` (MIN_VALUE, MAX_VALUE).  ``check_row`` compares one catalog row with
it and returns what disagrees; ``check_series`` does every row that applies to the series.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

from profiles.catalog import CATALOG_DIR, OptionRow, load_catalog
from profiles.target import parse_target
from tuner.core.errors import ProfileError

RECORDED_DIR = CATALOG_DIR / "recorded"
RECORDED_SERIES = ("mariadb-10.11", "mariadb-11.8", "mysql-9.7")  # series with a real-binary recording
NO_DEFAULT = "(No default value)"
NO_MAXIMUM = 1 << 63  # a variable maximum this large means the binary sets none (the manual's limit applies)


@dataclass
class Recording:
    series: str  # mysql-9.7
    version: str  # what the binary printed
    names: frozenset[str]  # option names of --verbose --help
    variables: dict[str, str]  # SHOW GLOBAL VARIABLES (MariaDB 10.11: from SYSTEM_VARIABLES names)
    info: dict[str, dict]  # variable -> {min, max, default?, enum?, read_only?}
    help_defaults: dict[str, str] = field(default_factory=dict)
    set_by_sandbox: frozenset[str] = frozenset()  # options the recording sandbox set (not defaults)

    @property
    def family(self) -> str:
        return self.series.split("-", 1)[0]


def option_names(help_text: str) -> list[str]:
    """Option names of `SERVER --no-defaults --verbose --help` (its `  --name` lines), dashes as underscores."""
    return sorted({m.group(1).replace("-", "_") for m in re.finditer(r"^  --([a-z0-9][a-z0-9_-]*)", help_text, re.M)})


def help_defaults(help_text: str) -> dict[str, str]:
    """The help's "Variables ... Value (after reading options)" table: name -> compiled value."""
    table = help_text.split("Value (after reading options)", 1)[1].split("\n", 2)[2]
    out = {}
    for line in table.splitlines():
        if not line.strip():
            break
        name, _, value = line.partition(" ")
        out[name.replace("-", "_")] = value.strip()
    return out


def _read(name: str) -> dict | None:
    p = RECORDED_DIR / name
    return json.loads(p.read_text()) if p.is_file() else None


def _names(series: str) -> frozenset[str]:
    lines = (RECORDED_DIR / f"{series}-option-names.txt").read_text().splitlines()
    return frozenset(ln.strip() for ln in lines if ln.strip() and not ln.startswith("#"))


@functools.lru_cache(maxsize=None)
def load_recording(series: str) -> Recording:
    if series not in RECORDED_SERIES:
        raise ProfileError(f"no recording of {series}; recorded series: {', '.join(RECORDED_SERIES)}")
    info: dict[str, dict] = {}
    sysvars = _read(f"{series}-system-variables.json")
    if sysvars:  # MariaDB
        for r in sysvars["rows"]:
            info[r["variable_name"].lower()] = {
                "min": r["numeric_min_value"], "max": r["numeric_max_value"], "default": r["default_value"],
                "enum": r["enum_value_list"], "read_only": r["read_only"] == "YES"}
        version = sysvars["version"]
    vinfo = _read(f"{series}-variables-info.json")
    if vinfo:  # MySQL
        for r in vinfo["rows"]:
            info[r["variable_name"].lower()] = {"min": r["min_value"], "max": r["max_value"]}
        version = vinfo["version"]
    glob = _read(f"{series}-global-variables.json")
    variables = ({k.lower(): v for k, v in glob["variables"].items()} if glob
                 else {k: (v.get("default") or "") for k, v in info.items()})
    helpd = _read(f"{series}-help-defaults.json")
    return Recording(series=series, version=version, names=_names(series), variables=variables, info=info,
                     help_defaults=dict(helpd["values"]) if helpd else {},
                     set_by_sandbox=frozenset(glob["sandbox_core_options"]) if glob else frozenset())


def _num(text) -> int | None:
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return None


def _default_of(row: OptionRow, rec: Recording) -> str | None:
    """The binary's compiled default of the row's option, normalized like the row's, or None if unknown."""
    raw = rec.info.get(row.option, {}).get("default")
    if raw is None and row.option in rec.variables and row.option not in rec.set_by_sandbox:
        # what the running server chose (MySQL 8.4+ decides some defaults at startup, e.g. O_DIRECT if supported;
        # the help's table shows the compiled value before that choice)
        raw = rec.variables[row.option]
    if raw is None:
        raw = rec.help_defaults.get(row.option)
    if raw is None or raw == NO_DEFAULT:
        return None
    try:
        return row.normalize(raw)
    except ProfileError:
        return str(raw)


def check_row(row: OptionRow, rec: Recording) -> list[str]:
    """What the recording contradicts in a row that applies to its series (empty: the row agrees)."""
    name = row.option
    present = name in rec.variables or name in rec.names
    if row.status == "removed":
        return [f"{name}: marked removed but the binary knows it"] if present else []
    if not present:
        return [f"{name}: marked {row.status} but the binary has no such option or variable"]
    problems = []
    info = rec.info.get(name, {})
    if row.min is not None and _num(info.get("min")) is not None and _num(info.get("min")) != row.min:
        problems.append(f"{name}: min {row.min} in the catalog, {info['min']} on the binary")
    if row.max is not None and (_num(info.get("max")) or 0) < NO_MAXIMUM and _num(info.get("max")) != row.max:
        problems.append(f"{name}: max {row.max} in the catalog, {info['max']} on the binary")
    if row.type == "enum" and info.get("enum") and name != "innodb_page_size":
        if {x.lower() for x in row.values} != {x.lower() for x in info["enum"].split(",")}:
            problems.append(f"{name}: values {list(row.values)} in the catalog, {info['enum']} on the binary")
    want = row.default_normalized()
    have = _default_of(row, rec)
    if want is not None and have is not None and row.type not in ("path",) and want != have:
        problems.append(f"{name}: default {row.default} in the catalog, {have} on the binary")
    if "read_only" in info and row.status != "ignored":
        if info["read_only"] != (row.change in ("restart", "init")):
            problems.append(f"{name}: change={row.change} in the catalog, read_only={info['read_only']} on the binary")
    return problems


def check_series(series: str) -> tuple[int, list[str]]:
    """(rows checked, problems) for every catalog row that applies to the recorded series' version."""
    rec = load_recording(series)
    target = parse_target(f"{rec.family}-{rec.version.split('-')[0]}")
    checked, problems = 0, []
    for row in load_catalog().rows:
        # an `ignored` option does nothing; whether it is still listed says nothing about the row
        if row.applies(target.family, target.version) and row.status != "ignored":
            checked += 1
            problems += check_row(row, rec)
    return checked, problems
