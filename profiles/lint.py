"""Lint an option file (or an option dict) against the catalog and the target it will run on.

Checks: unknown or misspelled names (nearest known name suggested), values out of range or not
allowed, options the target renamed, deprecated, ignores or removed, a page size different from the
existing datadir's, a buffer pool larger than the machine's memory, O_DIRECT on a file system that
does not support it (probed, not assumed), and DAX mounts combined with settings the DCPMM paper
(Zhu et al., Electronics 2021, section 4.5; docs/sources.md) found harmful.  Every finding says
severity, option, reason and fix.
Lint reads files and probes directories; it never changes an option file or a data file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from profiles.catalog import load_catalog
from tuner.core.datadir import datadir_page_size
from profiles.optionfile import FOREIGN_SERVER_GROUPS, OptionLine, parse_option_file, server_groups
from profiles.target import Target, make_target
from tuner.core.errors import ProfileError
from tuner.core.server import Flavor, Version
from tuner.core.units import PAGE_SIZES, human_size
from tuner.core.probe import mount_of, probe_o_direct, read_meminfo

PAPER = "DCPMM paper (Electronics 2021) section 4.5"


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warning | info
    option: str
    reason: str
    fix: str
    where: str | None = None  # file:line when known

    def to_dict(self) -> dict:
        return {"severity": self.severity, "option": self.option, "reason": self.reason, "fix": self.fix,
                "where": self.where}


# ---------------------------------------------------------------------------
# names and values


def _check_option(name: str, value: str | None, target: Target, where: str | None, loose: bool) -> list[Finding]:
    cat = load_catalog()
    row = cat.row(name, target)
    t = target.describe()
    if row is None:
        if name in cat.known_names(target):
            return []
        others = [r for r in cat.rows_for(name, target.family) if r.status != "removed"]
        if others:
            spans = ", ".join(o.span() for o in others)
            return [Finding("error", name, f"{name} does not exist on {t} (it exists on {spans})",
                            f"remove {name} or target a version that has it", where)]
        hint = cat.suggest(name, target)
        sev = "warning" if loose else "error"
        if hint:
            return [Finding(sev, name, f"unknown option {name!r} on {t}; it looks like a misspelling of {hint}",
                            f"rename it to {hint}", where)]
        if cat.recorded_names(target) is not None:
            return [Finding(sev, name, f"unknown option {name!r}: the {t} server does not have it"
                            + (" (loose- prefix: the server only warns)" if loose else " and refuses to start"),
                            "remove it or fix the name (`mariadbd --help --verbose` lists the names)", where)]
        return [Finding("warning", name, f"{name!r} is not in innotier's catalog for {t}, so it cannot be checked",
                        "check the name and value in the server manual", where)]
    if row.status == "removed":
        fix = f"use {row.replaced_by} instead" if row.replaced_by else f"remove {name}"
        sev = "warning" if loose else "error"
        return [Finding(sev, name, f"{name} does not exist on {t}: {row.note or 'removed'}", fix, where)]
    out: list[Finding] = []
    if row.status == "ignored":
        out.append(Finding("warning", name, f"{name} is ignored on {t}: {row.note or 'it does nothing'}",
                           f"remove {name}" + (f" (see {row.replaced_by})" if row.replaced_by else ""), where))
    elif row.status == "deprecated":
        out.append(Finding("warning", name, f"{name} is deprecated on {t}: {row.note or ''}".rstrip(": "),
                           f"use {row.replaced_by} instead" if row.replaced_by else f"remove {name}", where))
    try:
        canonical = row.normalize(value)
        note = row.rounding_note(canonical)
        if note:
            out.append(Finding("info", name, note, "give a multiple of the block size to say what you get", where))
    except ProfileError as exc:
        reason = str(exc)
        elsewhere = _valid_elsewhere(name, value, target)
        if elsewhere:
            reason += f" on {t} (it is valid on {elsewhere})"
        out.append(Finding("error", name, reason, f"give {_valid_values(row)} (see {row.source})", where))
    return out


def _valid_values(row) -> str:
    if row.type == "bool":
        return "ON or OFF"
    if row.values:
        return f"one of {', '.join(row.values)}"
    if row.type in ("size", "int"):
        lo = row._fmt(row.min) if row.min is not None else "0"
        return f"a value from {lo}" + (f" to {row._fmt(row.max)}" if row.max is not None else " up")
    return "a valid value"


def _valid_elsewhere(name: str, value: str | None, target: Target) -> str | None:
    """Another version range of the same flavor where the value is valid (e.g. doublewrite=fast from MariaDB 11.0.6)."""
    for other in load_catalog().rows_for(name, target.family):
        if other.status == "removed" or other.applies(target.family, target.version):
            continue
        try:
            other.normalize(value)
        except ProfileError:
            continue
        return other.span()
    return None


def _effective(options: dict[str, str], name: str, target: Target) -> str | None:
    """The value the server will use: the file's value (normalized) or the catalog default."""
    row = load_catalog().row(name, target)
    if name in options:
        if row is None:
            return options[name]
        try:
            return row.normalize(options[name])
        except ProfileError:
            return None
    return row.default_normalized() if row else None


# ---------------------------------------------------------------------------
# the target: datadir page size, memory, file systems


def _page_size_check(options: dict[str, str], target: Target, datadir: str | None,
                     where: dict[str, str]) -> list[Finding]:
    dd = datadir or options.get("datadir")
    if not dd or not os.path.isdir(dd):
        return []
    try:
        existing = datadir_page_size(dd, options.get("innodb_data_home_dir"), options.get("innodb_data_file_path"))
    except (ProfileError, OSError) as exc:
        return [Finding("warning", "innodb_page_size", f"cannot read the page size of datadir {dd}: {exc}",
                        "check that the datadir holds an InnoDB system tablespace", None)]
    if existing is None:
        return []
    wanted = _effective(options, "innodb_page_size", target)
    if wanted is None or int(wanted) == existing:
        return []
    have, want = PAGE_SIZES[existing], PAGE_SIZES.get(int(wanted), wanted)
    said = "sets" if "innodb_page_size" in options else "implies (default)"
    return [Finding("error", "innodb_page_size",
                    f"datadir {dd} was initialized with {have} pages but this file {said} {want}; page size is fixed "
                    "when a datadir is initialized and the server refuses to start with another",
                    f"set innodb_page_size={existing} for this datadir, or initialize a new one with "
                    f"`innotier sandbox create NAME --page-size {want}` and load the data there",
                    where.get("innodb_page_size"))]


def _memory_check(options: dict[str, str], target: Target, proc_root: str, where: dict[str, str]) -> list[Finding]:
    size = _effective(options, "innodb_buffer_pool_size", target)
    total = read_meminfo(proc_root).get("MemTotal")
    if size is None or total is None or not size.isdigit():
        return []
    if int(size) > total:
        return [Finding("error", "innodb_buffer_pool_size",
                        f"buffer pool {human_size(int(size))} is larger than this machine's memory "
                        f"({human_size(total)}); the server fails to allocate it or is killed when it fills",
                        "give a buffer pool well below physical memory (50-75% of it on a dedicated server)",
                        where.get("innodb_buffer_pool_size"))]
    return []


def _uses_o_direct(options: dict[str, str], target: Target) -> tuple[bool, str, bool]:
    """(data files opened with O_DIRECT?, the option that decides, set explicitly?)."""
    if target.family == "mariadb" and target.version >= Version(11, 0, 0) and "innodb_flush_method" not in options:
        buffering = _effective(options, "innodb_data_file_buffering", target)
        return buffering == "OFF", "innodb_data_file_buffering", "innodb_data_file_buffering" in options
    method = _effective(options, "innodb_flush_method", target)
    return method in ("O_DIRECT", "O_DIRECT_NO_FSYNC"), "innodb_flush_method", "innodb_flush_method" in options


def _probe_dirs(options: dict[str, str], tier_path: str | None, datadir: str | None) -> list[str]:
    if tier_path:
        return [tier_path]
    dd = datadir or options.get("datadir")
    dirs = [dd] if dd else []
    for opt in ("innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory"):
        v = options.get(opt)
        if v:
            dirs.append(v if os.path.isabs(v) or not dd else os.path.join(dd, v))
    seen, out = set(), []
    for d in dirs:
        d = os.path.normpath(d)
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            out.append(d)
    return out


def _o_direct_check(options, target, dirs, where) -> list[Finding]:
    direct, option, explicit = _uses_o_direct(options, target)
    if not direct:
        return []
    out = []
    for d in dirs:
        try:
            ok = probe_o_direct(d)
        except OSError as exc:
            out.append(Finding("info", option, f"could not probe O_DIRECT in {d} ({exc.strerror})",
                               "run lint as a user that can create files there, or pass --tier", None))
            continue
        if not ok:
            m = mount_of(d)
            how = "sets" if explicit else "defaults to"
            out.append(Finding("warning", option,
                               f"{d} is on {m.fstype} ({m.mountpoint}), which refused an O_DIRECT write when probed; "
                               f"this file {how} O_DIRECT, so InnoDB falls back to buffered I/O with a warning and "
                               "the setting is a no-op there",
                               "put the files on a file system with O_DIRECT (ext4, xfs; tmpfs from Linux 6.6; never "
                               "ramfs), or set innodb_flush_method=fsync to say what really happens",
                               where.get(option)))
    return out


def _dax_check(options, target, tier_path, mounts, where) -> list[Finding]:
    if not tier_path:
        return []
    m = mount_of(tier_path, mounts)
    if not m.dax:
        return []
    out = []
    dwb = _effective(options, "innodb_doublewrite", target)
    if dwb == "OFF":
        out.append(Finding("warning", "innodb_doublewrite",
                           f"{tier_path} is a DAX mount ({m.mountpoint}) and the doublewrite buffer is off; on DCPMM "
                           "pages can be torn and CPU caches are not flushed on power loss, so the paper keeps DWB on "
                           f"({PAPER}.3)", "set innodb_doublewrite=ON (the paper measured 9% cost at 4k pages on ext4-DAX)",
                           where.get("innodb_doublewrite")))
    page = _effective(options, "innodb_page_size", target)
    if page and page.isdigit() and int(page) > 4096:
        out.append(Finding("warning", "innodb_page_size",
                           f"{tier_path} is a DAX mount and the page size is {PAGE_SIZES.get(int(page), page)}; the "
                           f"paper found 4k pages 44% and 192% faster than 8k and 16k on ext4-DAX ({PAPER}.1)",
                           "initialize the datadir with 4k pages (`innotier sandbox create NAME --page-size 4k`)",
                           where.get("innodb_page_size")))
    method = _effective(options, "innodb_flush_method", target)
    if method == "O_DIRECT_NO_FSYNC" or dwb == "fast":
        opt = "innodb_flush_method" if method == "O_DIRECT_NO_FSYNC" else "innodb_doublewrite"
        out.append(Finding("warning", opt,
                           f"{tier_path} is a DAX mount; skipping fsync gave no gain there (ext4-DAX was slightly "
                           f"faster with fsync) and gives up durability ({PAPER}.3)",
                           "use innodb_flush_method=O_DIRECT with the doublewrite buffer on", where.get(opt)))
    return out


# ---------------------------------------------------------------------------
# entry points


def _status(option: str, target: Target) -> str | None:
    row = load_catalog().row(option, target)
    return row.status if row else None


def lint_options(options: dict[str, str], flavor: Flavor, version: Version, tier_path: str | None = None,
                 datadir: str | None = None, where: dict[str, str] | None = None, loose: set[str] | None = None,
                 proc_root: str = "/proc", mounts=None) -> list[Finding]:
    """Findings for an in-memory option set ([mysqld] names -> values; a value-less switch is "")."""
    target = make_target(flavor, version)
    where = where or {}
    loose = loose or set()
    opts = {k.lower().replace("-", "_"): ("" if v is None else str(v)) for k, v in options.items()}
    findings: list[Finding] = []
    for name in sorted(opts):
        findings += _check_option(name, opts[name], target, where.get(name), name in loose)
    if target.family == "mysql" and "innodb_redo_log_capacity" in opts and "innodb_log_file_size" in opts \
            and target.version >= Version(8, 0, 30) and _status("innodb_log_file_size", target) != "removed":
        findings.append(Finding("info", "innodb_log_file_size", "innodb_log_file_size is ignored because "
                                "innodb_redo_log_capacity is set", "remove innodb_log_file_size",
                                where.get("innodb_log_file_size")))
    findings += _page_size_check(opts, target, datadir, where)
    findings += _memory_check(opts, target, proc_root, where)
    findings += _o_direct_check(opts, target, _probe_dirs(opts, tier_path, datadir), where)
    findings += _dax_check(opts, target, tier_path, mounts, where)
    return findings


def lint_file(path: str | os.PathLike, flavor: Flavor, version: Version, tier_path: str | None = None,
              datadir: str | None = None, proc_root: str = "/proc", mounts=None) -> list[Finding]:
    """Findings for an option file and everything it includes (server groups of the target only)."""
    target = make_target(flavor, version)
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ProfileError(f"option file {p} does not exist; give the path of a my.cnf or conf.d file")
    if tier_path is not None and not os.path.isdir(tier_path):
        what = "is not a directory" if os.path.exists(tier_path) else "does not exist"
        raise ProfileError(f"--tier {tier_path} {what}; give the directory the data files live or will live in "
                           "(create or mount the tier first)")
    cat = load_catalog()
    parsed = parse_option_file(p, cat.known_names(target))
    findings = [Finding("error", "-", msg, "fix the line", where) for where, msg in parsed.problems]
    groups = server_groups(target)
    chosen: dict[str, OptionLine] = {}
    for line in parsed.lines:
        if line.group in groups:
            if line.name in chosen and chosen[line.name].value != line.value:
                findings.append(Finding("info", line.name, f"{line.name} is set again (was {chosen[line.name].value} "
                                        f"at {chosen[line.name].where}); the last value wins",
                                        "keep one of the lines", line.where))
            chosen[line.name] = line
        elif FOREIGN_SERVER_GROUPS.match(line.group) and line.group not in groups:
            findings.append(Finding("info", line.name, f"[{line.group}] is not read by {target.describe()}",
                                    "move the option to [mysqld] if it should apply", line.where))
    options = {name: ("" if ln.value is None else ln.value) for name, ln in chosen.items()}
    where = {name: ln.where for name, ln in chosen.items()}
    loose = {name for name, ln in chosen.items() if ln.prefix.startswith("loose")}
    findings += lint_options(options, target.flavor, target.version, tier_path=tier_path, datadir=datadir,
                             where=where, loose=loose, proc_root=proc_root, mounts=mounts)
    return findings


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
