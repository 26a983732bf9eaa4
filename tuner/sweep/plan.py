"""Expanding a sweep spec into cells and validating every cell before anything runs.

``make_plan(spec)`` is side-effect free: it reads the server binaries' version, the tiers' file systems
and free space, lints each cell's options with the profile linter, and refuses the spec with one clear
sentence when a cell cannot run (nothing is created, mounted or started).  The plan prints as a table
with an estimate of the total time; ``innotier sweep run`` executes exactly this plan.

A *cell* is one combination of axis values; a *cell run* is a cell at one repeat.  Cells are ordered
``interleave`` by default (repeat 1 of every cell, then repeat 2, ...), so slow drift of the machine
spreads over all cells instead of biasing the ones that ran last.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.errors import InnotierError, SweepError
from tuner.core.sandbox import ServerBinaries, binaries_for_server, find_binaries
from tuner.core.server import Flavor, Version, has_doublewrite_files
from tuner.sweep.spec import (DEFAULT_PLACEMENT, SETTINGS, SweepSpec, TierSpec, config_label, excluded,
                              normalize_placement)
from tuner.core.units import format_duration, format_size, human_size, parse_page_size, parse_size
from datadir_mover.tiers.detect import tier_for_path
from tuner.core.paths import innotier_home
from tuner.sweep.placement import md_request, pmem_request, provision_blocker, tier_mountpoint
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.provision import plan_create
from tuner.sweep import golden as golden_mod
from tuner.sweep.sources import name_papers
from tuner.sweep.profile_bridge import lint_cell_options

DEFAULTS = {"page_size": "16k", "clients": 8}

# Server options that say where files live: the sweep sets them through placement, never as options.
LOCATION_OPTIONS = {
    "datadir": "datadir", "innodb_data_home_dir": "ibdata", "innodb_log_group_home_dir": "redo",
    "innodb_undo_directory": "undo", "innodb_doublewrite_dir": "doublewrite", "tmpdir": "tmpdir",
}

# Estimates (refined from measured cells while a sweep runs)
# measured golden copies, MariaDB 10.11, 16k pages: W=2 442 MiB, W=4 634 MiB
DATADIR_BYTES_PER_WAREHOUSE = 96 << 20  # TPC-C rows and indexes per warehouse
DATADIR_BASE_BYTES = 250 << 20  # system tablespace, undo, mysql schema, ITEM, redo (MariaDB 10.11 default 96M)
# seconds, measured on a 2-core VM shared with other work (bench/sweep_bench.py); checks scale with W
SECONDS = {"golden_init": 7.0, "load_per_warehouse": 20.0, "golden_copy": 3.0, "clone": 0.5, "start": 1.0,
           "check": 3.0, "check_per_warehouse": 4.0, "stop": 1.0, "collect": 3.0, "tier": 1.0}


@dataclass(frozen=True)
class Cell:
    """One cell run: a combination of settings at one repeat."""

    index: int  # 1-based position in run order
    config_key: str  # same for every repeat of the same settings
    repeat: int  # 1-based
    settings: dict[str, Any]  # every setting, fixed and varied (normalized)
    varying: dict[str, Any]  # the axis values alone

    @property
    def cell_id(self) -> str:
        return f"{self.config_key}-r{self.repeat}"

    @property
    def placement(self) -> dict[str, str]:
        return self.settings["placement"]

    @property
    def datadir_tier(self) -> str:
        return self.placement[DEFAULT_PLACEMENT]

    @property
    def tiers_used(self) -> list[str]:
        return sorted(set(self.placement.values()))

    @property
    def label(self) -> str:
        return config_label(self.varying) or "baseline"

    def server_options(self) -> dict[str, str]:
        """The cell's server options (page size aside, which is fixed at init)."""
        return cell_options(self.settings)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "cell_id": self.cell_id, "config_key": self.config_key,
                "repeat": self.repeat, "label": self.label, "settings": self.settings, "varying": self.varying}


def cell_options(settings: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in settings.items():
        opt = SETTINGS.get(k)
        if opt and k != "page_size":
            out[opt] = str(v)
    out.update(settings.get("options") or {})
    return dict(sorted(out.items()))


def _config_key(settings: dict[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


# ---------------------------------------------------------------------------
# Expansion


def expand(spec: SweepSpec) -> list[Cell]:
    """Cartesian product of the axes (minus exclusions), each at every repeat, in run order."""
    names: list[tuple[str, str | None]] = []  # (setting, option-name or None)
    values: list[list[Any]] = []
    for k, vals in spec.axes.items():
        if k == "options":
            for o, ovals in vals.items():
                names.append(("options", o))
                values.append(ovals)
        else:
            names.append((k, None))
            values.append(vals)
    configs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    seen: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*values) if values else [()]:
        varying: dict[str, Any] = {}
        for (k, o), v in zip(names, combo):
            if o is None:
                varying[k] = v
            else:
                varying.setdefault("options", {})[o] = v
        settings = _resolve(spec, varying)
        if excluded(settings, spec.exclude):
            continue
        key = _config_key(settings)
        if key in seen:
            raise SweepError(f"cells {config_label(seen[key]) or 'baseline'} and {config_label(varying)} are the "
                             "same settings (duplicate cells); remove one of the axis values")
        seen[key] = varying
        configs.append((settings, varying))
    if not configs:
        raise SweepError("the spec's exclude: list removes every cell; nothing would run")
    runs: list[tuple[int, tuple[dict, dict]]] = []
    if spec.order == "blocks":
        runs = [(r, c) for r in range(1, spec.repeats + 1) for c in block_order(configs, spec.order_seed, r)]
    elif spec.order == "interleave":
        runs = [(r, c) for r in range(1, spec.repeats + 1) for c in configs]
    else:
        runs = [(r, c) for c in configs for r in range(1, spec.repeats + 1)]
    return [Cell(index=i, config_key=_config_key(s), repeat=r, settings=s, varying=v)
            for i, (r, (s, v)) in enumerate(runs, start=1)]


def block_order(configs: list, seed: int, block: int) -> list:
    """Block ``block``'s cells in a fresh random order, reproducible from the run's seed."""
    out = list(configs)
    random.Random(seed * 1_000_003 + block).shuffle(out)
    return out


def _resolve(spec: SweepSpec, varying: dict[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = dict(DEFAULTS)
    for k, v in spec.fixed.items():
        settings[k] = dict(v) if isinstance(v, dict) else v
    for k, v in varying.items():
        if k == "options":
            settings["options"] = {**settings.get("options", {}), **v}
        else:
            settings[k] = v
    if "placement" not in settings:
        settings["placement"] = normalize_placement(_default_tier(spec), spec.tiers)
    if "options" in settings:
        settings["options"] = dict(sorted(settings["options"].items()))
    return dict(sorted(settings.items()))


def _default_tier(spec: SweepSpec) -> str:
    home = [n for n, t in spec.tiers.items() if t.kind == "home"]
    return home[0] if home else next(iter(spec.tiers))


# ---------------------------------------------------------------------------
# Tier checks


@dataclass
class TierCheck:
    """What the plan found out about one tier, without creating anything."""

    name: str
    spec: TierSpec
    available: bool
    reason: str | None = None  # why not available here
    facts: dict[str, Any] = field(default_factory=dict)  # datadir_mover.tiers.detect facts (existing paths)
    free_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec.to_dict(), "available": self.available, "reason": self.reason,
                "facts": self.facts, "free_bytes": self.free_bytes}


def _existing_ancestor(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _facts_for(path: str) -> dict[str, Any]:
    try:
        return tier_for_path(path).to_dict()
    except InnotierError as exc:
        return {"error": str(exc)}


def check_tier(t: TierSpec, need_bytes: int, run_id: str = "plan") -> TierCheck:
    """Plan-time facts about a tier; raises SweepError for a tier that can never work as written."""
    if t.kind in ("home", "path"):
        path = Path(t.path) if t.kind == "path" else innotier_home()
        if t.kind == "path":
            if not path.exists():
                raise SweepError(f"tier {t.name}: path {path} does not exist; create the directory (on the storage "
                                 "you want to test) or fix the path in the spec")
            if not path.is_dir():
                raise SweepError(f"tier {t.name}: path {path} is not a directory; give a directory")
            if not os.access(path, os.W_OK | os.X_OK):
                raise SweepError(f"tier {t.name}: path {path} is not writable by this user; fix its permissions")
            probe = path
        else:
            probe = _existing_ancestor(path)
        free = shutil.disk_usage(probe).free
        if free < need_bytes:
            raise SweepError(f"tier {t.name}: {probe} has {human_size(free)} free but a cell needs about "
                             f"{human_size(need_bytes)}; free space or use fewer warehouses")
        return TierCheck(t.name, t, True, facts=_facts_for(str(probe)), free_bytes=free)
    if t.size is not None and t.size < need_bytes:
        raise SweepError(f"tier {t.name}: size {format_size(t.size)} is smaller than a cell's datadir (about "
                         f"{human_size(need_bytes)}); give size: {format_size(_round_up(need_bytes))} or more")
    if t.kind == "md":
        reason = _md_unavailable_reason(t, need_bytes, run_id)
        return TierCheck(t.name, t, reason is None, reason=reason)
    if t.kind == "pmem":
        reason = _pmem_unavailable_reason(t, run_id)
        return TierCheck(t.name, t, reason is None, reason=reason)

    blocker = provision_blocker(t, run_id)  # the tiers code's own checks: root, zram module, mkfs, memory
    if blocker:
        return TierCheck(t.name, t, False, reason=blocker)
    return TierCheck(t.name, t, True)


def _md_unavailable_reason(t: TierSpec, need_bytes: int, run_id: str) -> str | None:
    """Why a sweep cannot build this md RAID tier for its cells here (the tiers code's own blockers), or None.

    The runner builds the array for each cell over the named devices and tears it down after it."""
    if not t.device_paths:
        return (f"a sweep builds RAID {t.level} arrays only over member devices the spec names (they are wiped); "
                "list them: devices: [/dev/sdb, /dev/sdc, ...]")
    request = md_request(t, tier_mountpoint(run_id, t.name))
    try:
        blockers = plan_create(request, Host()).blockers
    except InnotierError as exc:
        blockers = [str(exc)]
    if blockers:
        return (f"RAID {t.level} over {', '.join(t.device_paths)}: {blockers[0]}; run it on a host with the md "
                "driver and these devices unused (or in `innotier lab run`)")
    usable = _md_capacity(int(t.level or 0), [_device_bytes(d) for d in t.device_paths])
    if usable < need_bytes:
        return (f"RAID {t.level} over {', '.join(t.device_paths)} holds {human_size(usable)} but a cell needs about "
                f"{human_size(need_bytes)}; use larger devices or fewer warehouses")
    return None


def _pmem_unavailable_reason(t: TierSpec, run_id: str) -> str | None:
    """Why a sweep cannot make this pmem tier for its cells here (the tiers code's own blockers), or None."""
    try:
        blockers = plan_create(pmem_request(t, tier_mountpoint(run_id, t.name)), Host()).blockers
    except InnotierError as exc:
        blockers = [str(exc)]
    if blockers:
        return (f"pmem {t.region}: {blockers[0]}; run it on a host with an NVDIMM (or in `innotier lab run`, "
                "whose NVDIMMs are emulated)")
    return None


def _device_bytes(device: str) -> int:
    try:
        return int(Path("/sys/class/block", os.path.basename(device), "size").read_text()) * 512
    except (OSError, ValueError):
        return 0


def _md_capacity(level: int, sizes: list[int]) -> int:
    """Usable bytes of an md array of ``level`` over members of ``sizes`` (the smallest member counts)."""
    n, one = len(sizes), min(sizes or [0])
    return one * {0: n, 1: 1, 5: n - 1, 6: n - 2, 10: n // 2}.get(level, 0)


def _round_up(n: int) -> int:
    g = 1 << 30
    m = 1 << 20
    return ((n + g - 1) // g) * g if n > g else ((n + 256 * m - 1) // (256 * m)) * 256 * m


# ---------------------------------------------------------------------------
# The plan


@dataclass
class Plan:
    spec: SweepSpec
    flavor: Flavor
    version: Version
    version_string: str
    mysqld: str
    cells: list[Cell]  # cells that will run, in order
    skipped: list[tuple[Cell, str]]  # cells on optional tiers not available here, with the reason
    tiers: dict[str, TierCheck]
    goldens: list[dict[str, Any]]  # golden copies needed: key, present
    datadir_bytes: int
    estimate_seconds: float
    refusal: str | None = None  # why `sweep run` would refuse (plan still prints)
    warnings: list[str] = field(default_factory=list)
    lint: dict[str, list[str]] = field(default_factory=dict)  # config_key -> lint notes (warnings)
    # server setting (None: the spec's basedir / the host's) -> its binaries; flavor/version above are the first's
    binaries: dict[str | None, ServerBinaries] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "name": self.spec.name, "flavor": self.flavor.value, "version": str(self.version),
            "version_string": self.version_string, "mysqld": self.mysqld,
            "cells": [c.to_dict() for c in self.cells],
            "skipped": [{"cell": c.to_dict(), "reason": r} for c, r in self.skipped],
            "tiers": {k: v.to_dict() for k, v in self.tiers.items()}, "goldens": self.goldens,
            "datadir_bytes": self.datadir_bytes, "estimate_seconds": round(self.estimate_seconds),
            "refusal": self.refusal, "warnings": self.warnings, "lint": self.lint,
            "workload": self.spec.workload.__dict__, "repeats": self.spec.repeats, "design": self.spec.design(),
            "servers": {str(k or "default"): {"flavor": b.flavor.value, "version": str(b.version),
                                              "version_string": b.version_string, "mysqld": b.mysqld}
                        for k, b in self.binaries.items()},
        }


def estimate_datadir_bytes(warehouses: int, page_size: str = "16k") -> int:
    # smaller pages leave more free space per page (fill factor), larger pages waste less: within ~10%
    return DATADIR_BASE_BYTES + warehouses * DATADIR_BYTES_PER_WAREHOUSE


def cell_seconds(spec: SweepSpec, datadir_bytes: int) -> float:
    w = spec.workload
    clone = SECONDS["clone"] + datadir_bytes / (300 << 20)
    check = SECONDS["check"] + SECONDS["check_per_warehouse"] * w.warehouses
    bench = spec.tier_bench.seconds if spec.tier_bench else 0.0
    return clone + bench + SECONDS["start"] + w.warmup + w.duration + check + SECONDS["stop"] + SECONDS["collect"]


def golden_seconds(spec: SweepSpec, datadir_bytes: int) -> float:
    return (SECONDS["golden_init"] + SECONDS["load_per_warehouse"] * spec.workload.warehouses + SECONDS["stop"]
            + SECONDS["golden_copy"] + datadir_bytes / (200 << 20))


def server_binaries(spec: SweepSpec, cells: list[Cell]) -> dict[str | None, ServerBinaries]:
    """The binaries of every server the cells use: a `server` setting names an installed distribution,
    without one the spec's basedir (or the host's binaries) serve every cell."""
    out: dict[str | None, ServerBinaries] = {}
    for name in sorted({c.settings.get("server") for c in cells}, key=str):
        try:
            out[name] = binaries_for_server(name) if name else find_binaries(spec.basedir)
        except InnotierError as exc:
            raise SweepError(f"server binaries for this sweep: {exc}") from None
    return out


def make_plan(spec: SweepSpec, *, check_tiers: bool = True) -> Plan:
    """Validate everything and return the plan; raises SweepError naming the first problem."""
    cells = expand(spec)
    binaries = server_binaries(spec, cells)
    bins = next(iter(binaries.values()))
    if spec.flavor and len(binaries) > 1:
        raise SweepError("the spec names server.flavor and a server axis; leave server.flavor out (each cell's "
                         "server says its flavor)")
    if spec.flavor and spec.flavor != bins.flavor.value:
        raise SweepError(f"the spec asks for {spec.flavor} but the server binaries found are {bins.flavor.value} "
                         f"{bins.version} ({bins.mysqld}); set server.basedir to a {spec.flavor} installation")
    if spec.version and not str(bins.version).startswith(spec.version):
        raise SweepError(f"the spec asks for version {spec.version} but {bins.mysqld} is {bins.version}; set "
                         "server.basedir to that version's installation or change server.version")
    datadir_bytes = max(estimate_datadir_bytes(spec.workload.warehouses, c.settings["page_size"]) for c in cells)

    # every tier used by a cell (a path that does not exist is refused here)
    used = sorted({t for c in cells for t in c.tiers_used})
    tiers = {name: check_tier(spec.tiers[name], datadir_bytes, spec.run_id) if check_tiers else
             TierCheck(name, spec.tiers[name], True) for name in used}

    # every cell: placement and options valid for this server, linted where its files will live
    lint_notes: dict[str, list[str]] = {}
    for c in cells:
        if c.repeat != 1:
            continue
        cb = binaries[c.settings.get("server")]
        validate_cell(c, cb.flavor, cb.version)
        paths = [p for p in (_lint_path(spec.tiers[t]) for t in c.tiers_used) if p]
        lint_notes[c.config_key] = lint_cell(spec, c, cb.flavor, cb.version, paths)
    refusal = None
    runnable, skipped = [], []
    for c in cells:
        missing = [tiers[t] for t in c.tiers_used if not tiers[t].available]
        if not missing:
            runnable.append(c)
            continue
        hard = [t for t in missing if not t.spec.optional]
        if hard:
            refusal = refusal or f"tier {hard[0].name}: {hard[0].reason}"
            runnable.append(c)  # listed: the plan shows it, the run refuses
        else:
            skipped.append((c, f"tier {missing[0].name} skipped: {missing[0].reason}"))
    if not runnable:
        raise SweepError("no cell can run on this machine: " + "; ".join(sorted({r for _, r in skipped})))
    runnable = [Cell(index=i, config_key=c.config_key, repeat=c.repeat, settings=c.settings, varying=c.varying)
                for i, c in enumerate(runnable, start=1)]

    goldens = []
    est = 0.0
    for key in sorted({golden_mod.key_for(spec, c, binaries[c.settings.get("server")]) for c in runnable},
                      key=lambda k: k.id):
        present = golden_mod.is_present(key)
        goldens.append({"id": key.id, "key": key.to_dict(), "present": present})
        if not present:
            est += golden_seconds(spec, datadir_bytes)
    provisioned = {t for c in runnable for t in c.tiers_used if spec.tiers[t].provisioned}
    est += SECONDS["tier"] * len(provisioned)
    est += sum(cell_seconds(spec, datadir_bytes) for _ in runnable)

    warnings = []
    if not spec.adaptive and spec.repeats < 3:
        warnings.append(f"repeats: {spec.repeats} -- fewer than 3 blocks cannot decide a comparison on a noisy "
                        "machine (a paired interval from 2 blocks uses t(0.975, 1) = 12.7); use repeats: auto")
    if spec.adaptive:  # min_blocks always run; more only while the budget lasts
        fixed_part = est - sum(cell_seconds(spec, datadir_bytes) for _ in runnable)
        per_block = cell_seconds(spec, datadir_bytes) * len({c.config_key for c in runnable})
        est = fixed_part + min(sum(cell_seconds(spec, datadir_bytes) for _ in runnable),
                               max(spec.stop.budget, spec.stop.min_blocks * per_block))
    return Plan(spec=spec, flavor=bins.flavor, version=bins.version, version_string=bins.version_string,
                mysqld=bins.mysqld, cells=runnable, skipped=skipped, tiers=tiers, goldens=goldens,
                datadir_bytes=datadir_bytes, estimate_seconds=est, refusal=refusal, warnings=warnings, lint=lint_notes,
                binaries=binaries)


def validate_cell(c: Cell, flavor: Flavor, version: Version) -> None:
    """Combinations no server of this flavor and version can run (checked for every cell before any runs)."""
    server = f"{flavor.value} {version}"
    opts = c.settings.get("options") or {}
    for opt, comp in LOCATION_OPTIONS.items():
        if opt in opts:
            if opt == "innodb_doublewrite_dir" and not has_doublewrite_files(flavor, version):
                raise SweepError(f"cell {c.label}: innodb_doublewrite_dir does not exist on {server} (it keeps the "
                                 "doublewrite buffer inside the system tablespace, ibdata); remove it, or place "
                                 "ibdata instead")
            raise SweepError(f"cell {c.label}: option {opt} says where files live; use placement: "
                             f"{{{comp}: TIER}} instead so the sweep moves the files")
    if "innodb_page_size" in opts:
        raise SweepError(f"cell {c.label}: set the page size with page_size:, not options.innodb_page_size")
    if "doublewrite" in c.placement and not has_doublewrite_files(flavor, version):
        raise SweepError(f"cell {c.label}: placing doublewrite is impossible on {server}: the doublewrite buffer "
                         "lives inside ibdata (separate doublewrite files exist only in MySQL 8.0.20+); place "
                         "ibdata instead")
    if "undo" in c.placement and c.placement["undo"] != c.datadir_tier:
        n = opts.get("innodb_undo_tablespaces")
        default = 3 if (flavor == Flavor.MARIADB and version >= Version(11, 0)) or flavor != Flavor.MARIADB else 0
        if int(n if n is not None else default) == 0:
            raise SweepError(f"cell {c.label}: undo logs live inside ibdata on {server} when innodb_undo_tablespaces"
                             " is 0; add options: {innodb_undo_tablespaces: 3} under fixed: or place ibdata")
    page = parse_page_size(c.settings["page_size"])
    bp = parse_size(c.settings.get("buffer_pool_size") or "128M")
    if page >= 32768 and bp < (24 << 20):
        raise SweepError(f"cell {c.label}: a {c.settings['page_size']} page size needs a buffer pool of at least "
                         "24M; raise buffer_pool_size")


def lint_cell(spec: SweepSpec, c: Cell, flavor: Flavor, version: Version, paths: list[str] | None = None) -> list[str]:
    """Lint the cell's options with the profile linter; errors raise, warnings are returned."""
    return lint_cell_options(spec, c, flavor, version, paths)


def _lint_path(t: TierSpec) -> str | None:
    """An existing directory of the tier for the linter's probes (provisioned tiers do not exist yet)."""
    if t.kind == "path":
        return t.path
    if t.kind == "home":
        return str(_existing_ancestor(innotier_home()))
    return None


# ---------------------------------------------------------------------------
# Printing


def _common_settings(cells: list[Cell]) -> dict[str, str]:
    """Settings and server options equal in every cell (printed once above the table)."""
    first = cells[0]
    out = {"page_size": first.settings["page_size"], "clients": first.settings["clients"]}
    out = {k: v for k, v in out.items() if all(c.settings[k] == v for c in cells)}
    for k, v in first.server_options().items():
        if all(c.server_options().get(k) == v for c in cells):
            out[k] = v
    return out


def print_plan(plan: Plan) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console()
    spec = plan.spec
    w = spec.workload
    servers = ", ".join(f"{b.flavor.value} {b.version}" for b in plan.binaries.values()) or \
        f"{plan.flavor.value} {plan.version}"
    con.print(f"[bold]sweep {spec.name}[/bold] (run {plan.run_id}): {servers}, "
              f"driver {w.driver}/{w.mode}, W={w.warehouses}, warm-up {w.warmup:g} s, measure {w.duration:g} s, "
              + (f"repeats: auto, up to {spec.repeats} blocks" if spec.adaptive else f"{spec.repeats} repeat(s)"))
    if spec.description:
        con.print(escape(name_papers(spec.description.splitlines()[0])))
    tt = Table(title="tiers")
    for col in ("tier", "kind", "available", "file system / facts"):
        tt.add_column(col)
    for name, t in plan.tiers.items():
        facts = t.facts
        fs = facts.get("fstype") or facts.get("fs") or t.spec.fs or (t.spec.kind if t.spec.kind in ("tmpfs", "ramfs") else "")
        desc = " ".join(str(x) for x in (fs, facts.get("kind") or "", facts.get("mountpoint") or "") if x)
        tt.add_row(name, t.spec.kind, "yes" if t.available else escape(f"no: {t.reason}"), escape(desc))
    con.print(tt)
    common = _common_settings(plan.cells)
    if common:
        con.print("every cell: " + " ".join(f"{k}={v}" for k, v in common.items()))
    n_cells = len({c.config_key for c in plan.cells})
    title = (f"up to {len(plan.cells)} cell runs ({n_cells} cells x up to {spec.repeats} blocks; repeats: auto stops "
             "when every comparison is decided)" if spec.adaptive else
             f"{len(plan.cells)} cell runs ({n_cells} cells x {spec.repeats} blocks)")
    table = Table(title=title + f", block order {spec.order} (seed {spec.order_seed})")
    for col in ("#", "cell", "block", "datadir tier", "server options that vary"):
        table.add_column(col)
    for c in plan.cells:
        opts = " ".join(f"{k}={v}" for k, v in c.server_options().items() if k not in common)
        table.add_row(str(c.index), c.label, str(c.repeat), c.datadir_tier, opts)
    con.print(table)
    for c, reason in plan.skipped:
        con.print(f"skipped: {c.label} (repeat {c.repeat}): {reason}")
    for g in plan.goldens:
        con.print(f"golden copy {g['id']}: {'present' if g['present'] else 'will be loaded once'}")
    for key, notes in plan.lint.items():
        for n in notes:
            con.print(f"lint: {n}")
    for wmsg in plan.warnings:
        con.print(f"[yellow]warning:[/yellow] {wmsg}")
    con.print(f"estimated time: {format_duration(plan.estimate_seconds)} "
              f"(datadir about {human_size(plan.datadir_bytes)} per cell)")
    if plan.refusal:
        con.print(f"[red]sweep run will refuse:[/red] {escape(plan.refusal)}")
