"""Where a cell's files go: the tiers a sweep uses, and placing components of a cloned datadir on them.

Tiers (``TierSession``): a ``home`` tier is a directory under $INNOTIER_HOME, a ``path`` tier an
existing directory; ``tmpfs`` and ``zram`` tiers are created with the tiers code
(``datadir_mover.tiers``: the provider's ``plan_create`` + ``apply_plan``, the same steps
``innotier tiers create`` runs) on a mount point under ``$INNOTIER_HOME/mnt/`` and destroyed with the
provider's ``destroy_steps`` when the sweep ends.  A mount left behind by a runner that was killed is
recognized (same mount point, same kind) and reused.

md RAID tiers are provisioned per cell: the arrays of a RAID-level sweep share their member devices, so
each cell that uses one gets a fresh array of its tier's level over the named devices (the tiers code's
``RaidCreate`` plan: ``mdadm --create``, a stripe-aligned mkfs, mount; a failed step undoes the ones
done), runs on it, and the array is torn down after the cell (unmount, ``mdadm --stop``, the members'
superblocks zeroed so the next cell's array can be created on them).  Only superblocks of the sweep's own
arrays are ever zeroed; devices holding anything else are refused by ``mdadm --create`` itself.

pmem tiers are provisioned per cell too: the cells of a file-system sweep share one NVDIMM namespace, so
each cell makes its tier's file system on it anew (the tiers code's ``PmemCreate`` plan: the namespace
created in the region if it has none, mkfs, mount with or without ``-o dax``, statx checks that DAX is or
is not in effect) and unmounts it after the cell.  THE NAMESPACE'S CONTENTS ARE WIPED by every cell's mkfs.

Components (``place_components``): the cell's datadir is cloned straight onto its tier (the clone is
the copy).  A component placed on another tier (redo, ibdata, undo, tmpdir) is moved with the
relocation code's own pieces -- ``components.top_names`` (which files are the component's),
``copy.walk`` + ``copy.copy_tree`` (verified, durable copy) and ``placement.with_option`` (the
``50-innotier-placement.cnf`` drop-in) -- rather than its journaled online executor: the server is
stopped and the datadir is a disposable clone of a verified golden copy, so there is nothing to
journal or roll back.  The originals in the clone are removed only after the copy verified.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner.core.durable import write_atomic
from tuner.core.errors import InnotierError, SweepError
from tuner.core.paths import innotier_home
from tuner.core.sandbox import Sandbox
from tuner.sweep.spec import DEFAULT_PLACEMENT, TierSpec, is_table_key
from datadir_mover.tiers.detect import tier_for_path
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.registry import provider_for_tier
from datadir_mover.tiers.base import split_options
from datadir_mover.tiers.plan import Plan, apply_plan, run_argv
from datadir_mover.tiers.provision import plan_create
from datadir_mover.tiers.requests import PmemCreate, RaidCreate, RamdiskCreate, ZramCreate
from datadir_mover.move import components, placement as placement_file
from datadir_mover.move.copy import copy_tree, walk
from tuner.core.server import model_from_variables

PLACEMENT_DROPIN = "50-innotier-placement.cnf"


def _tier_facts(path: str) -> dict[str, Any]:
    try:
        return tier_for_path(path).to_dict()
    except InnotierError as exc:
        return {"error": str(exc)}


@dataclass
class ProvidedTier:
    spec: TierSpec
    root: Path  # where the sweep's cells put their files on this tier
    mountpoint: Path | None = None  # provisioned tiers
    created: bool = False  # this session mounted it (and destroys it at close)
    facts: dict[str, Any] = field(default_factory=dict)
    per_cell: bool = False  # md, pmem: built for each cell that uses it, torn down after the cell


class TierSession:
    """Provides the tiers a run uses; provisions tmpfs/zram and tears them down at ``close()``."""

    def __init__(self, run_id: str, tiers: dict[str, TierSpec], echo: Callable[[str], None] | None = None) -> None:
        self.run_id = run_id
        self.specs = tiers
        self.echo = echo or (lambda _m: None)
        self.provided: dict[str, ProvidedTier] = {}

    def open(self, names: list[str]) -> None:
        try:
            for name in names:
                self.provided[name] = self._provide(self.specs[name])
        except BaseException:
            self.close()
            raise

    def root(self, name: str) -> Path:
        return self.provided[name].root

    def facts(self, name: str) -> dict[str, Any]:
        t = self.provided[name]
        if not t.facts:
            t.facts = _tier_facts(str(t.root))
        return t.facts

    def _provide(self, t: TierSpec) -> ProvidedTier:
        if t.kind == "home":
            root = innotier_home() / "sweeps" / self.run_id / "tiers" / t.name
            root.mkdir(parents=True, exist_ok=True)
            return ProvidedTier(t, root)
        if t.kind == "path":
            root = Path(t.path) / f"innotier-sweep-{self.run_id}"
            root.mkdir(parents=True, exist_ok=True)
            return ProvidedTier(t, root)
        if t.per_cell:
            mountpoint = tier_mountpoint(self.run_id, t.name)
            tier = ProvidedTier(t, mountpoint / "cells", mountpoint=mountpoint, per_cell=True)
            # a tier left by a runner that was killed during a cell: its cell is disposable, start afresh
            _teardown_per_cell(tier, self.echo)
            return tier
        mountpoint = tier_mountpoint(self.run_id, t.name)
        created = False
        if not _is_mount(mountpoint):
            self.echo(f"creating tier {t.describe()} on {mountpoint}")
            _create_tier(t, mountpoint, self.echo)
            created = True
        else:
            self.echo(f"reusing tier {t.name} mounted on {mountpoint} by an earlier, interrupted run")
            created = True  # ours (named for this run): destroy it at the end
        root = mountpoint / "cells"
        root.mkdir(exist_ok=True)
        return ProvidedTier(t, root, mountpoint=mountpoint, created=created)

    def open_cell(self, names: list[str]) -> None:
        """Build the per-cell tiers (md arrays, pmem file systems) ``names`` holds; another cell's are torn down
        first (they may share the devices)."""
        for name, t in self.provided.items():
            if t.per_cell and t.created and name not in names:
                self.close_cell()
                break
        for name in names:
            t = self.provided[name]
            if not t.per_cell or t.created:
                continue
            self.echo(f"creating tier {t.spec.describe()} on {t.mountpoint} for this cell")
            _create_per_cell(t.spec, t.mountpoint)
            t.created = True
            t.facts = {}  # a new array: its facts are read again
            t.root.mkdir(exist_ok=True)

    def close_cell(self) -> list[str]:
        """Tear down the per-cell tiers built for the cell that ended; returns problems (never raises)."""
        problems = []
        for name, t in self.provided.items():
            if t.per_cell and t.created:
                try:
                    self.echo(f"destroying tier {name} ({t.mountpoint}) after the cell")
                    _teardown_per_cell(t, self.echo)
                except Exception as exc:  # keep tearing down the others
                    problems.append(f"tier {name}: {exc}")
                t.created = False
        return problems

    def close(self) -> list[str]:
        """Destroy the tiers this session created; returns problems (never raises)."""
        problems = self.close_cell()
        for name, t in list(self.provided.items()):
            if t.per_cell:
                pass  # torn down by close_cell above
            elif t.created and t.mountpoint is not None:
                try:
                    self.echo(f"destroying tier {name} ({t.mountpoint})")
                    destroy_tier(t.mountpoint, self.echo)
                except Exception as exc:  # keep tearing down the others
                    problems.append(f"tier {name}: {exc}")
            elif t.spec.kind in ("home", "path"):
                shutil.rmtree(t.root, ignore_errors=True)
            self.provided.pop(name, None)
        return problems


def _is_mount(p: Path) -> bool:
    return p.exists() and os.path.ismount(p)


def tier_mountpoint(run_id: str, tier: str) -> Path:
    return innotier_home() / "mnt" / f"{run_id}-{tier}"


def _create_plan(t: TierSpec, mountpoint: Path):
    """The tiers code's own creation plan for a tmpfs/ramfs/zram tier (side-effect free)."""
    options = tuple(split_options(t.mount_options))
    if t.kind in ("tmpfs", "ramfs"):
        request = RamdiskCreate(size_bytes=t.size or 0, mount=str(mountpoint), fs=t.kind, options=options)
    elif t.kind == "zram":
        request = ZramCreate(size_bytes=t.size or 0, mount=str(mountpoint), fs=t.fs or "ext4", options=options)
    else:
        raise SweepError(f"tier {t.name}: kind {t.kind} cannot be created by a sweep")
    try:
        return plan_create(request, Host())
    except InnotierError as exc:
        raise SweepError(f"tier {t.name}: {exc}") from None


def provision_blocker(t: TierSpec, run_id: str) -> str | None:
    """Why the tiers code would refuse to create this tier here (plan time), or None."""
    mountpoint = tier_mountpoint(run_id, t.name)
    if _is_mount(mountpoint):
        return None  # left by an interrupted run of this sweep: reused
    plan = _create_plan(t, mountpoint)
    return plan.blockers[0] if plan.blockers else None


def _create_tier(t: TierSpec, mountpoint: Path, echo: Callable[[str], None]) -> None:
    plan = _create_plan(t, mountpoint)
    try:
        apply_plan(plan, echo=None)
    except InnotierError as exc:
        raise SweepError(f"tier {t.name}: {exc}") from None


def md_array_name(t: TierSpec) -> str:
    """The sweep's name for the array of md tier ``t`` (/dev/md/NAME; mdadm keeps it in the superblocks)."""
    return "innotier-sw-" + re.sub(r"[^\w.-]", "-", t.name)[:16]


def md_request(t: TierSpec, mountpoint: Path) -> RaidCreate:
    return RaidCreate(level=int(t.level or 0), devices=tuple(t.device_paths), name=md_array_name(t),
                      fs=t.fs or "ext4", mount=str(mountpoint), options=tuple(split_options(t.mount_options)))


def pmem_request(t: TierSpec, mountpoint: Path) -> PmemCreate:
    """The tiers code's request for a pmem tier: its region's NVDIMM namespace, with or without DAX."""
    return PmemCreate(mount=str(mountpoint), source="nvdimm", region=t.region or "region0", size_bytes=t.size,
                      fs=t.fs or "ext4", options=tuple(split_options(t.mount_options)), dax=bool(t.dax))


def _create_per_cell(t: TierSpec, mountpoint: Path) -> None:
    if t.kind == "md":
        _create_md(t, mountpoint)
        return
    try:
        apply_plan(plan_create(pmem_request(t, mountpoint), Host()), echo=None)
    except InnotierError as exc:
        raise SweepError(f"tier {t.name}: {exc}") from None


def _teardown_per_cell(tier: ProvidedTier, echo: Callable[[str], None]) -> None:
    if tier.spec.kind == "md":
        _teardown_md(tier, echo)
    elif tier.mountpoint is not None and _is_mount(tier.mountpoint):
        destroy_tier(tier.mountpoint, echo)   # the namespace stays for the next cell's mkfs


def _create_md(t: TierSpec, mountpoint: Path) -> None:
    """A fresh array for one cell with the tiers code's own plan (undone step by step if a step fails)."""
    if not t.device_paths:
        raise SweepError(f"tier {t.name} (md) names no member devices; list them: devices: [/dev/sdb, /dev/sdc, ...]")
    _zero_our_superblocks(t)   # left by a runner killed between stopping an array and zeroing its members
    try:
        plan = plan_create(md_request(t, mountpoint), Host())
        apply_plan(plan, echo=None)
    except InnotierError as exc:
        raise SweepError(f"tier {t.name}: {exc}") from None


def _teardown_md(tier: ProvidedTier, echo: Callable[[str], None]) -> None:
    """Unmount and stop the cell's array (the tiers code's destroy steps), then zero its members' superblocks."""
    t = tier.spec
    if tier.mountpoint is not None and _is_mount(tier.mountpoint):
        destroy_tier(tier.mountpoint, echo)
    md = Path("/dev/md") / md_array_name(t)
    if md.exists() and Path("/sys/block", os.path.basename(os.path.realpath(md)), "md").exists():
        run_argv(["mdadm", "--stop", str(md)])   # assembled but not mounted
    _zero_our_superblocks(t)


def _zero_our_superblocks(t: TierSpec) -> None:
    """Zero the md superblock of each member that holds one of THIS sweep's arrays, and no other."""
    ours = [d for d in t.device_paths if _md_name_on(d).split(":")[-1] == md_array_name(t)]
    if ours:
        run_argv(["mdadm", "--zero-superblock", *ours])


def _md_name_on(device: str) -> str:
    """MD_NAME from ``mdadm --examine --export`` ("host:name"), or "" when the device has no md superblock."""
    try:
        out = subprocess.run(["mdadm", "--examine", "--export", device], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return next((ln.split("=", 1)[1] for ln in out.splitlines() if ln.startswith("MD_NAME=")), "")


def destroy_tier(mountpoint: Path, echo: Callable[[str], None] | None = None) -> None:
    """Unmount (and for zram reset and remove) a tier this sweep created, with the tiers code's own steps."""
    host = Host()
    tier = tier_for_path(str(mountpoint))
    if os.path.realpath(tier.mountpoint or "") != os.path.realpath(mountpoint):
        return  # not mounted any more

    provider = provider_for_tier(tier)
    plan = Plan(title=f"destroy the tier on {mountpoint}", steps=provider.destroy_steps(tier, host))
    apply_plan(plan, echo=None)
    try:
        mountpoint.rmdir()
    except OSError:
        pass


# ---------------------------------------------------------------------------
# Cells


def cell_dir(session: TierSession, tier: str, sandbox_name: str) -> Path:
    return session.root(tier) / sandbox_name


def clear_cell_dirs(session: TierSession, sandbox_name: str) -> None:
    """Remove what an earlier (interrupted) attempt of a cell left on any tier: disposable clones."""
    for name in session.provided:
        p = cell_dir(session, name, sandbox_name)
        if p.exists():
            shutil.rmtree(p)


def place_components(sb: Sandbox, placement: dict[str, str], session: TierSession,
                     options: dict[str, str] | None = None) -> dict[str, Any]:
    """Move the components placed off the datadir's tier out of the (stopped, cloned) datadir.

    Returns {component: {"tier", "dir", "files", "bytes"}} and writes the placement drop-in.  Single tables
    (``tpcc.stock``) are placed later, by the started server (tuner/sweep/table_placement.py).
    """
    base_tier = placement[DEFAULT_PLACEMENT]
    moves = {c: t for c, t in placement.items() if c != DEFAULT_PLACEMENT and t != base_tier and not is_table_key(c)}
    if not moves:
        return {}
    model = model_from_variables({**_variables_of(sb), **(options or {})}, sandbox=sb.name)
    dropin = sb.conf_d / PLACEMENT_DROPIN
    text = dropin.read_text() if dropin.exists() else None
    done: dict[str, Any] = {}
    for comp, tier in sorted(moves.items()):
        try:
            components.check_supported(comp, model)
        except InnotierError as exc:
            raise SweepError(f"placement of {comp}: {exc}") from None
        info = components.get(comp)
        target = cell_dir(session, tier, sb.name) / comp
        target.mkdir(parents=True, exist_ok=True)
        src_dir = components.source_dir(comp, model)
        names = components.top_names(comp, model, src_dir) if info.copies_files else []
        missing = [n for n in components.expected_names(comp, model) if n not in names]
        if missing:
            raise SweepError(f"placement of {comp}: {', '.join(missing)} not found in the clone at {src_dir}; "
                             "the golden copy is incomplete: delete it so it is rebuilt")
        nbytes = 0
        if names:
            entries = walk(src_dir, top_names=names)
            manifest, stats = copy_tree(src_dir, target, entries, verify=True)
            nbytes = stats.bytes_copied
            for n in names:  # the clone's originals, now that a verified copy exists
                p = Path(src_dir) / n
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        text = placement_file.with_option(text, info.variable, str(target))
        done[comp] = {"tier": tier, "dir": str(target), "files": names, "bytes": nbytes}
    write_atomic(dropin, text or "", mode=0o644)
    return done


def _variables_of(sb: Sandbox) -> dict[str, str]:
    """What the server model needs to know about a stopped sandbox: its datadir and version."""
    return {"datadir": sb.datadir, "version": sb.version_string, "version_comment": sb.version_string,
            "innodb_page_size": str(sb.page_size), "tmpdir": str(sb.tmpdir)}
