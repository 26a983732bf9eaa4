"""Inside the lab VM: relocations onto a DAX ext4 (NVDIMM fsdax) and onto md RAID 10, with TPC-C W=1.

Lean for emulation (every byte copied and every CLI start costs seconds under TCG), yet every path runs:

- the whole datadir onto /mnt/pmem (real `mount -o dax`): the mover is SIGKILLed in the middle of the copy
  (INNOTIER_MOVE_CRASH_AT=COPY:mid) and `move resume` finishes it; the moved files carry statx DAX, every
  table's checksum equals the value from before, a short TPC-C run and the consistency checks pass;
- `persist` on that DAX tier: install (units verified) with a first consistent copy, commits after it,
  the server killed and the DAX file system lost (made anew), `persist restore`: exactly the synced state;
- the redo log onto /mnt/r10 (RAID 10 near=2 over four virtio disks): SIGKILL mid-copy and `move rollback`
  (the redo back where it was, checksums equal), then the move again to its end and TPC-C run + check;
- `tiers bench` on both tiers and the DCPMM-paper lint on the DAX mount.

One loaded W=1 datadir serves every test: the sweep's golden copy (tuner.sweep.golden, the key the
raid-level sweep's cells use), loaded into the image when it is built and cloned here with `cp -a`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import mvhelpers
from labhelpers import BIG_DISKS, cli, sh, slow_resync, wipe_md
from tuner.core import sandbox as sbx
from tuner.core.probe import file_is_dax
from tuner.core.sandbox import Sandbox, list_sandboxes
from tuner.core.server import inspect
from tuner.sweep import golden as golden_mod

PMEM, R10 = "/mnt/pmem", "/mnt/r10"


@pytest.fixture(scope="module")
def tiers():
    wipe_md(BIG_DISKS)
    with slow_resync():
        cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", PMEM)
        cli("tiers", "create", "raid", "--level", "10", "--devices", *BIG_DISKS, "--name", "r10", "--chunk", "64K",
            "--mount", R10)
        yield
        _destroy_sandboxes()
        cli("tiers", "destroy", PMEM, "--force", check=False)
        cli("tiers", "destroy", R10, "--force", check=False)
        wipe_md(BIG_DISKS)


@pytest.fixture(scope="module")
def golden():
    bins = sbx.find_binaries(None)
    key = golden_mod.key_of(bins, "16k", 1)
    # loaded natively when the image was built (datadir_mover.lab.image.GOLDEN_SCRIPT): never under emulation
    assert golden_mod.is_present(key), f"the lab image carries no golden copy {key.id}; rebuild it (lab build --force)"
    return key, bins


def _destroy_sandboxes(keep: str | None = None) -> None:
    for sb in list_sandboxes():
        if sb.name != keep:
            sb.destroy(force=True)


def _clone(name: str, golden) -> Sandbox:
    """A running sandbox on a plain copy of the golden datadir (the golden copy itself was verified)."""
    key, bins = golden
    data = sbx.sandboxes_dir() / name / "data"
    data.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(key.dir / "data"), str(data)], check=True)
    sb = golden_mod.adopt_sandbox(name, key, data, bins)
    sb.start()
    return sb


def _apply(sandbox: str, component: str, to: str, env: dict | None = None, check: bool = True):
    proc = cli("move", "apply", component, "--sandbox", sandbox, "--to", to, "--yes", "--json", check=check,
               env=env)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def _crash_mid_copy(sandbox: str, component: str, to: str) -> str:
    """`move apply` SIGKILLed in the middle of its copy; returns the id of the move left open."""
    proc, _ = _apply(sandbox, component, to, env={"INNOTIER_MOVE_CRASH_AT": "COPY:mid"}, check=False)
    assert proc.returncode in (-9, 137), (proc.returncode, proc.stderr)
    status = json.loads(cli("move", "status", "--json").stdout)
    open_moves = [m for m in status if m.get("phase") == "open"]
    assert len(open_moves) == 1, status
    return open_moves[0].get("move_id") or open_moves[0].get("id")


def _running(name: str) -> Sandbox:
    sb = Sandbox.load(name)
    if sb.state().name != "RUNNING":
        sb.start()
    return sb


def _tpcc_run_and_check(sandbox: str) -> None:
    cli("tpcc", "run", "--sandbox", sandbox, "--clients", "2", "--warmup", "0", "--duration", "3",
        "--interval", "3")
    cli("tpcc", "check", "--sandbox", sandbox)


def test_datadir_onto_dax_sigkill_mid_copy_then_resume_then_tpcc(tiers, golden):
    sb = _clone("lab-dax", golden)
    before = mvhelpers.checksums(sb.connection_spec())
    move_id = _crash_mid_copy("lab-dax", "datadir", f"{PMEM}/data")
    result = json.loads(cli("move", "resume", "--id", move_id, "--json").stdout)
    assert result["phase"] == "committed", result
    sb = _running("lab-dax")
    assert inspect(sb.connection_spec()).datadir.rstrip("/") == f"{PMEM}/data"
    ibdata = Path(PMEM, "data", "ibdata1")
    assert file_is_dax(str(ibdata)) is True               # statx STATX_ATTR_DAX on the moved file
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _tpcc_run_and_check("lab-dax")


def test_persist_on_the_dax_tier_restores_the_last_consistent_copy(tiers, golden, tmp_path):
    sb = _running("lab-dax")                              # its datadir is on the DAX tier since the test above
    spec = sb.connection_spec()
    backing = "/root/persist-dax"                         # the root disk: another file system than the tier
    out = json.loads(cli("persist", "install", "--sandbox", "lab-dax", "--tier", PMEM, "--backing", backing,
                         "--interval", "5m", "--unit-dir", str(tmp_path / "units"), "--first-sync",
                         "--json").stdout)
    assert out["verified_with"] == "systemd-analyze verify" and len(out["written"]) == 3
    assert out["first_sync"]["method"] == "mariadb-backup"
    synced = mvhelpers.checksums(spec)
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE after_sync")             # committed after the copy: lost with the tier
    cur.execute("SHOW DATABASES LIKE 'after_sync'")
    assert cur.fetchall() == [("after_sync",)]
    conn.close()
    sb.stop("kill")                                       # power loss
    device = next(line.split()[0] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1] == PMEM)
    sh("umount", PMEM)                                    # the DAX file system is lost: made anew, empty
    sh("mkfs.ext4", "-q", "-F", "-b", "4096", device)
    sh("mount", "-o", "dax", device, PMEM)
    assert not (Path(PMEM) / "data").exists()
    restored = json.loads(cli("persist", "restore", "--backing", backing, "--if-needed", "--json").stdout)
    assert restored["restored"] is True and restored["generation"] == out["first_sync"]["id"], restored
    assert file_is_dax(str(Path(PMEM, "data", "ibdata1"))) is True
    sb.start(recover=True)
    # every table equals the synced state, which is the state the TPC-C checks passed on in the test above
    # (nothing wrote between that check and the sync): no second round of checks under emulation
    assert mvhelpers.checksums(spec) == synced
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("SHOW DATABASES LIKE 'after_sync'")
    assert cur.fetchall() == []
    conn.close()
    _destroy_sandboxes()                                  # one server at a time: the guest has 1.5 GiB


def test_redo_onto_raid10_sigkill_then_rollback_then_move_and_tpcc(tiers, golden):
    sb = _clone("lab-r10", golden)
    spec = sb.connection_spec()
    before = mvhelpers.checksums(spec)
    old_redo = inspect(spec).datadir.rstrip("/")
    move_id = _crash_mid_copy("lab-r10", "redo", f"{R10}/redo")
    cli("move", "rollback", "--id", move_id, "--yes", "--json")
    sb = _running("lab-r10")
    assert Path(old_redo, "ib_logfile0").exists()
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _, result = _apply("lab-r10", "redo", f"{R10}/redo")
    assert result["phase"] == "committed", result
    assert any(p.name.startswith("ib_logfile") for p in Path(R10, "redo").iterdir())
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _tpcc_run_and_check("lab-r10")
    _destroy_sandboxes()


def test_tiers_bench_on_dax_and_raid10(tiers):
    dax = json.loads(cli("tiers", "bench", PMEM, "--size", "16M", "--runtime", "1", "--json").stdout)
    assert dax["tier"]["kind"] == "dcpmm-fsdax" and dax["tier"]["dax"] is True
    assert {j["name"] for j in dax["jobs"]} and all(j["iops"] > 0 for j in dax["jobs"])
    r10 = json.loads(cli("tiers", "bench", R10, "--size", "16M", "--runtime", "1", "--json").stdout)
    assert r10["tier"]["kind"] == "md-raid"
    assert r10["raid"]["level"] == 10 and r10["raid"]["devices"] == 4, r10["raid"]


def test_profile_lint_on_the_dax_mount_flags_the_papers_harmful_settings(tiers, tmp_path):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\ninnodb_page_size=16k\ninnodb_doublewrite=0\n"
                   "innodb_flush_method=O_DIRECT_NO_FSYNC\n")
    out = json.loads(cli("profile", "lint", str(cnf), "--flavor", "mysql-8.0", "--tier", PMEM, "--json",
                         check=False).stdout)
    flagged = {f["option"] for f in out["findings"]}
    assert {"innodb_doublewrite", "innodb_page_size", "innodb_flush_method"} <= flagged, out
