"""The sweep spec: a YAML file naming what varies (axes), what is fixed, the tiers and the workload.

Example (see tuner/sweep/specs/*.yaml for the shipped ones)::

    name: demo
    description: what this sweep answers
    server: {flavor: mariadb}          # optional basedir: the server binaries to use
    workload: {driver: builtin, mode: procedures, warehouses: 2, warmup: 5, duration: 30, interval: 5}
    repeats: 2
    tiers:                             # named storage tiers components can be placed on
      disk:  {kind: home}              # a directory under $INNOTIER_HOME (the disk innotier runs on)
      tmpfs: {kind: tmpfs, size: 1G}   # mounted for the sweep and unmounted afterwards (also: ramfs)
      zram:  {kind: zram, size: 1G, fs: ext4, optional: true}
      ssd:   {kind: path, path: /mnt/ssd/innotier}   # an existing directory
      ext4-dax: {kind: pmem, fs: ext4, dax: true, region: region0}   # made anew for each cell (WIPED)
    tier_bench: {size: 256M, runtime: 10}   # `tiers bench` of every tier a cell uses, stored with the cell
    profile: null                      # a profile name or YAML file applied to every cell
    fixed: {buffer_pool_size: 256M, clients: 4, options: {innodb_log_file_size: 256M}}
    axes:
      placement: [disk, tmpfs, {redo: tmpfs, ibdata: tmpfs}]   # tier name = whole datadir there
      doublewrite: ["ON", "OFF"]

``fixed`` and ``axes`` share one vocabulary (SETTINGS below); any other server
option goes under ``options:`` in either.  Values are normalized here so that two
spellings of one setting (``16k`` and ``16384``) make the same cell.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.errors import SweepError, UsageError
from tuner.core.server import COMPONENTS
from tuner.core.servers import distributions
from tuner.core.units import PAGE_SIZES, format_size, parse_duration, parse_page_size, parse_size
from tuner.sweep.stats import Target
from tuner.tpcc import adapters
from tuner.tpcc import schema as tpcc_schema

SPECS_DIR = Path(__file__).resolve().parent / "specs"

# setting name -> server option it sets (None: not a server option)
SETTINGS: dict[str, str | None] = {
    "server": None,  # an installed server distribution (`innotier server install`): mysql-9.7, mariadb-11.8, ...
    "placement": None,  # component -> tier
    "page_size": "innodb_page_size",  # init-time: one golden copy per page size
    "clients": None,  # TPC-C client connections
    "flush_method": "innodb_flush_method",
    "doublewrite": "innodb_doublewrite",
    "buffer_pool_size": "innodb_buffer_pool_size",
    "buffer_pool_instances": "innodb_buffer_pool_instances",
    "log_file_size": "innodb_log_file_size",
    "flush_log_at_trx_commit": "innodb_flush_log_at_trx_commit",
    "io_capacity": "innodb_io_capacity",
    "options": None,  # any other server option: {name: value} (fixed) or {name: [values]} (axes)
}
# short names for labels
SHORT = {"placement": "", "page_size": "ps", "clients": "c", "flush_method": "flush", "doublewrite": "dw",
         "buffer_pool_size": "bp", "buffer_pool_instances": "bpi", "log_file_size": "redo",
         "flush_log_at_trx_commit": "flatc", "io_capacity": "ioc"}

TIER_KINDS = ("home", "path", "tmpfs", "ramfs", "zram", "md", "pmem")
PER_CELL_KINDS = ("md", "pmem")  # built for each cell that uses them (they share devices), torn down after it
TOP_KEYS = ("name", "description", "server", "workload", "repeats", "stop", "seed", "tiers", "profile", "fixed",
            "axes", "exclude", "order", "golden_load_buffer_pool", "regime", "tier_bench")
TIER_BENCH_KEYS = ("size", "runtime")
STOP_KEYS = ("budget", "min_blocks", "max_blocks", "equivalence", "alpha")
REGIME_KEYS = ("seed_source", "seed_data", "seed_buffer_pool", "note")
ORDERS = ("blocks", "interleave", "sequential")
WORKLOAD_KEYS = ("driver", "mode", "warehouses", "warmup", "duration", "interval", "tool_path")
TIER_KEYS = ("kind", "path", "size", "fs", "optional", "level", "devices", "note", "mount_options", "dax", "region")
PMEM_FILESYSTEMS = {True: ("ext4", "xfs"), False: ("ext4", "xfs", "f2fs")}  # with DAX / through the page cache
DEFAULT_PLACEMENT = "datadir"
# the database of the golden copy's TPC-C tables (tuner.sweep.golden.TPCC_DATABASE): a placement may name
# its tables one by one, ``tpcc.stock: fast`` (placed with the server running: tuner/sweep/table_placement.py)
TABLE_DATABASE = "tpcc"
GOLDEN_TABLES = (*tpcc_schema.TABLES, tpcc_schema.META_TABLE)  # the loader's tables, its metadata row included


@dataclass(frozen=True)
class TierSpec:
    """A named place components can be put: an existing path, the home disk, or one the sweep provisions."""

    name: str
    kind: str  # home | path | tmpfs | ramfs | zram | md | pmem
    path: str | None = None  # kind path
    size: int | None = None  # provisioned kinds (bytes)
    fs: str | None = None  # file system made on a provisioned block device (zram, md)
    optional: bool = False  # cells on it are skipped (with the reason) when it cannot be provided here
    level: str | None = None  # md: raid level
    devices: int | None = None  # md: number of member devices
    device_paths: tuple[str, ...] = ()  # md: the member devices, when named
    mount_options: str | None = None
    note: str | None = None
    dax: bool | None = None  # pmem: mounted with DAX (True) or used through the page cache (False)
    region: str | None = None  # pmem: the NVDIMM region its namespace is (or is made) in

    @property
    def provisioned(self) -> bool:
        return self.kind in ("tmpfs", "ramfs", "zram", "md", "pmem")

    @property
    def per_cell(self) -> bool:
        return self.kind in PER_CELL_KINDS

    def describe(self) -> str:
        if self.kind == "path":
            return f"{self.name} (path {self.path})"
        if self.kind == "home":
            return f"{self.name} (the disk under $INNOTIER_HOME)"
        extra = f" {self.fs}" if self.fs else ""
        if self.kind == "pmem":
            return f"{self.name} (pmem {self.region}{extra}, {'DAX' if self.dax else 'page cache, no DAX'})"
        lvl = f" raid{self.level} x{self.devices}" if self.kind == "md" else ""
        return f"{self.name} ({self.kind}{lvl}{extra}, {format_size(self.size or 0)})"

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
                if v not in (None, False, ())}


@dataclass(frozen=True)
class Workload:
    driver: str = "builtin"
    mode: str = "procedures"
    warehouses: int = 1
    warmup: float = 10.0
    duration: float = 60.0
    interval: float = 10.0
    tool_path: str | None = None


@dataclass(frozen=True)
class TierBench:
    """``tier_bench:``: `innotier tiers bench` (the standard fio jobs) on every tier a cell uses, before its clone."""

    size: int = 256 << 20  # fio file size, bytes
    runtime: int = 10  # seconds per job

    @property
    def seconds(self) -> float:
        return self.runtime * 4 + 2.0  # four jobs, and fio's start and file layout


@dataclass(frozen=True)
class StopRule:
    """``repeats: auto``: add blocks until every comparison is decided, the budget is spent, or max_blocks."""

    # seconds of cell runs (all invocations of the run together); min_blocks always run whatever it says,
    # then a block starts only when the time spent plus one more block fits in the budget
    budget: float = 1800.0
    min_blocks: int = 3
    max_blocks: int = 10
    equivalence: float = 0.05  # the margin: an interval inside +/-5% of 1.0 decides "equivalent"
    alpha: float = 0.05  # chance of any false "differs" over all comparisons and looks

    def target(self, adaptive: bool = True) -> Target:
        return Target(equivalence=self.equivalence, alpha=self.alpha, min_blocks=self.min_blocks,
                      max_blocks=self.max_blocks, adaptive=adaptive)

    def fixed_part(self) -> dict[str, Any]:
        """What is fixed at the first start of a run (everything but the time budget)."""
        return {k: v for k, v in self.__dict__.items() if k != "budget"}

    def changes_from(self, stored: dict[str, Any]) -> list[str]:
        """'max_blocks 6 -> 8' for each part of the fixed rule that differs from the stored one."""
        return [f"{k} {stored[k]} -> {v}" for k, v in self.fixed_part().items() if k in stored and stored[k] != v]


@dataclass(frozen=True)
class Regime:
    """The seed's data-to-buffer-pool ratio the spec reproduces (issue 17, part 5)."""

    seed_source: str = ""
    seed_data: int = 0  # bytes of data in the seed's experiment
    seed_buffer_pool: int = 0
    note: str = ""

    @property
    def seed_ratio(self) -> float | None:
        return self.seed_data / self.seed_buffer_pool if self.seed_data and self.seed_buffer_pool else None


@dataclass
class SweepSpec:
    """A validated sweep spec; ``axes`` and ``fixed`` hold normalized values."""

    name: str
    description: str
    flavor: str | None
    version: str | None
    basedir: str | None
    workload: Workload
    repeats: int
    tiers: dict[str, TierSpec]
    profile: str | None
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]
    exclude: list[dict[str, Any]] = field(default_factory=list)
    # blocks: each repeat is a block running every cell once in a fresh random order (seeded);
    # interleave: blocks in the spec's order; sequential: all repeats of a cell, then the next cell
    order: str = "blocks"
    adaptive: bool = False  # repeats: auto (``repeats`` is then the most blocks the stop rule allows)
    stop: StopRule = field(default_factory=StopRule)
    seed: int | None = None  # the block order's random seed (default: from the spec's digest)
    regime: Regime | None = None
    tier_bench: TierBench | None = None
    source: str | None = None  # the file it came from
    text: str = ""  # the YAML as given (stored with the results)

    def canonical(self) -> dict[str, Any]:
        """What defines the sweep's cells and measurements (not comments or description)."""
        return {
            "name": self.name, "flavor": self.flavor, "version": self.version, "basedir": self.basedir,
            "workload": self.workload.__dict__, "repeats": self.repeats,
            "tiers": {k: t.to_dict() for k, t in sorted(self.tiers.items())},
            "profile": self.profile, "fixed": self.fixed, "axes": self.axes, "exclude": self.exclude,
            "order": self.order, "seed": self.seed,
        } | ({"repeats": "auto"} if self.adaptive else {}) \
          | ({"tier_bench": self.tier_bench.__dict__} if self.tier_bench else {})
        # the stop rule is left out on purpose: a larger budget resumes the same run with more blocks;
        # the rest of the rule is fixed at the first start (the runner refuses a changed one)

    @property
    def order_seed(self) -> int:
        """The random seed of the block order (recorded with the run)."""
        if self.seed is not None:
            return self.seed
        blob = json.dumps({k: v for k, v in self.canonical().items() if k != "seed"}, sort_keys=True,
                          default=str).encode()
        return int(hashlib.sha256(blob).hexdigest()[:8], 16)

    def target(self) -> Target:
        return self.stop.target(adaptive=self.adaptive)

    def design(self, target: Target | None = None) -> dict[str, Any]:
        """The design stored with the run at its first start; ``target`` carries the family size."""
        return {"order": self.order, "seed": self.order_seed, "adaptive": self.adaptive,
                "blocks_planned": self.repeats, "stop": self.stop.__dict__ if self.adaptive else None,
                "target": (target or self.target()).to_dict(),
                "regime": None if self.regime is None else {**self.regime.__dict__, "seed_ratio": self.regime.seed_ratio}}

    @property
    def digest(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()

    @property
    def run_id(self) -> str:
        """Same spec content, same run: re-running the same spec resumes it."""
        return f"{self.name}-{self.digest[:10]}"


# ---------------------------------------------------------------------------
# Loading


def resolve_spec_path(name_or_path: str) -> Path:
    """A spec file path, or the name of a shipped spec (``demo`` -> specs/demo.yaml)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    shipped = SPECS_DIR / f"{name_or_path}.yaml"
    if shipped.is_file() and "/" not in name_or_path:
        return shipped
    known = ", ".join(sorted(x.stem for x in SPECS_DIR.glob("*.yaml")))
    raise SweepError(f"sweep spec {name_or_path!r} is neither a file nor a shipped spec ({known}); "
                     "give the path of a YAML spec")


def load_spec(name_or_path: str) -> SweepSpec:
    import yaml

    path = resolve_spec_path(name_or_path)
    text = path.read_text()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where else ""
        raise SweepError(f"sweep spec {path} is not valid YAML{at}; fix its syntax") from None
    spec = parse_spec(doc, source=str(path))
    spec.text = text
    return spec


def parse_spec(doc: Any, source: str = "<spec>") -> SweepSpec:
    """Validate a spec document (already parsed YAML) into a SweepSpec; every error names the fix."""
    if not isinstance(doc, dict):
        raise SweepError(f"sweep spec {source} must be a mapping with at least name, workload and axes")
    _unknown(doc, TOP_KEYS, f"top-level key in {source}")
    name = str(doc.get("name") or Path(source).stem)
    if not name.replace("-", "").replace("_", "").isalnum():
        raise SweepError(f"sweep name {name!r} is not valid; use letters, digits, '-' or '_'")
    server = doc.get("server") or {}
    if not isinstance(server, dict):
        raise SweepError("server: must be a mapping like {flavor: mariadb, basedir: /opt/mysql-8.0}")
    _unknown(server, ("flavor", "version", "basedir"), "key under server:")
    flavor = server.get("flavor")
    if flavor is not None and str(flavor).lower() not in ("mariadb", "mysql", "percona"):
        raise SweepError(f"server.flavor {flavor!r} is unknown; use mariadb, mysql or percona")
    workload = _workload(doc.get("workload") or {})
    repeats = doc.get("repeats", 1)
    adaptive = isinstance(repeats, str) and repeats.strip().lower() == "auto"
    stop = _stop(doc.get("stop"), adaptive)
    if adaptive:
        repeats = stop.max_blocks
    elif not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise SweepError(f"repeats: {repeats!r} is not valid; give auto (blocks until decided) or a number >= 1 "
                         "(3 or more to decide anything)")
    seed = doc.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise SweepError(f"seed: {seed!r} is not valid; give a whole number >= 0 or leave it out")
    tiers = _tiers(doc.get("tiers") or {})
    fixed = _fixed(doc.get("fixed") or {}, tiers)
    axes = _axes(doc.get("axes") or {}, tiers)
    for k in axes:
        if k == "options":
            both = set(axes["options"]) & set(fixed.get("options", {}))
            if both:
                raise SweepError(f"option {sorted(both)[0]} is both fixed and an axis; keep it in one place")
        elif k in fixed:
            raise SweepError(f"{k} is both fixed and an axis; keep it in one place")
    exclude = doc.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) for e in exclude):
        raise SweepError("exclude: must be a list of mappings, e.g. [{page_size: 4k, clients: 64}]")
    exclude = [_fixed(e, tiers, what="exclude") for e in exclude]
    order = str(doc.get("order") or "blocks")
    if order not in ORDERS:
        raise SweepError(f"order: {order!r} is unknown; use blocks (each repeat runs every cell in a random order), "
                         "interleave (the same order every repeat) or sequential")
    if adaptive and order != "blocks":
        raise SweepError(f"order: {order} cannot go with repeats: auto: the stop rule compares cells within blocks, "
                         "which needs a fresh random order per block; use order: blocks or a fixed number of repeats")
    profile = doc.get("profile")
    return SweepSpec(name=name, description=str(doc.get("description") or "").strip(),
                     flavor=str(flavor).lower() if flavor else None,
                     version=str(server["version"]) if server.get("version") else None,
                     basedir=server.get("basedir"), workload=workload, repeats=repeats, tiers=tiers,
                     profile=str(profile) if profile else None, fixed=fixed, axes=axes, exclude=exclude,
                     order=order, adaptive=adaptive, stop=stop, seed=seed, regime=_regime(doc.get("regime")),
                     tier_bench=_tier_bench(doc.get("tier_bench")), source=source)


def _stop(d: Any, adaptive: bool) -> StopRule:
    if d is None:
        return StopRule()
    if not isinstance(d, dict):
        raise SweepError("stop: must be a mapping like {budget: 20m, max_blocks: 8}")
    if not adaptive:
        raise SweepError("stop: applies only with repeats: auto; remove it or set repeats: auto")
    _unknown(d, STOP_KEYS, "key under stop:")
    budget = parse_stop_budget(d.get("budget", StopRule.budget), "stop.budget")
    lo = int(_number(d.get("min_blocks", StopRule.min_blocks), "stop.min_blocks", 2, integer=True))
    hi = int(_number(d.get("max_blocks", StopRule.max_blocks), "stop.max_blocks", 2, integer=True))
    if hi < lo:
        raise SweepError(f"stop.max_blocks {hi} is below stop.min_blocks {lo}; raise max_blocks")
    return StopRule(budget=budget, min_blocks=lo, max_blocks=hi,
                    equivalence=_fraction(d.get("equivalence", StopRule.equivalence), "stop.equivalence"),
                    alpha=_fraction(d.get("alpha", StopRule.alpha), "stop.alpha"))


def parse_stop_budget(text: Any, what: str = "--budget") -> float:
    """A time budget: 900 (seconds), 900s, 15m, 1.5h."""
    value = _seconds(text, what, 0)
    if value < 1:
        raise SweepError(f"{what} {text!r} is too short; give at least one second")
    return value


def _fraction(v: Any, what: str) -> float:
    """0.05 or "5%"."""
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            v = float(v.strip()[:-1]) / 100.0
        except ValueError:
            raise SweepError(f"{what} {v!r} is not a percentage; write it like 5%") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
        raise SweepError(f"{what} {v!r} is not valid; give a fraction between 0 and 1, like 0.05 or 5%")
    return float(v)


def _regime(d: Any) -> Regime | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SweepError("regime: must be a mapping like {seed_source: ..., seed_data: 50G, seed_buffer_pool: 1G}")
    _unknown(d, REGIME_KEYS, "key under regime:")
    try:
        data = parse_size(d.get("seed_data") or 0, "regime.seed_data") if d.get("seed_data") else 0
        bp = parse_size(d.get("seed_buffer_pool") or 0, "regime.seed_buffer_pool") if d.get("seed_buffer_pool") else 0
    except UsageError as exc:
        raise SweepError(str(exc)) from None
    return Regime(seed_source=str(d.get("seed_source") or ""), seed_data=data, seed_buffer_pool=bp,
                  note=str(d.get("note") or "").strip())


def _tier_bench(d: Any) -> TierBench | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SweepError("tier_bench: must be a mapping like {size: 256M, runtime: 10}")
    _unknown(d, TIER_BENCH_KEYS, "key under tier_bench:")
    try:
        size = parse_size(d.get("size", "256M"), "tier_bench.size")
    except UsageError as exc:
        raise SweepError(str(exc)) from None
    if size < (4 << 20):
        raise SweepError(f"tier_bench.size {d.get('size')!r} is too small; give at least 4M")
    runtime = int(_number(d.get("runtime", TierBench.runtime), "tier_bench.runtime", 1, integer=True))
    return TierBench(size=size, runtime=runtime)


def _unknown(d: dict, allowed: tuple[str, ...], what: str) -> None:
    for k in d:
        if k not in allowed:
            raise SweepError(f"unknown {what} {k!r}; valid: {', '.join(allowed)}")


def _seconds(v: Any, what: str, minimum: float = 0.0) -> float:
    """A duration in the one grammar (``tuner.core.units.parse_duration``: 500ms, 30, 30s, 5m, 1.5h)."""
    try:
        seconds = parse_duration(v, what)
    except UsageError as exc:
        raise SweepError(str(exc)) from None
    return _number(seconds, what, minimum)


def _number(v: Any, what: str, minimum: float = 0.0, integer: bool = False) -> float:
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise SweepError(f"{what} {v!r} is not a number") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SweepError(f"{what} {v!r} is not a number")
    if v < minimum or (integer and int(v) != v):
        kind = "a whole number" if integer else "a number"
        raise SweepError(f"{what} {v!r} is not valid; give {kind} >= {minimum:g}")
    return int(v) if integer else float(v)


def _workload(d: Any) -> Workload:
    if not isinstance(d, dict):
        raise SweepError("workload: must be a mapping like {warehouses: 2, warmup: 10, duration: 60}")
    _unknown(d, WORKLOAD_KEYS, "key under workload:")
    driver = str(d.get("driver", "builtin"))
    if driver not in adapters.drivers():
        raise SweepError(f"workload.driver {driver!r} is unknown; use one of {', '.join(adapters.drivers())}")
    mode = str(d.get("mode", "procedures"))
    if mode not in ("procedures", "statements"):
        raise SweepError(f"workload.mode {mode!r} is unknown; use procedures or statements")
    return Workload(driver=driver, mode=mode,
                    warehouses=int(_number(d.get("warehouses", 1), "workload.warehouses", 1, integer=True)),
                    warmup=_seconds(d.get("warmup", 10), "workload.warmup", 0),
                    duration=_seconds(d.get("duration", 60), "workload.duration", 1),
                    interval=_seconds(d.get("interval", 10), "workload.interval", 1),
                    tool_path=d.get("tool_path"))


def _tiers(d: Any) -> dict[str, TierSpec]:
    if not isinstance(d, dict):
        raise SweepError("tiers: must be a mapping of name -> {kind: ..., ...}")
    if not d:
        d = {"disk": {"kind": "home"}}
    out = {}
    for name, t in d.items():
        if not isinstance(t, dict):
            raise SweepError(f"tier {name!r} must be a mapping like {{kind: tmpfs, size: 1G}}")
        _unknown(t, TIER_KEYS, f"key in tier {name!r}:")
        kind = str(t.get("kind") or ("path" if t.get("path") else ""))
        if kind not in TIER_KINDS:
            raise SweepError(f"tier {name!r} has kind {kind or 'missing'!r}; use one of {', '.join(TIER_KINDS)}")
        path = t.get("path")
        if kind == "path":
            if not path:
                raise SweepError(f"tier {name!r} (kind path) needs path: an existing directory")
            path = os.path.expandvars(os.path.expanduser(str(path)))
        elif path:
            raise SweepError(f"tier {name!r} is kind {kind}: it has no path: (innotier provides the directory)")
        size = None
        if kind in ("tmpfs", "ramfs", "zram", "md") or (kind == "pmem" and t.get("size") is not None):
            if t.get("size") is None:
                raise SweepError(f"tier {name!r} ({kind}) needs size:, e.g. size: 1G")
            try:
                size = parse_size(t["size"], f"tier {name} size")
            except UsageError as exc:
                raise SweepError(str(exc)) from None
        fs = t.get("fs")
        dax, region = _pmem_keys(str(name), kind, t)
        if kind == "pmem":
            fs = str(fs or "ext4")
            if fs not in PMEM_FILESYSTEMS[dax]:
                raise SweepError(f"tier {name!r} (pmem{', DAX' if dax else ''}) fs {fs!r} is not valid; use "
                                 f"{' or '.join(PMEM_FILESYSTEMS[dax])}"
                                 + (" (f2fs has no DAX: set dax: false)" if fs == "f2fs" else ""))
        elif kind in ("zram", "md"):
            fs = str(fs or "ext4")
            if fs not in ("ext4", "xfs", "btrfs", "f2fs"):
                raise SweepError(f"tier {name!r} fs {fs!r} is unknown; use ext4, xfs, btrfs or f2fs")
        elif fs:
            raise SweepError(f"tier {name!r} is kind {kind}: fs: applies only to zram, md and pmem tiers")
        level = devices = None
        device_paths: tuple[str, ...] = ()
        if kind == "md":
            level = str(t.get("level", "")).lower().replace("raid", "")
            if level not in ("0", "1", "5", "6", "10"):
                raise SweepError(f"tier {name!r} (md) level {t.get('level')!r} is not valid; use 0, 1, 5, 6 or 10")
            raw = t.get("devices", 4)
            device_paths = tuple(str(d) for d in raw) if isinstance(raw, list) else ()
            devices = len(device_paths) if device_paths else int(_number(raw, f"tier {name} devices", 2, integer=True))
            need = {"0": 2, "1": 2, "5": 3, "6": 4, "10": 4}[level]
            if devices < need:
                raise SweepError(f"tier {name!r}: RAID {level} needs at least {need} devices, not {devices}")
        out[str(name)] = TierSpec(name=str(name), kind=kind, path=path, size=size, fs=fs,
                                  optional=bool(t.get("optional", False)), level=level, devices=devices,
                                  device_paths=device_paths, mount_options=t.get("mount_options"), note=t.get("note"),
                                  dax=dax, region=region)
    return out


def _pmem_keys(name: str, kind: str, t: dict) -> tuple[bool | None, str | None]:
    """(dax, region) of a pmem tier; None for other kinds, which may not carry them."""
    if kind != "pmem":
        for key in ("dax", "region"):
            if key in t:
                raise SweepError(f"tier {name!r} is kind {kind}: {key}: applies only to pmem tiers")
        return None, None
    dax = t.get("dax", True)
    if not isinstance(dax, bool):
        raise SweepError(f"tier {name!r} dax: {dax!r} is not valid; give true (mount -o dax) or false (page cache)")
    region = str(t.get("region") or "region0")
    if not region.startswith("region") or not region[len("region"):].isdigit():
        raise SweepError(f"tier {name!r} region: {region!r} is not an NVDIMM region name; write it like region0")
    return dax, region


# -- setting values ----------------------------------------------------------


def normalize_setting(name: str, value: Any, tiers: dict[str, TierSpec]) -> Any:
    """One canonical form per setting value, so equal cells compare equal."""
    if name == "placement":
        return normalize_placement(value, tiers)
    if name == "server":
        try:
            return distributions.get(str(value)).name
        except UsageError as exc:
            raise SweepError(str(exc)) from None
    if name == "page_size":
        try:
            return PAGE_SIZES[parse_page_size(value)]
        except UsageError as exc:
            raise SweepError(str(exc)) from None
    if name == "clients":
        return int(_number(value, "clients", 1, integer=True))
    if name in ("buffer_pool_size", "log_file_size"):
        try:
            return format_size(parse_size(value, name))
        except UsageError as exc:
            raise SweepError(str(exc)) from None
    if name in ("buffer_pool_instances", "io_capacity", "flush_log_at_trx_commit"):
        return int(_number(value, name, 0, integer=True))
    if name == "doublewrite":
        return _onoff(value)
    if name == "flush_method":
        return str(value)
    raise SweepError(f"unknown setting {name!r}")


def _onoff(value: Any) -> str:
    if value is True:
        return "ON"
    if value is False:
        return "OFF"
    s = str(value).strip()
    return {"1": "ON", "0": "OFF", "on": "ON", "off": "OFF", "true": "ON", "false": "OFF"}.get(s.lower(), s)


def normalize_placement(value: Any, tiers: dict[str, TierSpec]) -> dict[str, str]:
    """``tmpfs`` -> {datadir: tmpfs}; a mapping component -> tier; components not named stay in the datadir."""
    if isinstance(value, str):
        value = {DEFAULT_PLACEMENT: value}
    if not isinstance(value, dict) or not value:
        raise SweepError(f"placement {value!r} is not valid; give a tier name or a mapping like "
                         "{redo: tmpfs, ibdata: tmpfs}")
    out = {}
    for comp, tier in value.items():
        if comp not in COMPONENTS and not is_table_key(comp):
            raise SweepError(f"placement component {comp!r} is unknown; valid: {', '.join(COMPONENTS)}, or a "
                             f"TPC-C table as {TABLE_DATABASE}.<table> ({', '.join(GOLDEN_TABLES)})")
        if str(tier) not in tiers:
            raise SweepError(f"placement puts {comp} on tier {tier!r}, which is not defined under tiers: "
                             f"(defined: {', '.join(tiers) or 'none'})")
        out[comp] = str(tier)
    if DEFAULT_PLACEMENT not in out:
        home = [n for n, t in tiers.items() if t.kind == "home"]
        out[DEFAULT_PLACEMENT] = home[0] if home else next(iter(tiers))
    return dict(sorted(out.items()))


def is_table_key(key: Any) -> bool:
    """``tpcc.stock``: one of the TPC-C tables of the sweep's golden copy, placed on its own (issue 31)."""
    db, _, table = str(key).partition(".")
    return db == TABLE_DATABASE and table in GOLDEN_TABLES


def placed_tables(p: dict[str, str]) -> dict[str, str]:
    """The placement's tables (``schema.table`` -> tier) that are not on the datadir's tier."""
    return {k: t for k, t in p.items() if is_table_key(k) and t != p.get(DEFAULT_PLACEMENT)}


def placement_label(p: dict[str, str]) -> str:
    """datadir@tmpfs, or redo+ibdata@tmpfs (rest@disk)."""
    base = p.get(DEFAULT_PLACEMENT)
    moved: dict[str, list[str]] = {}
    for comp, tier in p.items():
        if comp != DEFAULT_PLACEMENT and tier != base:
            moved.setdefault(tier, []).append(comp)
    if not moved:
        return f"datadir@{base}"
    parts = [f"{'+'.join(sorted(c))}@{t}" for t, c in sorted(moved.items())]
    return " ".join(parts) + f" (rest@{base})"


def _fixed(d: Any, tiers: dict[str, TierSpec], what: str = "fixed") -> dict[str, Any]:
    if not isinstance(d, dict):
        raise SweepError(f"{what}: must be a mapping of setting -> value")
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k not in SETTINGS:
            raise SweepError(f"unknown setting {k!r} under {what}:; valid: {', '.join(SETTINGS)} "
                             "(any other server option goes under options:)")
        if k == "options":
            if not isinstance(v, dict):
                raise SweepError(f"{what}.options must be a mapping of server option -> value")
            out["options"] = {_option_name(o): _option_value(x) for o, x in v.items()}
        else:
            if isinstance(v, list):
                raise SweepError(f"{what}.{k} is a list; a list of values belongs under axes:")
            out[k] = normalize_setting(k, v, tiers)
    return out


def _axes(d: Any, tiers: dict[str, TierSpec]) -> dict[str, list[Any]]:
    if not isinstance(d, dict):
        raise SweepError("axes: must be a mapping of setting -> list of values")
    out: dict[str, list[Any]] = {}
    for k, v in d.items():
        if k not in SETTINGS:
            raise SweepError(f"unknown axis {k!r}; valid axes: {', '.join(SETTINGS)} "
                             "(any other server option goes under axes.options)")
        if k == "options":
            if not isinstance(v, dict):
                raise SweepError("axes.options must be a mapping of server option -> list of values")
            opts = {}
            for o, vals in v.items():
                vals = _values_list(f"axes.options.{o}", vals)
                opts[_option_name(o)] = _no_duplicates(f"axes.options.{o}", [_option_value(x) for x in vals])
            out["options"] = opts
        else:
            vals = _values_list(f"axes.{k}", v)
            out[k] = _no_duplicates(f"axes.{k}", [normalize_setting(k, x, tiers) for x in vals])
    return out


def _values_list(what: str, v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise SweepError(f"{what} must be a list of values, e.g. [\"ON\", \"OFF\"]")
    if not v:
        raise SweepError(f"{what} is an empty list; give at least one value or remove the axis")
    return v


def _no_duplicates(what: str, vals: list[Any]) -> list[Any]:
    seen = []
    for x in vals:
        if x in seen:
            raise SweepError(f"{what} lists {x!r} twice (after normalizing), which would make duplicate cells; "
                             "remove one")
        seen.append(x)
    return vals


def _option_name(name: Any) -> str:
    n = str(name).strip().replace("-", "_")
    if not n or not n.replace("_", "").replace(".", "").isalnum():
        raise SweepError(f"server option name {name!r} is not valid")
    return n


def _option_value(v: Any) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


def config_label(varying: dict[str, Any]) -> str:
    """A cell's short name from the settings that vary: `dw=OFF redo on tmpfs`."""
    parts = []
    for k, v in varying.items():
        if k == "placement":
            parts.append(placement_label(v))
        elif k == "server":
            parts.append(str(v))
        elif k == "options":
            parts += [f"{o}={ov}" for o, ov in v.items()]
        else:
            parts.append(f"{SHORT.get(k, k)}={v}")
    return " ".join(parts)


def excluded(settings: dict[str, Any], exclude: list[dict[str, Any]]) -> bool:
    """Whether a cell's settings match one of the spec's ``exclude:`` rules (every key of the rule)."""
    for rule in exclude:
        match = True
        for k, v in rule.items():
            if k == "options":
                if any((settings.get("options") or {}).get(o) != ov for o, ov in v.items()):
                    match = False
            elif settings.get(k) != v:
                match = False
        if match:
            return True
    return False
