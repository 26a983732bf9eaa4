"""Inside the lab VM: the shipped `raid-level` and `dcpmm-filesystems` sweeps run (scaled down).

The spec is the shipped tuner/sweep/specs/raid-level.yaml with only its scale changed: the VM's four
larger virtual disks for the paper's NVMe devices, one warehouse, seconds instead of minutes, one block.
Every cell builds its own md array of its level over those disks (mdadm --create, stripe-aligned ext4,
mount), runs TPC-C on a clone of the golden datadir there, passes the consistency checks, and the array is
torn down after the cell.  Each cell's recorded tier facts must name the array of its level.  The report is a
function of the results store alone (tuner.sweep.report.build_report: no device, no server), so the store comes
back through the share and the host builds the report from it with `innotier sweep report` and checks a row per
level (tests/lab/test_lab_vm.py): plotting under emulation cost the sweep's group more than a cell's check.
Emulated disks: the tpmC figures prove the path, not the speed.

The `dcpmm-filesystems` spec (the DCPMM paper's file-system matrix) runs its five cells on the VM's first
emulated NVDIMM (region0, real nd_pmem / fsdax drivers): ext4, xfs and f2fs mounted without DAX, ext4 and xfs
with it, each made anew for its cell, `tiers bench` on it, TPC-C on a clone there, the checks, unmounted after
the cell.  Scaled down like the raid-level sweep (one warehouse, seconds, one block, a 4M one-second bench):
under TCG its figures say nothing (the spec says so); the test proves that every cell runs on the file system
and DAX mode its tier names and that its checks pass, not a ranking.

Two levels by default (5 and 10: parity and striped mirrors, the two write paths that differ most; every
level, RAID 0 included, is built and checked by the device tests), to fit the CI budget under emulation
(about a minute per cell): two cells prove the sweep builds a different array per cell and tears each
down; LAB_SWEEP_LEVELS=0,1,5,6,10 runs all five.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import yaml

from labhelpers import BIG_DISKS, OUT, cli, note_time, slow_resync, wipe_md
from datadir_mover.lab.image import LAB_REDO_OPTION
from tuner.sweep.results import ResultsStore
from tuner.sweep.spec import SPECS_DIR

LEVELS = [lv.strip() for lv in os.environ.get("LAB_SWEEP_LEVELS", "5,10").split(",") if lv.strip()]


def scaled_down_spec(target: Path) -> Path:
    doc = yaml.safe_load((SPECS_DIR / "raid-level.yaml").read_text())
    for tier in doc["tiers"].values():
        tier["devices"] = list(BIG_DISKS)
        tier["size"] = "384M"                 # at least a W=1 datadir; RAID 1 over 512M disks holds 512M
    doc["workload"].update(warehouses=1, warmup=0, duration=3, interval=3)
    doc["repeats"] = 1
    doc.pop("stop", None)
    # the golden copy's redo log size (datadir_mover.lab.image.LAB_REDO_OPTION): a cell's server need not resize it
    doc["fixed"].update(clients=2, buffer_pool_size="128M", log_file_size=LAB_REDO_OPTION["innodb_log_file_size"])
    doc["axes"]["placement"] = [f"raid{lv}" for lv in LEVELS]
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


FS_MATRIX = {"ext4": ("ext4", False), "xfs": ("xfs", False), "f2fs": ("f2fs", False),
             "ext4-dax": ("ext4", True), "xfs-dax": ("xfs", True)}


def scaled_down_fs_matrix(target: Path) -> Path:
    doc = yaml.safe_load((SPECS_DIR / "dcpmm-filesystems.yaml").read_text())
    doc["workload"].update(warehouses=1, warmup=0, duration=3, interval=3)
    doc["repeats"] = 1
    doc.pop("stop", None)
    doc["tier_bench"] = {"size": "4M", "runtime": 1}
    doc["fixed"].update(clients=2, buffer_pool_size="128M", log_file_size=LAB_REDO_OPTION["innodb_log_file_size"])
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


def _pmem_mounts() -> list[str]:
    return [ln for ln in Path("/proc/mounts").read_text().splitlines() if ln.startswith("/dev/pmem")]


def test_dcpmm_filesystem_matrix_runs_every_cell_on_its_own_file_system(tmp_path):
    assert sorted(doc_tiers := yaml.safe_load((SPECS_DIR / "dcpmm-filesystems.yaml").read_text())["tiers"]) == \
        sorted(FS_MATRIX), doc_tiers
    assert not _pmem_mounts()   # the moves group unmounted its DAX tier: the namespace is free
    spec = scaled_down_fs_matrix(tmp_path / "dcpmm-filesystems-lab.yaml")
    results = tmp_path / "results.db"
    proc = cli("sweep", "run", str(spec), "--results", str(results), "--no-metrics", "--no-pt-summary", "--json")
    out = json.loads(proc.stdout)
    assert out["failed"] == [] and out["ran"] == len(FS_MATRIX), out
    with ResultsStore(str(results), create=False) as store:
        cells = store.cells(out["run_id"])
    assert sorted(c.settings["placement"]["datadir"] for c in cells) == sorted(FS_MATRIX)
    for c in cells:
        for phase, seconds in c.phases.items():
            note_time(f"fs-matrix cell {c.label}: {phase}", seconds)
        tier = c.settings["placement"]["datadir"]
        fs, dax = FS_MATRIX[tier]
        assert c.status == "ok" and c.check_ok is True and c.tpmc is not None, (tier, c.failure)
        facts = c.tiers["facts"][tier]     # what the kernel said while the cell's server ran on it
        assert facts["kind"] == "dcpmm-fsdax" and facts["fs"] == fs and facts["dax"] is dax, facts
        assert c.tiers["datadir"]["mountpoint"] == facts["mountpoint"]   # the datadir really lived there
        bench = c.tiers["bench"][tier]     # `tiers bench` of the cell's fresh file system
        assert bench["tier"]["fs"] == fs and bench["tier"]["dax"] is dax, bench
        assert len(bench["jobs"]) == 4 and all(j["iops"] > 0 for j in bench["jobs"]), bench
    assert not _pmem_mounts()   # every cell's file system was unmounted after it


def _hand_back(results: Path, run_id: str, scratch: Path) -> None:
    """The run's results store into the share (one consistent file: the store is in WAL mode, so SQLite's backup
    writes it locally first; the share then gets a plain copy) and what the host's report checks."""
    copy = scratch / "results-backup.db"
    src, dst = sqlite3.connect(results), sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    target = OUT / "sweep"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(copy, target / "results.db")
    (target / "run.json").write_text(json.dumps({"run_id": run_id, "levels": LEVELS}))


def test_raid_level_sweep_builds_each_array_and_reports(tmp_path):
    wipe_md(BIG_DISKS)
    spec = scaled_down_spec(tmp_path / "raid-level-lab.yaml")
    results = tmp_path / "results.db"
    with slow_resync():
        proc = cli("sweep", "run", str(spec), "--results", str(results), "--no-metrics", "--no-pt-summary",
                   "--json")
    out = json.loads(proc.stdout)
    assert out["failed"] == [] and out["ran"] == len(LEVELS), out
    with ResultsStore(str(results), create=False) as store:
        cells = store.cells(out["run_id"])
    assert sorted(c.label for c in cells) == sorted(c.label for c in cells if c.status == "ok") and cells
    for c in cells:
        for phase, seconds in c.phases.items():   # where a cell's time goes: times.log, printed by the host
            note_time(f"sweep cell {c.label}: {phase}", seconds)
        tier = c.settings["placement"]["datadir"]
        facts = c.tiers["facts"][tier]
        assert facts["kind"] == "md-raid" and facts["raid"]["level"] == f"raid{tier[4:]}", facts
        assert sorted(facts["raid"]["members"]) == [d[5:] for d in BIG_DISKS], facts
        assert c.check_ok is True
    # every array was torn down after its cell, and the members are free for the next user
    assert not any(line.startswith("md") for line in Path("/proc/mdstat").read_text().splitlines())
    _hand_back(results, out["run_id"], tmp_path)
