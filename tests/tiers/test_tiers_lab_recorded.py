"""The tier parsers on outputs recorded inside the lab VM (tests/fixtures/recorded/hardware-lab, README there):
real ndctl/daxctl JSON of ACPI.NFIT namespaces, mdadm --detail and /proc/mdstat for RAID 0/1/5/6/10, md sysfs
layout numbers, pmem sysfs attributes; and the pmem create plan on the VM's recorded regions."""

from __future__ import annotations

from pathlib import Path

import pytest

from datadir_mover.tiers import pmem, raid
from datadir_mover.tiers.host import Host, RecordedRunner
from datadir_mover.tiers.requests import PmemCreate
from tuner.core.errors import TierError, UsageError

LAB = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "hardware-lab"


def _text(name: str) -> str:
    return (LAB / name).read_text()


def test_ndctl_fsdax_namespace_on_an_nfit_bus():
    [ns] = pmem.parse_ndctl_namespaces(_text("ndctl-list-fsdax.json"))
    assert (ns.namespace, ns.mode, ns.map, ns.blockdev, ns.provider) == ("namespace0.0", "fsdax", "dev", "pmem0",
                                                                          "ACPI.NFIT")
    assert ns.size_bytes == 526385152 and ns.align == 2 << 20          # 512 MiB minus the struct-page map
    assert pmem.kind_of(ns) == "dcpmm-fsdax" and pmem.volatile_of(ns, "dcpmm-fsdax") is False


def test_ndctl_devdax_namespace_and_daxctl_device():
    [ns] = pmem.parse_ndctl_namespaces(_text("ndctl-list-devdax.json"))
    assert (ns.mode, ns.chardev, ns.blockdev) == ("devdax", "dax1.0", None)
    assert pmem.kind_of(ns) == "dcpmm-devdax"
    [dev] = pmem.parse_daxctl_devices(_text("daxctl-list.json"))
    assert dev == {"chardev": "dax1.0", "size": 262144000, "mode": "devdax", "target_node": 0}


def test_ndctl_regions_are_not_mistaken_for_namespaces():
    assert pmem.parse_ndctl_namespaces(_text("ndctl-list-regions-buses.json")) == []


def test_pmem_sysfs_attributes():
    assert int(_text("pmem0-size")) * 512 == 526385152
    assert _text("pmem0-queue-rotational").strip() == "0" and _text("pmem0-queue-dax").strip() == "1"
    assert "dax=always" in _text("proc-mounts-dax").split()[3]


@pytest.mark.parametrize("level, chunk_k, layout", [
    (0, 64, None), (1, None, None), (5, 128, "left-symmetric"), (6, 64, "left-symmetric"), (10, 512, "near=2"),
])
def test_mdadm_detail_per_level(level, chunk_k, layout):
    d = raid.parse_mdadm_detail(_text(f"mdadm-detail-raid{level}.txt"))
    r = raid.raid_from_detail(d, "md0")
    assert r.level == f"raid{level}" and r.raid_disks == 4 and r.degraded == 0
    assert sorted(r.members) == ["vdb", "vdc", "vdd", "vde"] and not r.failed
    assert r.chunk_bytes == (chunk_k * 1024 if chunk_k else None)
    assert r.layout == layout
    assert r.state.strip() in ("clean", "active")     # active: writes were in flight (mkfs, mount)


@pytest.mark.parametrize("level", [0, 1, 5, 6, 10])
def test_mdstat_agrees_with_mdadm_detail(level):
    """(RAID 0's mdstat line has no [4/4]: its disk count comes from the member list.)"""
    [arr] = raid.parse_mdstat(_text(f"mdstat-raid{level}")).values()
    detail = raid.raid_from_detail(raid.parse_mdadm_detail(_text(f"mdadm-detail-raid{level}.txt")), arr.name)
    r = raid.raid_from_mdstat(arr)
    assert (r.level, r.raid_disks, sorted(r.members), r.chunk_bytes) == \
        (detail.level, detail.raid_disks, sorted(detail.members), detail.chunk_bytes)
    assert r.array_size_bytes == detail.array_size_bytes


@pytest.mark.parametrize("level, expected", [(0, None), (1, None), (5, "left-symmetric"), (6, "left-symmetric"),
                                             (10, "near=2")])
def test_md_sysfs_layout_numbers_decode_to_mdadms_words(level, expected):
    value = int(_text(f"md-sysfs-layout-raid{level}"))
    assert raid.decode_md_layout(f"raid{level}", value) == expected
    if expected:
        assert raid.parse_mdadm_detail(_text(f"mdadm-detail-raid{level}.txt")).fields["Layout"] == expected


def test_md_layout_decoder_far_and_offset():
    assert raid.decode_md_layout("raid10", 0x201) == "far=2"
    assert raid.decode_md_layout("raid10", 0x10201) == "offset=2"
    assert raid.decode_md_layout("raid5", 99) == "algorithm 99"


def test_degraded_raid5_after_mdadm_fail():
    [arr] = raid.parse_mdstat(_text("mdstat-raid5-degraded")).values()
    r = raid.raid_from_mdstat(arr)
    assert r.failed == ("vdc",) and r.degraded == 1 and sorted(r.members) == ["vdb", "vdd"]
    d = raid.raid_from_detail(raid.parse_mdadm_detail(_text("mdadm-detail-raid5-degraded.txt")), arr.name)
    assert d.degraded == 1 and "degraded" in d.state and d.failed == ("vdc",)


def _lab_host(tmp_path) -> Host:
    """A host whose ndctl answers as the lab VM's did (two ACPI.NFIT regions), with no pmem block device yet."""
    runner = RecordedRunner({("ndctl", "list", "--regions", "--buses"): _text("ndctl-list-regions-buses.json")})
    return Host(sys_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"), run=runner)


def test_lab_regions_are_read_with_their_bus_and_free_space():
    regions = pmem.parse_ndctl_regions(_text("ndctl-list-regions-buses.json"))
    assert [(r.dev, r.provider, r.type, r.size, r.available) for r in regions] == [
        ("region1", "ACPI.NFIT", "pmem", 256 << 20, 256 << 20), ("region0", "ACPI.NFIT", "pmem", 512 << 20, 512 << 20)]


def test_pmem_create_uses_the_lab_vms_nvdimm_region_not_memmap(tmp_path):
    plan = pmem.PROVIDER.plan_create(PmemCreate(mount=str(tmp_path / "pmem")), _lab_host(tmp_path))
    commands = [s.command for s in plan.steps]
    assert "ndctl create-namespace --mode=fsdax --region=region0" in commands
    assert not any("memmap" in c or "reboot" in c for c in commands) and not any(s.manual for s in plan.steps)
    assert any("using the NVDIMM region region0 (ACPI.NFIT, 512M free)" in n for n in plan.notes), plan.notes
    assert "/dev/pmem0" in plan.title and "(nvdimm)" in plan.title
    assert not any("NVDIMM" in b or "memmap" in b for b in plan.blockers), plan.blockers
    # another region asked for by name: its own device
    plan = pmem.PROVIDER.plan_create(PmemCreate(mount=str(tmp_path / "pmem"), region="region1"), _lab_host(tmp_path))
    assert "ndctl create-namespace --mode=fsdax --region=region1" in [s.command for s in plan.steps]
    assert "/dev/pmem1" in plan.title


def test_pmem_create_without_a_region_emulates_and_says_so(tmp_path):
    host = Host(sys_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"), run=RecordedRunner({}))
    plan = pmem.PROVIDER.plan_create(PmemCreate(mount=str(tmp_path / "pmem")), host)
    assert any("no NVDIMM region" in n and "memmap=4G!12G" in n for n in plan.notes)
    assert any("reboot" in s.command for s in plan.steps if s.manual)


@pytest.mark.parametrize("fs", ["ext4", "xfs", "f2fs"])
def test_pmem_page_cache_tier_is_mounted_without_dax_and_checked_so(fs, tmp_path):
    """The DCPMM paper's traditional file systems on the same region: no -o dax, no DAX-only mkfs flags, and a
    last step that fails if statx reports DAX anyway (ext4/xfs pick dax=inode by default: never on new files)."""
    mount = tmp_path / "pmem"
    plan = pmem.PROVIDER.plan_create(PmemCreate(mount=str(mount), fs=fs, dax=False), _lab_host(tmp_path))
    commands = [s.command for s in plan.steps]
    assert commands[0] == "ndctl create-namespace --mode=fsdax --region=region0"
    assert f"mount -t {fs} /dev/pmem0 {mount}" in commands and not any("dax" in c for c in commands if "mount" in c)
    mkfs = next(c for c in commands if c.startswith("mkfs"))
    assert mkfs.startswith(f"mkfs.{fs} ") and "reflink=0" not in mkfs
    assert "page-cache (no DAX)" in plan.title and plan.steps[-1].summary.startswith("check that DAX is not in effect")
    # the check itself, on a directory that is not DAX (this host's tmp): passes; the DAX check there fails
    no_dax_check = pmem._verify_dax_step(tmp_path, want=False)
    no_dax_check.action({})
    with pytest.raises(TierError, match="DAX is not in effect"):
        pmem._verify_dax_step(tmp_path, want=True).action({})


def test_pmem_f2fs_with_dax_is_refused_with_the_fix(tmp_path):
    with pytest.raises(UsageError, match="'f2fs' is not supported for a DAX tier; choose one of ext4, xfs"):
        pmem.PROVIDER.plan_create(PmemCreate(mount=str(tmp_path / "p"), fs="f2fs"), _lab_host(tmp_path))
    assert not (tmp_path / "p").exists()
