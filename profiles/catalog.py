"""The option catalog (profiles/catalog/options.yaml) as rows, with value checks per flavor and version.

The catalog is data: one row per option per flavor and version range, each naming its manual
page.  This module only reads it: which row applies to a target, whether a value is valid there,
what it normalizes to, and the coverage matrix (options x reference series).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from profiles.target import NEWEST_PATCH, REFERENCE_SERIES, Target
from tuner.core.errors import ProfileError, UsageError
from tuner.core.server import Version
from tuner.core.units import format_size, parse_size

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
OPTIONS_FILE = CATALOG_DIR / "options.yaml"
RECORDED_NAMES = {(fam, series): CATALOG_DIR / "recorded" / f"{fam}-{series}-option-names.txt"
                  for fam, series in (("mariadb", "10.11"), ("mariadb", "11.8"), ("mysql", "9.7"))}
COMMON_NAMES_FILE = CATALOG_DIR / "server-options.yaml"

STATUSES = ("active", "deprecated", "ignored", "removed")
TYPES = ("size", "int", "bool", "enum", "path", "datafile", "string")
CHANGES = ("runtime", "restart", "init")
BOOL_TRUE = ("on", "1", "true")
BOOL_FALSE = ("off", "0", "false")
_DATAFILE_RE = re.compile(r"^[^:;]+:\d+[kKmMgG]?(:autoextend(:max:\d+[kKmMgG]?)?)?$")


def _version(text) -> Version:
    return Version.parse(str(text))


@dataclass(frozen=True)
class OptionRow:
    option: str
    flavor: str
    since: Version
    until: Version | None
    type: str
    status: str
    change: str
    source: str
    evidence: str
    values: tuple[str, ...] = ()
    min: int | None = None
    max: int | None = None
    block: int | None = None
    default: str | None = None
    replaced_by: str | None = None
    note: str | None = None

    def applies(self, fam: str, version: Version) -> bool:
        return self.flavor == fam and self.since <= version and (self.until is None or version < self.until)

    def span(self) -> str:
        return f"{self.flavor} {self.since.series if self.since.patch == 0 else self.since}" + (
            f" up to {self.until}" if self.until else "+")

    # -- values --------------------------------------------------------

    def normalize(self, raw: str | None) -> str:
        """The canonical form of a valid value (sizes in bytes, ON/OFF, enum spelling); raises ProfileError."""
        value = "" if raw is None else str(raw).strip()
        if self.type == "bool":
            v = value.lower()
            if v == "" or v in BOOL_TRUE:
                return "ON"
            if v in BOOL_FALSE:
                return "OFF"
            raise ProfileError(f"{self.option}={value!r} is not a boolean; use ON or OFF")
        if self.type == "enum":
            if self.values and all(x.isdigit() for x in self.values):  # innodb_page_size accepts 16k
                try:
                    n = parse_size(value, self.option)
                except UsageError:
                    n = -1
                if n in (4, 8, 16, 32, 64):
                    n *= 1024
                if str(n) in self.values:
                    return str(n)
            for allowed in self.values:
                if value.lower() == allowed.lower():
                    return allowed
            raise ProfileError(f"{self.option}={value!r} is not valid here; use one of {', '.join(self.values)}")
        if self.type in ("size", "int"):
            if value.startswith("-"):
                raise ProfileError(f"{self.option}={value!r} is negative; give a value of at least {self._min_text()}")
            try:
                n = parse_size(value, self.option) if self.type == "size" else int(value)
            except (UsageError, ValueError):
                want = "a size like 512M or 4G" if self.type == "size" else "a whole number"
                raise ProfileError(f"{self.option}={value!r} is not {want}") from None
            if self.min is not None and n < self.min:
                raise ProfileError(f"{self.option}={value} is below the minimum {self._min_text()}")
            if self.max is not None and n > self.max:
                raise ProfileError(f"{self.option}={value} is above the maximum {self._fmt(self.max)}")
            return str(n)
        if self.type == "datafile":
            parts = [p for p in value.split(";") if p]
            if not parts or not all(_DATAFILE_RE.match(p) for p in parts):
                raise ProfileError(f"{self.option}={value!r} is not a data file list; write it like ibdata1:12M:autoextend")
            return value
        if self.type == "path":
            if not value:
                raise ProfileError(f"{self.option} is empty; give a directory")
            return os.path.normpath(value)
        return value

    def _fmt(self, n: int) -> str:
        return format_size(n) if self.type == "size" else str(n)

    def _min_text(self) -> str:
        return self._fmt(self.min) if self.min is not None else "0"

    def rounding_note(self, canonical: str) -> str | None:
        if self.block and self.type in ("size", "int") and int(canonical) % self.block:
            up = -(-int(canonical) // self.block) * self.block
            return f"{self.option}={canonical} is rounded up to {self._fmt(up)} (a multiple of {self._fmt(self.block)})"
        return None

    def default_normalized(self) -> str | None:
        if self.default is None:
            return None
        try:
            return self.normalize(self.default)
        except ProfileError:
            return None  # a formula such as "innodb_buffer_pool_instances * 2"


def _num(value, typ: str) -> int | None:
    if value is None:
        return None
    return parse_size(str(value)) if typ == "size" else int(value)


def _row(d: dict) -> OptionRow:
    missing = [k for k in ("option", "flavor", "since", "type", "status", "change", "source", "evidence") if not d.get(k)]
    if missing:
        raise ProfileError(f"catalog row {d.get('option', '?')} lacks {', '.join(missing)}; fix {OPTIONS_FILE}")
    typ = d["type"]
    if typ not in TYPES or d["status"] not in STATUSES or d["change"] not in CHANGES:
        raise ProfileError(f"catalog row {d['option']} has an unknown type/status/change; fix {OPTIONS_FILE}")
    num_type = "size" if typ == "size" else "int"
    return OptionRow(
        option=d["option"], flavor=d["flavor"], since=_version(d["since"]),
        until=_version(d["until"]) if d.get("until") else None, type=typ, status=d["status"],
        change=d["change"], source=d["source"], evidence=d["evidence"],
        values=tuple(str(v) for v in d.get("values") or ()),
        min=_num(d.get("min"), num_type), max=_num(d.get("max"), num_type), block=_num(d.get("block"), num_type),
        default=None if d.get("default") is None else str(d["default"]),
        replaced_by=d.get("replaced_by"), note=d.get("note"))


@dataclass
class Catalog:
    rows: list[OptionRow]
    common_names: dict[str, frozenset[str]] = field(default_factory=dict)

    def rows_for(self, option: str, fam: str | None = None) -> list[OptionRow]:
        return [r for r in self.rows if r.option == option and (fam is None or r.flavor == fam)]

    def row(self, option: str, target: Target) -> OptionRow | None:
        for r in self.rows:
            if r.option == option and r.applies(target.family, target.version):
                return r
        return None

    def sources_for(self, option: str) -> list[str]:
        """The distinct manual pages an option's rows cite, in catalog order."""
        return list(dict.fromkeys(r.source for r in self.rows if r.option == option))

    def options(self) -> list[str]:
        return sorted({r.option for r in self.rows})

    def recorded_names(self, target: Target) -> frozenset[str] | None:
        """The authoritative option-name list recorded from a real binary of this series, if any."""
        path = RECORDED_NAMES.get((target.family, target.version.series))
        if path is None:
            return None
        return _read_names(str(path))

    def known_names(self, target: Target) -> frozenset[str]:
        """Names that are valid server options on the target (catalog rows that exist there, recorded and common names)."""
        names = {r.option for r in self.rows if r.applies(target.family, target.version) and r.status != "removed"}
        names |= self.common_names.get("common", frozenset()) | self.common_names.get(target.family, frozenset())
        recorded = self.recorded_names(target)
        if recorded:
            names |= recorded
        return frozenset(names)

    def suggest(self, name: str, target: Target) -> str | None:
        pool = sorted(self.known_names(target) | {r.option for r in self.rows if r.flavor == target.family})
        match = difflib.get_close_matches(name, pool, n=1, cutoff=0.8)
        return match[0] if match else None

    def coverage(self) -> dict[str, dict[str, str]]:
        """option -> {"mariadb-10.11": status or "-"} over the reference series (newest patch of each)."""
        out: dict[str, dict[str, str]] = {}
        columns = [(f, s) for f in ("mariadb", "mysql") for s in REFERENCE_SERIES[f]]
        for option in self.options():
            out[option] = {}
            for fam, series in columns:
                v = Version.parse(series)
                v = Version(v.major, v.minor, NEWEST_PATCH)
                row = next((r for r in self.rows if r.option == option and r.applies(fam, v)), None)
                out[option][f"{fam}-{series}"] = row.status if row else "-"
        return out


_REFMAN = re.compile(r"dev\.mysql\.com/doc/refman/([\d.]+)/en/([^#]+?)(?:\.html)?(?:#(.*))?$")


def short_source(url: str) -> str:
    """A source in a form that fits a table cell: ``MySQL 8.0 innodb-parameters``, ``MariaDB docs
    innodb-system-variables``; the page, not the anchor (the option's own name).  Full URLs: --wide, --json."""
    m = _REFMAN.search(url)
    if m:
        return f"MySQL {m.group(1)} {m.group(2)}"
    page = url.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    if "mariadb.com" in url:
        return f"MariaDB docs {page}"
    return page or url


@functools.lru_cache(maxsize=None)
def _read_names(path: str) -> frozenset[str]:
    lines = Path(path).read_text().splitlines()
    return frozenset(ln.strip() for ln in lines if ln.strip() and not ln.startswith("#"))


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    rows = [_row(d) for d in yaml.safe_load(OPTIONS_FILE.read_text())]
    common = yaml.safe_load(COMMON_NAMES_FILE.read_text()) or {}
    names = {k: frozenset(v or ()) for k, v in common.items() if k in ("common", "mysql", "mariadb")}
    return Catalog(rows=rows, common_names=names)
