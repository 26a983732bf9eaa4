"""Inside the lab VM: relocations onto a DAX ext4 (NVDIMM fsdax) and onto md RAID 10, with TPC-C W=1.

The whole datadir moves onto /mnt/pmem (real `mount -o dax`, statx DAX on the moved files) and the redo log
onto /mnt/r10 (RAID 10 near=2 over four virtio disks); after each, a short TPC-C run and the consistency
checks pass and every table's checksum equals the value from before.  A SIGKILL in the middle of the copy
(INNOTIER_MOVE_CRASH_AT=COPY:mid) is resumed on one tier and rolled back on the other.  Then the tier
bench and the DCPMM-paper lint on the DAX mount.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mvhelpers
from tuner.core.probe import file_is_dax
from tuner.core.sandbox import Sandbox, list_sandboxes
from tuner.core.server import inspect
from labhelpers import DISKS, cli, wipe_md

PMEM, R10 = "/mnt/pmem", "/mnt/r10"


@pytest.fixture(scope="module")
def tiers():
    wipe_md()
    cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", PMEM)
    cli("tiers", "create", "raid", "--level", "10", "--devices", *DISKS, "--name", "r10", "--chunk", "64K",
        "--mount", R10)
    yield
    for sb in list_sandboxes():
        sb.destroy(force=True)
    cli("tiers", "destroy", PMEM, "--force", check=False)
    cli("tiers", "destroy", R10, "--force", check=False)
    wipe_md()


@pytest.fixture(autouse=True)
def one_server_at_a_time():
    """Destroy each test's sandboxes when it ends: the guest has 1.5 GiB and two emulated CPUs."""
    yield
    for sb in list_sandboxes():
        if sb.name != mvhelpers.GOLDEN:
            try:
                sb.destroy(force=True)
            except ProcessLookupError:   # the server exited while destroy read /proc/PID (sandbox._pid_alive race)
                sb.destroy(force=True)


def _apply(sandbox: str, component: str, to: str, env: dict | None = None, check: bool = True):
    proc = cli("move", "apply", component, "--sandbox", sandbox, "--to", to, "--yes", "--json", check=check,
               env=env)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def _tpcc_run_and_check(sandbox: str) -> None:
    cli("tpcc", "run", "--sandbox", sandbox, "--clients", "2", "--warmup", "0", "--duration", "5")
    cli("tpcc", "check", "--sandbox", sandbox)


def test_datadir_onto_dax_ext4_then_tpcc(tiers):
    sb = mvhelpers.clone_sandbox("lab-dax")
    before = mvhelpers.checksums(sb.connection_spec())
    _, result = _apply("lab-dax", "datadir", f"{PMEM}/data")
    assert result["phase"] == "committed" and not result["verify_server"]["checksum_problems"]
    ibdata = Path(PMEM, "data", "ibdata1")
    assert ibdata.exists() and file_is_dax(str(ibdata)) is True
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _tpcc_run_and_check("lab-dax")


def test_redo_onto_raid10_then_tpcc(tiers):
    sb = mvhelpers.clone_sandbox("lab-r10")
    before = mvhelpers.checksums(sb.connection_spec())
    _, result = _apply("lab-r10", "redo", f"{R10}/redo")
    assert result["phase"] == "committed"
    assert any(p.name.startswith("ib_logfile") for p in Path(R10, "redo").iterdir())
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _tpcc_run_and_check("lab-r10")


@pytest.mark.parametrize("tier,then", [(PMEM, "resume"), (R10, "rollback")])
def test_sigkill_mid_copy_then_resume_or_rollback(tiers, tier, then):
    name = f"lab-crash-{then}"
    sb = mvhelpers.clone_sandbox(name)
    spec = sb.connection_spec()
    before = mvhelpers.checksums(spec)
    old_datadir = sb.datadir
    proc, _ = _apply(name, "datadir", f"{tier}/{name}", env={"INNOTIER_MOVE_CRASH_AT": "COPY:mid"}, check=False)
    assert proc.returncode == -9 or proc.returncode == 137, (proc.returncode, proc.stderr)
    status = json.loads(cli("move", "status", "--json").stdout)
    open_moves = [m for m in status if m.get("phase") == "open"]
    assert len(open_moves) == 1, status
    move_id = open_moves[0].get("move_id") or open_moves[0].get("id")
    if then == "resume":
        cli("move", "resume", "--id", move_id, "--json")
    else:
        cli("move", "rollback", "--id", move_id, "--yes", "--json")
    sb = Sandbox.load(name)
    if sb.state().name != "RUNNING":
        sb.start()
    datadir = inspect(sb.connection_spec()).datadir.rstrip("/")
    expected = f"{tier}/{name}" if then == "resume" else old_datadir.rstrip("/")
    assert datadir == expected
    assert mvhelpers.checksums(sb.connection_spec()) == before
    mvhelpers.data_consistent(sb.connection_spec())


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
