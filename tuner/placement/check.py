"""Check an advice by measurement (issue 31, item 4): a sweep generated from it, predicted beside measured.

request (CheckRequest) -> plan (CheckPlan: the cells and the sweep spec they make, printable before
anything runs) -> execution (the sweep's own Runner: blocked design, clones of a golden TPC-C copy, the
files of each cell placed on the tier) -> result (CheckResult: per cell the predicted saving from the
advice beside the measured throughput gain over "none" with its interval, and the bytes placed; stored in
the results store's ``placement_checks``).

The cells, one placement axis of the sweep, "none" first (every comparison is against it):
  none            nothing moved: every file on the slow tier
  advisor         the advice's pick, each component and table of it on the fast tier
  advisor at B    (with --budget B, repeatable) the advisor's pick at another budget, from the same profile and
                  tiers: predicted against measured at several budgets in one design
  largest tables  the naive pick of the same budget (the advice's own, computed beside the pick)
  redo alone      the redo log alone
  everything      the whole datadir on the fast tier
Picks that place the same files are one cell with both names ("advisor = largest tables").

Components are placed by the sweep as it always does (the clone's files moved before the start);
tables by the started server (tuner/sweep/table_placement.py): on MariaDB a shadow with DATA DIRECTORY swapped
in, on MySQL a general tablespace in a directory the cell's option files list in innodb_directories.
The sweep runs TPC-C on a golden copy, so the advice must come from a TPC-C profile (`placement measure
--during-tpcc`); its clients, warehouses, buffer pool and page size are the cells' unless given.

Predicted and measured are in different units: the advice predicts seconds of I/O wait saved per second of
workload, the sweep measures throughput.  Both are shown as they are, and each as a share of what moving
everything gives (predicted saving / everything's; measured gain - 1 / everything's gain - 1), which is the
number the issue's goal is stated in.  A throughput ratio is also predicted by a closed-loop model:
C clients that spend S of their C client-seconds per second waiting on I/O the tier saves go C / (C - S)
times faster, if all of that wait was in the clients' foreground (background writes are not).  Where the
slow tier costs more than the counted waits (locks held across slow reads, waits for free pages), that
model is far too low; a second one, calibrated on everything's measured ratio E, predicts each pick's
ratio from its predicted share p by the residence-time law, 1 / (1 - p (1 - 1/E)) (``calibrated``).  The
law has no notion of a tier's capacity; a third, a closed queueing network of the two tiers' read and write
stations (``tuner.placement.queueing``: each file's measured operations per transaction, each tier's
capacity at depth from `placement tier`, the rest of a transaction fitted to E), predicts where the files
left behind become the bottleneck (``queueing``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import yaml

from datadir_mover.move import components
from tuner.core.errors import InnotierError, UsageError
from tuner.core.paths import innotier_home
from tuner.core.probe import mount_of
from tuner.core.sandbox import ServerBinaries, binaries_for_server, find_binaries
from tuner.core.server import Version
from tuner.core.units import format_size, human_size
from tuner.placement import queueing
from tuner.placement.advisor import advise
from tuner.placement.model import COMPONENT_KINDS, IoProfile, Pick, StoredAdvice, TierCost
from tuner.placement.store import PlacementStore
from tuner.placement.tiercost import check_mount
from tuner.sweep.analysis import Verdict, configs_from, questions
from tuner.sweep.plan import Plan, make_plan
from tuner.sweep.runner import Runner, RunnerOptions, RunSummary
from tuner.sweep.spec import DEFAULT_PLACEMENT, GOLDEN_TABLES, TABLE_DATABASE, SweepSpec, is_table_key, parse_spec

SLOW, FAST = "slow", "fast"
NAIVE = ("largest tables", "redo alone")
AT_BUDGET = "advisor at "
# every cell starts with a cold buffer pool: a table placed by the server gets a new tablespace id, so the
# golden copy's buffer-pool dump would warm every table but the moved ones
FIXED_OPTIONS = {"innodb_buffer_pool_load_at_startup": "OFF"}


@dataclass(frozen=True)
class CheckRequest:
    advice: str | None = None           # an advice id (or prefix); None: the newest
    server: str | None = None           # an installed server distribution; None: the host's server
    slow: str | None = None             # a directory for the files left in place; None: see slow_tier()
    naive: tuple[str, ...] = NAIVE
    budgets: tuple[int, ...] = ()       # more budgets to pick at (bytes), beside the advice's own
    blocks: int = 3
    clients: int | None = None          # None: the profile's
    warehouses: int | None = None
    buffer_pool: str | None = None
    warmup: float = 10.0
    duration: float = 60.0
    interval: float = 5.0


@dataclass(frozen=True)
class CheckCell:
    """One cell of the check: the picks it stands for, what it places on the fast tier, and the prediction."""

    name: str                           # "advisor", "advisor = largest tables", ...
    keys: tuple[str, ...]               # the advice's candidates it moves
    placement: Mapping[str, str]        # the sweep's placement value
    bytes: int                          # the advice's size of those candidates
    predicted: float                    # wait saved, seconds per second of workload
    low: float | None = None
    high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "keys": list(self.keys), "placement": dict(self.placement), "bytes": self.bytes,
                "predicted": self.predicted, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class CheckPlan:
    stored: StoredAdvice
    target: TierCost
    profile_server: Mapping[str, Any]
    clients: int                        # the profile's (the closed-loop model's C)
    cells: tuple[CheckCell, ...]
    spec_doc: Mapping[str, Any]         # the generated sweep spec
    notes: tuple[str, ...] = ()
    profile: IoProfile | None = None    # the advice's measured profile (the queueing model's I/O per transaction)
    slow_cost: TierCost | None = None   # the slow tier's cost (the advice's --here)

    def spec(self) -> SweepSpec:
        spec = parse_spec(dict(self.spec_doc), source=f"placement check of {self.stored.advice_id}")
        spec.text = self.spec_text()
        return spec

    def spec_text(self) -> str:
        return yaml.safe_dump(dict(self.spec_doc), sort_keys=False)

    def cell_for(self, placement: Mapping[str, str]) -> CheckCell | None:
        return next((c for c in self.cells if dict(c.placement) == dict(placement)), None)

    @property
    def everything(self) -> CheckCell:
        return self.cells[-1]


@dataclass(frozen=True)
class CheckRow:
    """Predicted beside measured for one cell (the result's rows; ratios are throughput over "none")."""

    name: str
    keys: tuple[str, ...]
    bytes_advised: int
    bytes_placed: int | None            # what the cell's runs moved onto the fast tier, as recorded
    predicted: float
    predicted_low: float | None
    predicted_high: float | None
    predicted_share: float | None       # of everything's predicted saving
    predicted_ratio: float | None       # the closed-loop model's throughput ratio
    calibrated_ratio: float | None      # the residence-time law calibrated on everything's measured ratio
    queueing_ratio: float | None        # the queueing network (tiers' capacities) calibrated the same way
    tpmc: float | None                  # geometric mean over the blocks
    measured_ratio: float | None
    measured_low: float | None
    measured_high: float | None
    measured_state: str                 # the sweep's verdict text ("decided: differs", "undecided ...")
    measured_share: float | None        # of everything's measured gain
    placed_where: str                   # where the server said the files were ("checked" or the problem)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class CheckResult:
    run_id: str
    advice_id: str
    checked_at: str
    blocks: int
    rows: tuple[CheckRow, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    head_to_head: tuple[dict[str, Any], ...] = ()   # the advisor's pick over the naive one, same family
    curve: tuple[dict[str, Any], ...] = ()          # the queueing model's throughput against budget

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "advice_id": self.advice_id, "checked_at": self.checked_at,
                "blocks": self.blocks, "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes),
                "head_to_head": list(self.head_to_head), "curve": list(self.curve)}


# ---- request -> plan ------------------------------------------------------------------------------

def build(request: CheckRequest, store: PlacementStore) -> CheckPlan:
    """Every refusal happens here, before anything is created, mounted, started or stored."""
    stored = store.advice(request.advice)
    advice = stored.advice
    profile = store.profile(advice.profile_id)
    target = store.tier(advice.tier_id)
    if profile.workload.get("kind") != "tpcc":
        raise UsageError(f"advice {stored.advice_id} comes from a profile of {profile.workload.get('kind')} traffic, "
                         "but the check runs the built-in TPC-C; measure with `innotier placement measure "
                         "--during-tpcc` and advise from that profile")
    check_mount(target.mountpoint)  # not mounted (any more): one line naming the fix
    bins = _binaries(request.server)
    _same_server(stored, profile.server, bins, request.server)
    settings = profile.workload.get("settings") or {}
    clients = int(settings.get("clients") or 8)
    here = store.tier(stored.here_tier_id) if stored.here_tier_id else None
    more = _picks_at(request.budgets, advice, profile, target, here)
    cells = tuple(_cells(advice, profile, request.naive, more))
    doc = _spec_doc(request, stored, profile.server, settings, profile.workload.get("result") or {},
                    slow_tier(request.slow, store, stored), target, cells)
    notes = list(advice.notes)
    notes += [f"{c.name} holds {human_size(c.bytes)}, more than the budget of {human_size(advice.budget_bytes)}"
              for c in cells[1:-1] if c.bytes > advice.budget_bytes and not c.name.startswith(AT_BUDGET)]
    notes += [f"the {p.name} picks nothing (no candidate that fits has a predicted saving): that cell is none's"
              for p in more if not p.keys]
    if advice.measured_wait <= 0:
        notes.append("the profile measured no I/O wait: every prediction is zero")
    return CheckPlan(stored, target, dict(profile.server), clients, cells, doc, tuple(notes), profile, here)


def _binaries(server: str | None) -> ServerBinaries:
    try:
        return binaries_for_server(server) if server else find_binaries(None)
    except InnotierError as exc:  # not installed, no server binary: their own one-line errors
        raise UsageError(str(exc)) from None


def _same_server(stored: StoredAdvice, measured: Mapping[str, Any], bins: ServerBinaries, server: str | None) -> None:
    flavor, version = str(measured.get("flavor")), Version.parse(str(measured.get("version")))
    if flavor != bins.flavor.value or version.series != bins.version.series:
        using = f"--server {server}" if server else "the host's server"
        raise UsageError(f"advice {stored.advice_id} was measured on {flavor} {version.series}, but {using} is "
                         f"{bins.flavor.value} {bins.version.series}; give --server with an installed "
                         f"{flavor}-{version.series} (`innotier server list`), or advise from a profile of this server")


def _kind(profile, key: str) -> str | None:
    try:
        return profile.candidate(key).kind
    except KeyError:
        return None


def slow_tier(slow: str | None, store: PlacementStore, stored: StoredAdvice) -> dict[str, Any]:
    """Where the files that stay live: --slow, else the --here tier of the advice (unless it is the disk
    $INNOTIER_HOME is on, the sweep's own home tier), else the home tier."""
    if slow:
        path = os.path.realpath(slow)
        if not os.path.isdir(path):
            raise UsageError(f"--slow {slow} is not a directory; give a directory on the slow tier (e.g. the mount "
                             "point of `innotier tiers create throttled ...`)")
        return {"kind": "path", "path": path}
    if stored.here_tier_id:
        here = store.tier(stored.here_tier_id).mountpoint
        if os.path.ismount(here) and mount_of(here).mountpoint != mount_of(innotier_home_existing()).mountpoint:
            return {"kind": "path", "path": here}
    return {"kind": "home"}


def innotier_home_existing() -> str:
    p = innotier_home()
    while not p.exists() and p != p.parent:
        p = p.parent
    return str(p)


def _placement(keys, profile) -> dict[str, str]:
    out: dict[str, str] = {DEFAULT_PLACEMENT: SLOW}
    for key in sorted(keys):
        kind = _kind(profile, key)
        if kind in COMPONENT_KINDS:
            out[kind] = FAST
        elif kind == "table":
            out[_table_key(key)] = FAST
        else:
            raise UsageError(f"the advice places {key} ({kind or 'not in its profile'}), which a sweep cell cannot "
                             "place on its own; advise again without it")
    return out


def _table_key(key: str) -> str:
    """The profile's ``schema.table`` as the golden copy's (the TPC-C tables are in TABLE_DATABASE there)."""
    _schema, _, table = key.partition(".")
    sweep_key = f"{TABLE_DATABASE}.{table}"
    if not is_table_key(sweep_key):
        raise UsageError(f"the advice places table {key}, which is not a TPC-C table ({', '.join(GOLDEN_TABLES)}); "
                         "the check runs the built-in TPC-C: advise from a TPC-C profile")
    return sweep_key


def _picks_at(budgets: tuple[int, ...], advice, profile, target: TierCost, here: TierCost | None) -> list[Pick]:
    """The advisor's pick at each further budget, priced as the stored advice was (same profile, tiers)."""
    out = []
    for budget in sorted(set(budgets)):
        if budget == advice.budget_bytes:
            raise UsageError(f"--budget {format_size(budget)} is the advice's own budget; give other budgets "
                             "(the advice's pick is a cell already)")
        pick = advise(profile, target, budget, here).pick  # its one-line refusals: too small, more than free
        out.append(Pick(f"{AT_BUDGET}{human_size(budget)}", pick.keys, pick.size_bytes, pick.saving, pick.low,
                        pick.high))
    return out


def _cells(advice, profile, naive: tuple[str, ...], more: list[Pick] = ()) -> list[CheckCell]:
    by_name = {p.name: p for p in advice.naive}
    unknown = [n for n in naive if n not in NAIVE]
    if unknown:
        raise UsageError(f"--naive {unknown[0]!r} is unknown; give {' or '.join(repr(n) for n in NAIVE)}")
    picks: list[Pick] = [Pick("none", (), 0, 0.0, None, None), advice.pick, *more]
    picks += [by_name[n] for n in naive if n in by_name and by_name[n].keys]
    everything = by_name.get("everything")
    out: list[CheckCell] = []
    for p in picks:
        placement = _placement(p.keys, profile)
        same = next((i for i, c in enumerate(out) if dict(c.placement) == placement), None)
        if same is not None:
            c = out[same]
            out[same] = CheckCell(f"{c.name} = {p.name}", c.keys, c.placement, c.bytes, c.predicted, c.low, c.high)
            continue
        out.append(CheckCell(p.name, p.keys, placement, p.size_bytes, p.saving, p.low, p.high))
    extra = {k: FAST for k in (everything.keys if everything else ()) if _kind(profile, k) == "tmpdir"}
    out.append(CheckCell("everything", everything.keys if everything else (), {DEFAULT_PLACEMENT: FAST, **extra},
                         everything.size_bytes if everything else 0, everything.saving if everything else 0.0,
                         everything.low if everything else None, everything.high if everything else None))
    return out


def _spec_doc(request: CheckRequest, stored: StoredAdvice, server: Mapping[str, Any], settings: Mapping[str, Any],
              result: Mapping[str, Any], slow: dict[str, Any], target: TierCost,
              cells: tuple[CheckCell, ...]) -> dict[str, Any]:
    warehouses = request.warehouses or result.get("warehouses") or settings.get("warehouses")
    if not warehouses:
        raise UsageError(f"the profile of advice {stored.advice_id} does not say how many warehouses it ran; give "
                         "--warehouses")
    buffer_pool = request.buffer_pool or server.get("innodb_buffer_pool_size")
    if not buffer_pool:
        raise UsageError(f"the profile of advice {stored.advice_id} does not record its buffer pool; give "
                         "--buffer-pool (the size it was measured with)")
    fixed: dict[str, Any] = {"page_size": format_size(int(server.get("page_size") or 16384)),
                             "clients": request.clients or int(settings.get("clients") or 8),
                             "buffer_pool_size": format_size(int(buffer_pool)) if str(buffer_pool).isdigit()
                             else str(buffer_pool), "options": dict(FIXED_OPTIONS)}
    if server.get("innodb_flush_log_at_trx_commit") is not None:
        fixed["flush_log_at_trx_commit"] = int(server["innodb_flush_log_at_trx_commit"])
    if request.server:
        fixed["server"] = request.server
    if request.blocks < 1:
        raise UsageError(f"--blocks {request.blocks} is not valid; give 1 or more (3 or more to decide anything)")
    return {
        "name": "placement-check-" + stored.advice_id.replace("_", "-")[-40:],
        "description": f"Advice {stored.advice_id} ({human_size(stored.advice.budget_bytes)} on "
                       f"{target.mountpoint}) checked by measurement: nothing moved, the advisor's pick"
                       + (f" (and at {', '.join(more)})" if (more := _more_budgets(cells)) else "")
                       + ", naive picks of the same budget, everything on the tier (issue 31, item 4).",
        "workload": {"driver": "builtin", "mode": settings.get("mode") or "procedures", "warehouses": int(warehouses),
                     "warmup": request.warmup, "duration": request.duration, "interval": request.interval},
        "repeats": request.blocks,
        "tiers": {SLOW: slow, FAST: {"kind": "path", "path": target.mountpoint}},
        "fixed": fixed,
        "axes": {"placement": [dict(c.placement) for c in cells]},
    }


# ---- plan -> execution -> result -------------------------------------------------------------------

def _more_budgets(cells: tuple[CheckCell, ...]) -> list[str]:
    """The further budgets' names, also of picks merged into another cell ("advisor = advisor at 8.0 MiB")."""
    return [part[len(AT_BUDGET):] for c in cells for part in c.name.split(" = ") if part.startswith(AT_BUDGET)]


def sweep_plan(plan: CheckPlan) -> Plan:
    """The sweep's own plan (validated: tiers, binaries, cells); printable with tuner.sweep.plan.print_plan."""
    return make_plan(plan.spec())


def execute(plan: CheckPlan, options: RunnerOptions) -> RunSummary:
    return Runner(sweep_plan(plan), options).run()


def result(plan: CheckPlan, results_path: str | None) -> CheckResult:
    """Predicted beside measured, from the sweep's stored cells (reads only the results store)."""
    spec = plan.spec()
    with PlacementStore(results_path) as store:
        cells = store.results.cells(spec.run_id)
    configs = configs_from(cells, spec.axes)
    also = head_to_head(plan)
    none = _key(plan.cells[0].placement)
    answered = [v for v in questions(configs, spec.axes, spec.target(), spec.exclude, spec.fixed, also)
                if v.num_configs and v.den_configs]
    verdicts = {_key(v.num_configs[0].settings["placement"]): v for v in answered
                if _key(v.den_configs[0].settings["placement"]) == none}
    by_cell = {_key(c.settings["placement"]): c for c in configs}
    every = plan.everything
    every_ratio = _ratio(verdicts.get(_key(every.placement)))
    network, why_not = queueing_model(plan, every_ratio)
    rows = []
    for c in plan.cells:
        cfg = by_cell.get(_key(c.placement))
        v = verdicts.get(_key(c.placement))
        ratio = 1.0 if c is plan.cells[0] and cfg and cfg.runs else _ratio(v)
        rows.append(CheckRow(
            name=c.name, keys=c.keys, bytes_advised=c.bytes, bytes_placed=_bytes_placed(cfg),
            predicted=c.predicted, predicted_low=c.low, predicted_high=c.high,
            predicted_share=c.predicted / every.predicted if every.predicted > 0 else None,
            predicted_ratio=closed_loop(plan.clients, c.predicted),
            calibrated_ratio=calibrated(c.predicted / every.predicted if every.predicted > 0 else None, every_ratio),
            queueing_ratio=None if network is None else network.ratio(c.keys if c is not every else network.keys()),
            tpmc=cfg.summary.mean if cfg and cfg.summary else None, measured_ratio=ratio,
            measured_low=v.ratio.low if v and v.ratio else None, measured_high=v.ratio.high if v and v.ratio else None,
            measured_state=("reference" if c is plan.cells[0] else
                            (v.ratio.state() if v and v.ratio else (v.missing if v else "not run"))),
            measured_share=((ratio - 1) / (every_ratio - 1) if ratio is not None and every_ratio is not None
                            and every_ratio > 1 else None),
            placed_where=_where(cfg, c, plan.target.mountpoint)))
    notes = list(plan.notes) + ([why_not] if why_not else [])
    if every.predicted <= 0:
        notes.append(NO_COUNTED_WAIT)
    blocks = max((r.block for r in cells), default=0)
    if blocks < 2:
        notes.append("one block: every measured gain is a single ratio without an interval; run --blocks 3 or more "
                     "to decide anything")
    pairs = tuple(_head_to_head_row(plan, v) for v in answered if _key(v.den_configs[0].settings["placement"]) != none)
    res = CheckResult(spec.run_id, plan.stored.advice_id, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      blocks, tuple(rows), tuple(notes), pairs, throughput_curve(plan, network))
    with PlacementStore(results_path) as store:
        store.put_check(res.run_id, res.advice_id, res.checked_at, res.to_dict())
    return res


def head_to_head(plan: CheckPlan) -> tuple[tuple[str, Any, Any], ...]:
    """The advisor's pick against the naive pick of the same budget, asked in the same family as every
    comparison with "none" (so the check's intervals all widen by one comparison, never by a look after the fact)."""
    advisor = next((c for c in plan.cells if c.name.split(" = ")[0] == "advisor"), None)
    naive = next((c for c in plan.cells if c.name == "largest tables"), None)
    if advisor is None or naive is None:
        return ()  # the two picks are one cell, or the naive pick was not asked
    return (("placement", dict(advisor.placement), dict(naive.placement)),)


def _head_to_head_row(plan: CheckPlan, v: Verdict) -> dict[str, Any]:
    name = lambda cfg: plan.cell_for(cfg.settings["placement"]).name  # noqa: E731
    return {"cell": name(v.num_configs[0]), "against": name(v.den_configs[0]), "ratio": _ratio(v),
            "low": v.ratio.low if v.ratio else None, "high": v.ratio.high if v.ratio else None,
            "state": v.ratio.state() if v.ratio else v.missing}


NO_COUNTED_WAIT = ("no calibrated prediction: the profile counted no I/O wait on the slow tier (everything is "
                   "predicted to save 0 s), so no pick has a share of it; measure while the workload reads from the "
                   "slow tier (data larger than the buffer pool, `placement measure`)")


def calibrated(share: float | None, everything: float | None) -> float | None:
    """1 / (1 - p (1 - 1/E)): the throughput ratio of a pick predicted to save the share p of the I/O wait, when
    moving everything measured E.

    A transaction's residence time R is what the clients cycle through; moving everything leaves R / E, so
    R (1 - 1/E) is what the fast tier can remove, including what the file waits do not count (locks held
    across slow reads, waits for free pages).  The pick is assumed to remove its share of that.  It uses one
    measured cell (everything) and predicts the others, which the closed-loop model cannot do where the
    counted wait is a fraction of what the slow tier costs (docs/placement.md has the run that showed it)."""
    if share is None or everything is None or everything <= 0:
        return None
    rest = 1 - share * (1 - 1 / everything)
    return 1 / rest if rest > 0 else None


def queueing_model(plan: CheckPlan, everything: float | None) -> tuple[queueing.QueueingModel | None, str | None]:
    """The queueing network of the advice's profile and tiers fitted to everything's measured ratio, or why not."""
    if plan.slow_cost is None or plan.profile is None:
        return None, "no queueing prediction: the advice has no cost of the slow tier (advise with --here TIER)"
    if everything is None:
        return None, "no queueing prediction: everything's cell has no measured ratio to fit the model to"
    if everything <= 1:
        return None, (f"no queueing prediction: everything measured {everything:.2f}x, no gain for the model to "
                      "fit (the slow tier is not what holds this workload back)")
    network = queueing.fit(plan.profile, plan.slow_cost, plan.target, plan.clients, everything)
    if network is None:
        return None, (f"no queueing prediction: the profile's I/O on these tiers cannot explain everything's "
                      f"{everything:.2f}x (no transaction rate in the profile, or the fast tier is not faster)")
    missing = [t.mountpoint for t in (plan.slow_cost, plan.target) if t.randread_iops is None]
    if missing:
        return network, (f"the queueing prediction takes {', '.join(missing)} to serve one operation at a time "
                         "(its cost was measured before capacity was): run `innotier placement tier` there again")
    return network, None


def throughput_curve(plan: CheckPlan, network: queueing.QueueingModel | None) -> tuple[dict[str, Any], ...]:
    """What the fast tier buys in throughput at each budget of the advice's curve: the advisor's pick there (from
    the same profile and tiers) priced by the fitted queueing model.  Empty without a model."""
    if network is None:
        return ()
    out = [{"budget": 0, "bytes": 0, "keys": [], "queueing_ratio": 1.0}]
    last = 0.0
    for budget, saving in plan.stored.advice.curve:
        if budget <= 0 or saving <= last:
            continue    # the same best saving as the budget before: the same pick, no new point
        last = saving
        try:
            pick = advise(plan.profile, plan.target, budget, plan.slow_cost).pick
        except InnotierError:   # below every candidate, or more than the tier holds: no pick at that budget
            continue
        if sorted(pick.keys) != out[-1]["keys"]:
            out.append({"budget": budget, "bytes": pick.size_bytes, "keys": sorted(pick.keys),
                        "queueing_ratio": network.ratio(pick.keys)})
    return tuple(out)


def curve_line(res: CheckResult) -> str | None:
    if not res.curve:
        return None
    return ("throughput against budget (the advisor's pick at each, queueing model): "
            + ", ".join(f"{human_size(p['budget'])} {p['queueing_ratio']:.2f}x" for p in res.curve))


def closed_loop(clients: int, saving: float) -> float | None:
    """C / (C - S): the throughput ratio if the saved wait was all in the clients' foreground."""
    return clients / (clients - saving) if 0 <= saving < clients else None


def _key(placement: Mapping[str, str]) -> str:
    return repr(sorted(dict(placement).items()))


def _ratio(v: Verdict | None) -> float | None:
    return v.ratio.ratio if v is not None and v.ratio is not None else None


def _bytes_placed(cfg) -> int | None:
    """Bytes the cell's first run put on the fast tier: the clone (datadir there) or the moved files."""
    if cfg is None or not cfg.runs:
        return None
    rec = cfg.runs[0]
    tiers = rec.tiers or {}
    if (tiers.get("placement") or {}).get(DEFAULT_PLACEMENT) == FAST:
        return int((rec.golden or {}).get("clone", {}).get("bytes") or 0)
    placed = sum(int(v.get("bytes") or 0) for v in (tiers.get("placed") or {}).values())
    return placed + sum(int(v.get("bytes") or 0) for v in (tiers.get("tables") or {}).values())


def _where(cfg, cell: CheckCell, fast: str) -> str:
    """'checked' when every run's server reported each placed file under the tier it was placed on."""
    if cfg is None or not cfg.runs:
        return "not run"
    problems = []
    for rec in cfg.runs:
        tiers, variables = rec.tiers or {}, rec.variables or {}
        datadir = os.path.realpath(str(variables.get("datadir") or ""))
        if datadir.startswith(os.path.realpath(fast).rstrip("/") + "/") != (cell.placement[DEFAULT_PLACEMENT] == FAST):
            problems.append(f"datadir: the server said {variables.get('datadir')}")
        for comp, info in (tiers.get("placed") or {}).items():
            said = variables.get(components.get(comp).variable)
            if said is None or os.path.realpath(said) != os.path.realpath(info["dir"]):
                problems.append(f"{comp}: the server said {said}, placed in {info['dir']}")
        for table, info in (tiers.get("tables_at_end") or {}).items():
            if not info.get("under"):
                problems.append(f"{table} at {info.get('path')}")
        wanted = [k for k in cell.placement if is_table_key(k) and cell.placement[k] == FAST
                  and cell.placement[DEFAULT_PLACEMENT] != FAST]
        missing = [k for k in wanted if k not in (tiers.get("tables_at_end") or {})]
        problems += [f"{k} not placed" for k in missing]
    return "; ".join(problems) or "checked"


# ---- for people ------------------------------------------------------------------------------------

CELL_COLUMNS = ["cell", "moves", "bytes", "predicted ms/s", "95% interval"]
RESULT_COLUMNS = ["cell", "bytes advised", "bytes placed", "predicted ms/s", "predicted share", "model x",
                  "calibrated x", "queueing x", "measured x", "interval", "measured share", "tpmC", "files", "state"]


def _ms(x: float | None) -> str:
    return "" if x is None else f"{1000 * x:.2f}"


def _pct(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{100 * x:.0f}%"


def _x(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}x"


def cell_rows(plan: CheckPlan) -> list[dict[str, Any]]:
    return [{"cell": c.name, "moves": ", ".join(k for k in c.placement if c.placement[k] == FAST) or "(nothing)",
             "bytes": human_size(c.bytes), "predicted ms/s": _ms(c.predicted),
             "95% interval": "" if c.low is None else f"[{_ms(c.low)}, {_ms(c.high)}]"} for c in plan.cells]


def result_rows(res: CheckResult) -> list[dict[str, Any]]:
    out = []
    for r in res.rows:
        out.append({"cell": r.name, "bytes advised": human_size(r.bytes_advised),
                    "bytes placed": "" if r.bytes_placed is None else human_size(r.bytes_placed),
                    "predicted ms/s": _ms(r.predicted), "predicted share": _pct(r.predicted_share),
                    "model x": _x(r.predicted_ratio), "calibrated x": _x(r.calibrated_ratio),
                    "queueing x": _x(r.queueing_ratio),
                    "measured x": _x(r.measured_ratio),
                    "interval": "" if r.measured_low is None else f"[{r.measured_low:.2f}, {r.measured_high:.2f}]",
                    "measured share": _pct(r.measured_share), "tpmC": "" if r.tpmc is None else f"{r.tpmc:,.0f}",
                    "files": r.placed_where, "state": r.measured_state})
    return out


def head_to_head_lines(res: CheckResult) -> list[str]:
    return [f"{p['cell']} over {p['against']}: " + ("not answered: " + str(p["state"]) if p["ratio"] is None else
            f"{p['ratio']:.2f}x" + ("" if p["low"] is None else f" [{p['low']:.2f}, {p['high']:.2f}]")
            + f", {p['state']}") for p in res.head_to_head]


def describe(plan: CheckPlan, echo: Callable[[str], None] = print) -> None:
    a = plan.stored.advice
    echo(f"advice {plan.stored.advice_id}: budget {human_size(a.budget_bytes)} on {plan.target.mountpoint} "
         f"({plan.target.kind}), profile {a.profile_id} ({plan.profile_server.get('flavor')} "
         f"{plan.profile_server.get('version')}, {plan.clients} clients)")
