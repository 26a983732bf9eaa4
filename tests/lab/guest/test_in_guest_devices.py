"""Inside the lab VM: live PMEM (fsdax, devdax) and md RAID (0/1/5/6/10) against the real kernel drivers.

Detection reads the live kernel (sysfs, ndctl, /proc/mdstat, mdadm), never recordings; `tiers create`
runs the real plans (namespace, mkfs, mount -o dax, statx; mdadm --create, mkfs with stride) and
`tiers destroy` takes them down.  The outputs are recorded for tests/fixtures/recorded/hardware-lab/.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from labhelpers import DISKS, all_tiers, cli, cli_json, device_tier, record, sh, tier_at
from tuner.core.probe import file_is_dax

LEVEL_CHUNK = {0: "64K", 1: None, 5: "128K", 6: "64K", 10: "512K"}


# ---- PMEM ----------------------------------------------------------------------------------------

def test_nvdimm_regions_are_visible():
    regions = sh("ndctl", "list", "--regions", "--buses").stdout
    record("ndctl-list-regions-buses.json", regions)
    assert "ACPI.NFIT" in regions
    assert '"region0"' in regions and '"region1"' in regions


def test_tiers_create_pmem_fsdax_end_to_end(tmp_path):
    mount = "/mnt/pmem"
    out = cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", mount,
              "--json")
    try:
        record("ndctl-list-fsdax.json", sh("ndctl", "list", "--buses", "--namespaces").stdout)
        record("pmem0-size", Path("/sys/block/pmem0/size").read_text())
        record("pmem0-queue-rotational", Path("/sys/block/pmem0/queue/rotational").read_text())
        record("pmem0-queue-dax", Path("/sys/block/pmem0/queue/dax").read_text())
        record("proc-mounts-dax", "".join(line + "\n" for line in Path("/proc/mounts").read_text().splitlines()
                                          if "pmem" in line))
        tier = tier_at(mount)
        assert tier["kind"] == "dcpmm-fsdax", tier
        assert tier["dax"] is True and tier["fs"] == "ext4"
        assert tier["volatile"] is False            # an ACPI.NFIT namespace, not memmap= DRAM
        assert tier["pmem"]["provider"] == "ACPI.NFIT" and tier["pmem"]["mode"] == "fsdax"
        assert tier["pmem"]["queue_dax"] is True
        assert "dax" in ",".join(tier["mount_options"])
        probe = Path(mount) / "probe"
        probe.write_bytes(b"x" * 8192)
        assert file_is_dax(str(probe)) is True      # statx STATX_ATTR_DAX on a real file
        probe.unlink()
        assert sh("dumpe2fs", "-h", "/dev/pmem0").stdout.count("Block size:               4096") == 1
        assert '"executed"' in out.stdout
    finally:
        cli("tiers", "destroy", mount, "--force", check=False)
    assert not os.path.ismount(mount)


def test_tiers_create_pmem_xfs_dax_and_devdax():
    # namespace0.0 from the previous test stays (destroy leaves namespaces to the user); reuse it with xfs
    mount = "/mnt/pmem-xfs"
    if not Path("/dev/pmem0").exists():
        sh("ndctl", "create-namespace", "--mode=fsdax", "--region=region0")
    cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--fs", "xfs", "--mount", mount)
    try:
        tier = tier_at(mount)
        assert tier["fs"] == "xfs" and tier["dax"] is True, tier
    finally:
        cli("tiers", "destroy", mount, "--force")
    # devdax on the second NVDIMM: a character device, listed as a candidate, never as a file system
    sh("ndctl", "create-namespace", "--mode=devdax", "--region=region1")
    record("ndctl-list-devdax.json", sh("ndctl", "list", "--namespaces", "--region=region1").stdout)
    record("daxctl-list.json", sh("daxctl", "list").stdout)
    tiers = all_tiers()
    devdax = [t for t in tiers if t["kind"] == "dcpmm-devdax"]
    assert [t["device"] for t in devdax] == ["/dev/dax1.0"], tiers
    assert devdax[0]["capacity_bytes"] and devdax[0]["volatile"] is False


def test_cli_lists_the_live_tiers():
    listed = cli_json("tiers", "list", "--all")
    assert [t["device"] for t in listed] == [t["device"] for t in all_tiers()]
    assert any(t["kind"] == "dcpmm-devdax" for t in listed)


def test_pmem_create_refuses_a_non_empty_mount_point_and_changes_nothing(tmp_path):
    (tmp_path / "keep").write_text("x")
    before = Path("/proc/mounts").read_text()
    proc = cli("tiers", "create", "pmem", "--source", "nvdimm", "--mount", str(tmp_path), check=False)
    assert proc.returncode != 0 and "not empty" in proc.stderr
    assert Path("/proc/mounts").read_text() == before


# ---- md RAID -------------------------------------------------------------------------------------

@pytest.mark.parametrize("level", [0, 1, 5, 6, 10])
def test_tiers_create_raid_each_level(level, clean_md):
    mount = f"/mnt/raid{level}"
    chunk = LEVEL_CHUNK[level]
    args = ["tiers", "create", "raid", "--level", str(level), "--devices", *DISKS, "--name", f"r{level}",
            "--mount", mount]
    if chunk:
        args += ["--chunk", chunk]
    cli(*args)
    try:
        md = os.path.basename(os.path.realpath(f"/dev/md/r{level}"))
        sh("mdadm", "--wait", f"/dev/{md}", check=False)   # exit 1 when there was nothing to wait for
        detail = sh("mdadm", "--detail", f"/dev/{md}").stdout
        record(f"mdadm-detail-raid{level}.txt", detail)
        record(f"mdstat-raid{level}", Path("/proc/mdstat").read_text())
        layout = Path(f"/sys/block/{md}/md/layout")
        if layout.exists():
            record(f"md-sysfs-layout-raid{level}", layout.read_text())
        tier = tier_at(mount)
        raid = tier["raid"]
        assert tier["kind"] == "md-raid" and raid["level"] == f"raid{level}", tier
        assert sorted(raid["members"]) == ["vdb", "vdc", "vdd", "vde"]
        assert raid["raid_disks"] == 4 and raid["degraded"] == 0 and not raid["failed"]
        if chunk:
            assert raid["chunk_bytes"] == int(chunk[:-1]) * 1024
        if level == 10:
            assert raid["layout"] == "near=2"
        fs = sh("dumpe2fs", "-h", f"/dev/{md}").stdout
        data_disks = {0: 4, 1: 0, 5: 3, 6: 2, 10: 2}[level]
        if data_disks and chunk:
            stride = int(chunk[:-1]) * 1024 // 4096
            assert f"RAID stride:              {stride}" in fs
            assert f"RAID stripe width:        {stride * data_disks}" in fs
    finally:
        cli("tiers", "destroy", mount, "--force", check=False)
    assert not os.path.ismount(mount)
    assert not any(line.startswith("md") for line in Path("/proc/mdstat").read_text().splitlines())


def test_tiers_create_raid_undoes_everything_when_a_step_fails(clean_md):
    before = Path("/proc/mdstat").read_text()
    proc = cli("tiers", "create", "raid", "--level", "5", "--devices", *DISKS[:3], "--name", "undo",
               "--mount", "/mnt/undo", "--options", "no-such-option", check=False)
    assert proc.returncode != 0
    assert Path("/proc/mdstat").read_text() == before                 # the array was stopped again
    assert sh("mdadm", "--detail", "/dev/md/undo", check=False).returncode != 0   # no array behind the name
    examine = sh("mdadm", "--examine", DISKS[0], check=False)
    assert examine.returncode != 0                                    # superblocks zeroed
    assert not os.path.ismount("/mnt/undo")


def test_raid5_degraded_after_fail_then_recovers(clean_md):
    cli("tiers", "create", "raid", "--level", "5", "--devices", *DISKS[:3], "--name", "deg", "--chunk", "64K")
    md = os.path.basename(os.path.realpath("/dev/md/deg"))
    sh("mdadm", "--wait", f"/dev/{md}", check=False)
    sh("mdadm", f"/dev/{md}", "--fail", "/dev/vdc")
    tier = device_tier(f"/dev/{md}")
    assert tier["raid"]["degraded"] == 1 and tier["raid"]["failed"] == ["vdc"], tier
    assert any("degraded" in n for n in tier["notes"])
    record("mdadm-detail-raid5-degraded.txt", sh("mdadm", "--detail", f"/dev/{md}").stdout)
    record("mdstat-raid5-degraded", Path("/proc/mdstat").read_text())
    sh("mdadm", f"/dev/{md}", "--remove", "/dev/vdc")
    sh("mdadm", "--zero-superblock", "/dev/vdc")
    sh("mdadm", f"/dev/{md}", "--add", "/dev/vdc")
    sh("mdadm", "--wait", f"/dev/{md}", check=False)
    tier = device_tier(f"/dev/{md}")
    assert tier["raid"]["degraded"] == 0 and sorted(tier["raid"]["members"]) == ["vdb", "vdc", "vdd"], tier
    assert not tier["raid"]["failed"]
