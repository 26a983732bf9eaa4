"""A profile: a small, named, validated set of InnoDB storage settings (page size, flush, doublewrite, buffer pool, redo, placements).

Profiles come from YAML (shipped in profiles/shipped/, or a file) or from `innotier profile
generate` flags; both go through ``profile_from_mapping``, so a bad value is refused the same way
everywhere, before anything is rendered or written.  A profile says nothing about one server
version: ``profiles.render`` turns it into the option names and values a given flavor/version uses.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from profiles.target import parse_target
from tuner.core.errors import ProfileError, UsageError
from tuner.core.server import COMPONENTS
from tuner.core.units import PAGE_SIZES, format_size, parse_page_size, parse_size

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")

FLUSH_METHODS = ("fsync", "O_DSYNC", "littlesync", "nosync", "O_DIRECT", "O_DIRECT_NO_FSYNC")
DOUBLEWRITE_VALUES = ("ON", "OFF", "DETECT_AND_RECOVER", "DETECT_ONLY", "fast")

# component -> the option that places it (tuner.core.server.COMPONENTS); doublewrite only where it has its own files
PLACEMENT_OPTIONS = {
    "datadir": "datadir",
    "ibdata": "innodb_data_home_dir",
    "redo": "innodb_log_group_home_dir",
    "undo": "innodb_undo_directory",
    "doublewrite": "innodb_doublewrite_dir",
    "tmpdir": "tmpdir",
}
# options a typed field owns: `--set` may not set them behind the field's back
FIELD_OPTIONS = {
    "innodb_page_size": "page_size",
    "innodb_flush_method": "flush_method",
    "innodb_doublewrite": "doublewrite",
    "innodb_buffer_pool_size": "buffer_pool_size",
    "innodb_buffer_pool_instances": "buffer_pool_instances",
    "innodb_redo_log_capacity": "redo_capacity",
    "innodb_log_file_size": "redo_capacity",
    "innodb_log_files_in_group": "redo_capacity",
}


@dataclass
class Profile:
    name: str
    flavor: str | None = None  # target such as "mariadb-10.11"; None: any
    page_size: int | None = None  # bytes
    flush_method: str | None = None  # one of FLUSH_METHODS
    doublewrite: str | None = None  # one of DOUBLEWRITE_VALUES
    buffer_pool_size: int | None = None  # bytes
    buffer_pool_instances: int | None = None
    redo_capacity: int | None = None  # bytes of redo in total
    placements: dict[str, str] = field(default_factory=dict)  # component -> directory
    extra: dict[str, str] = field(default_factory=dict)  # other [mysqld] options, validated at render time
    source: str = ""  # where the profile came from: a file path or "command line"
    description: str = ""
    cites: str = ""  # the research the settings come from

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["page_size"] = PAGE_SIZES.get(self.page_size) if self.page_size else None
        for k in ("buffer_pool_size", "redo_capacity"):
            d[k] = format_size(d[k]) if d[k] else None
        return d

    def inputs(self) -> list[str]:
        """The profile's settings as `key=value` lines, for the generated file's header (stable order)."""
        d = self.to_dict()
        out = [f"{k}={d[k]}" for k in ("flavor", "page_size", "flush_method", "doublewrite", "buffer_pool_size",
                                       "buffer_pool_instances", "redo_capacity") if d[k] is not None]
        out += [f"placement {k}={v}" for k, v in sorted(self.placements.items())]
        out += [f"set {k}={v}" for k, v in sorted(self.extra.items())]
        return out

    def with_buffer_pool(self, size: int) -> "Profile":
        return dataclasses.replace(self, buffer_pool_size=size)


# ---------------------------------------------------------------------------
# validation


def _size(value: Any, what: str) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ProfileError(f"{what} {value} is negative; give a positive size like 512M")
    try:
        n = parse_size(value if isinstance(value, (int, str)) else str(value), what)
    except UsageError as exc:
        raise ProfileError(str(exc)) from None
    if n <= 0:
        raise ProfileError(f"{what} {value!r} must be larger than zero; give a size like 512M")
    return n


def _page_size(value: Any) -> int:
    try:
        return parse_page_size(value)
    except UsageError as exc:
        raise ProfileError(f"{exc} (page size is fixed when the datadir is initialized)") from None


def _flush_method(value: Any) -> str:
    for m in FLUSH_METHODS:
        if str(value).strip().lower() == m.lower():
            return m
    raise ProfileError(f"flush method {value!r} is not valid; use one of {', '.join(FLUSH_METHODS)}")


def _doublewrite(value: Any) -> str:
    if isinstance(value, bool):  # YAML 1.1 reads on/off as booleans
        return "ON" if value else "OFF"
    v = str(value).strip().lower()
    if v in ("on", "1", "true", "yes"):
        return "ON"
    if v in ("off", "0", "false", "no"):
        return "OFF"
    for d in DOUBLEWRITE_VALUES:
        if v == d.lower():
            return d
    raise ProfileError(f"doublewrite {value!r} is not valid; use on or off (MySQL 8.0.30+ also detect_and_recover, "
                       "detect_only; MariaDB 11.0.6+ also fast)")


def _instances(value: Any) -> int:
    try:
        n = int(str(value))
    except ValueError:
        raise ProfileError(f"buffer pool instances {value!r} is not a whole number; give 1 to 64") from None
    if not 1 <= n <= 64:
        raise ProfileError(f"buffer pool instances {n} is out of range; give 1 to 64")
    return n


def parse_placements(items: list[str] | dict[str, str] | None) -> dict[str, str]:
    """`component=path` items -> {component: path}; a component named twice with different paths is a conflict."""
    pairs: list[tuple[str, str]] = []
    if isinstance(items, dict):
        pairs = [(str(k), str(v)) for k, v in items.items()]
    else:
        for item in items or []:
            if "=" not in item:
                raise ProfileError(f"placement {item!r} is not component=path; write it like redo=/mnt/fast/redo")
            k, v = item.split("=", 1)
            pairs.append((k.strip(), v.strip()))
    out: dict[str, str] = {}
    for comp, path in pairs:
        if comp not in PLACEMENT_OPTIONS:
            raise ProfileError(f"placement component {comp!r} is unknown; use one of {', '.join(COMPONENTS)}")
        if not path or not os.path.isabs(path):
            raise ProfileError(f"placement {comp}={path!r} is not an absolute path; give a directory like /mnt/fast/{comp}")
        path = os.path.normpath(path)
        if comp in out and out[comp] != path:
            raise ProfileError(f"conflicting placements for {comp}: {out[comp]} and {path}; give each component one path")
        out[comp] = path
    return out


def _extra(options: dict[str, Any] | None, placements: dict[str, str], given: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (options or {}).items():
        name = str(k).strip().lower().replace("-", "_")
        if isinstance(v, bool):
            v = "ON" if v else "OFF"
        value = "" if v is None else str(v).strip()
        owner = FIELD_OPTIONS.get(name)
        if owner:
            flag = "--" + owner.replace("_", "-").replace("buffer-pool-size", "buffer-pool")
            raise ProfileError(f"option {name} is set by the profile's {owner} field; use {flag} (or `{owner}:` "
                               f"in YAML) instead of setting it directly")
        for comp, opt in PLACEMENT_OPTIONS.items():
            if name == opt and comp in placements:
                raise ProfileError(f"conflicting placements: {name}={value} and placement {comp}={placements[comp]}; "
                                   f"keep only the placement")
        out[name] = value
    return out


def profile_from_mapping(d: dict[str, Any], source: str) -> Profile:
    """Validate a profile given as a mapping (YAML or CLI flags); every error is a one-line ProfileError."""
    if not isinstance(d, dict):
        raise ProfileError(f"{source} is not a profile (a YAML mapping with name, page_size, ...); see `innotier profile show`")
    known = {"name", "flavor", "page_size", "flush_method", "doublewrite", "buffer_pool_size", "buffer_pool_instances",
             "redo_capacity", "placements", "options", "description", "cites"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ProfileError(f"{source}: unknown profile field(s) {', '.join(unknown)}; use {', '.join(sorted(known))}")
    name = str(d.get("name") or "").strip()
    if not NAME_RE.match(name):
        raise ProfileError(f"{source}: profile name {name!r} is not valid; use lower-case letters, digits, '.', '_', '-'")
    flavor = None
    if d.get("flavor"):
        flavor = parse_target(str(d["flavor"])).label
    placements = parse_placements(d.get("placements"))
    return Profile(
        name=name,
        flavor=flavor,
        page_size=_page_size(d["page_size"]) if d.get("page_size") is not None else None,
        flush_method=_flush_method(d["flush_method"]) if d.get("flush_method") is not None else None,
        doublewrite=_doublewrite(d["doublewrite"]) if d.get("doublewrite") is not None else None,
        buffer_pool_size=_size(d["buffer_pool_size"], "buffer pool size") if d.get("buffer_pool_size") is not None else None,
        buffer_pool_instances=_instances(d["buffer_pool_instances"]) if d.get("buffer_pool_instances") is not None else None,
        redo_capacity=_size(d["redo_capacity"], "redo capacity") if d.get("redo_capacity") is not None else None,
        placements=placements,
        extra=_extra(d.get("options"), placements, set(d)),
        source=source,
        description=str(d.get("description") or "").strip(),
        cites=str(d.get("cites") or "").strip(),
    )


# ---------------------------------------------------------------------------
# loading


def _shipped_paths() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("*.yaml"))}


def load_profile_file(path: str | os.PathLike) -> Profile:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{p} is not valid YAML ({exc.__class__.__name__}); fix its syntax") from None
    except OSError as exc:
        raise ProfileError(f"cannot read profile {p}: {exc.strerror}") from None
    return profile_from_mapping(data, str(p))


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    """A shipped profile by name, or a profile YAML file by path."""
    text = os.fspath(name_or_path)
    if os.path.isfile(text) or text.endswith((".yaml", ".yml")) or os.sep in text:
        if not os.path.isfile(text):
            raise ProfileError(f"profile file {text} does not exist; give a YAML file or a shipped name "
                               f"(`innotier profile list`)")
        return load_profile_file(text)
    shipped = _shipped_paths()
    if text not in shipped:
        raise ProfileError(f"no profile named {text!r}; shipped profiles: {', '.join(shipped)} "
                           "(or give a YAML file path)")
    return load_profile_file(shipped[text])


def list_profiles() -> list[Profile]:
    return [load_profile_file(p) for p in _shipped_paths().values()]
