"""Detection on recorded sysfs trees and tool outputs (tests/fixtures/recorded/hardware, local-tiers):
md RAID 0/1/5/6/10, pmem/DAX mounts, DCPMM (ndctl/daxctl JSON), NVMe, HDD, and zram as recorded here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuner.core.probe import parse_mount_command_output, parse_mounts
from datadir_mover.tiers.detect import detect_tiers
from datadir_mover.tiers.host import RecordedRunner
from datadir_mover.tiers.pmem import parse_daxctl_devices, parse_ndctl_namespaces
from datadir_mover.tiers.raid import parse_mdadm_detail, parse_mdstat
from datadir_mover.tiers.zram import parse_comp_algorithm, parse_mm_stat


def _proc(tmp_path: Path, mdstat: Path | None = None, mounts: str = "") -> str:
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "mounts").write_text(mounts)
    if mdstat is not None:
        shutil.copy(mdstat, proc / "mdstat")
    return str(proc)


def _by_device(tiers):
    return {t.device: t for t in tiers}


# ---- md RAID -------------------------------------------------------------------------------------

def test_md_sysfs_tree_levels_chunks_members_state(hw, tmp_path):
    tiers = _by_device(detect_tiers(str(hw / "md-sysfs/sys"), _proc(tmp_path), RecordedRunner()))
    expect = {  # device: (level, chunk, members, state, degraded)
        "/dev/md0": ("raid0", 524288, ("sdg", "sdh"), "clean", None),
        "/dev/md1": ("raid1", None, ("sdi", "sdj"), "clean", 0),
        "/dev/md5": ("raid5", 524288, ("sdn", "sdo"), "clean", 1),
        "/dev/md6": ("raid6", 524288, ("sdq", "sdr", "sds", "sdt"), "active", 1),
        "/dev/md10": ("raid10", 524288, ("sdu", "sdv", "sdw", "sdx"), "clean", 0),
    }
    for dev, (level, chunk, members, state, degraded) in expect.items():
        t = tiers[dev]
        assert t.kind == "md-raid" and not t.volatile
        assert (t.raid.level, t.raid.chunk_bytes, t.raid.members, t.raid.state, t.raid.degraded) == \
            (level, chunk, members, state, degraded), dev
    assert tiers["/dev/md5"].raid.failed == ("sdp",) and tiers["/dev/md5"].raid.spares == ("sdaa",)
    assert any("degraded" in n for n in tiers["/dev/md5"].notes)
    md6 = tiers["/dev/md6"].raid
    assert md6.sync_action == "recover" and md6.sync_progress == pytest.approx(1569888 / 2093056)
    md8 = tiers["/dev/md8"].raid
    assert (md8.raid_disks, md8.previous_raid_disks, md8.sync_action) == (11, 10, "reshape")
    assert tiers["/dev/md7"].raid.level == "container"
    assert tiers["/dev/md10"].raid.level_number == 10


@pytest.mark.parametrize("fixture, name, level, chunk_k, n, layout", [
    ("pymdstat-mdstat.14.txt", None, "raid0", 256, 2, None),
    ("pymdstat-mdstat.04.txt", None, "raid5", 1024, 10, "algorithm 2"),
    ("pymdstat-mdstat.06.txt", "md0", "raid6", 256, 7, "algorithm 2"),
    ("telegraf-mdstat-raid10-check.txt", "md2", "raid10", 512, 12, "2 near-copies"),
    ("pymdstat-mdstat.10.txt", "md126", "raid0", 3072, 2, None),
])
def test_mdstat_only_arrays(hw, tmp_path, fixture, name, level, chunk_k, n, layout):
    """Arrays known only from /proc/mdstat (no sysfs tree) are still listed with level, chunk and members."""
    tiers = detect_tiers(str(tmp_path / "nosys"), _proc(tmp_path, hw / "mdstat" / fixture), RecordedRunner())
    raid = [t.raid for t in tiers if t.raid.level == level and (name is None or t.device == f"/dev/{name}")]
    assert raid, [t.raid for t in tiers]
    r = raid[-1]
    assert (r.chunk_bytes, len(r.members), r.layout) == (chunk_k * 1024, n, layout)


def test_raid1_degraded_and_progress_from_mdstat(hw, tmp_path):
    tiers = _by_device(detect_tiers(str(tmp_path / "nosys"),
                                    _proc(tmp_path, hw / "mdstat/procfs-fixtures-mdstat.txt"), RecordedRunner()))
    md6 = tiers["/dev/md6"].raid
    assert (md6.level, md6.degraded, md6.failed, md6.spares) == ("raid1", 1, ("sdb2",), ("sdc",))
    assert (md6.sync_action, md6.sync_progress) == ("recovery", pytest.approx(0.085))
    assert tiers["/dev/md9"].raid.sync_action == "resync=DELAYED"
    assert tiers["/dev/md11"].raid.state == "active (auto-read-only)"


def test_raid10_mdadm_detail_gives_layout_and_state(hw, tmp_path):
    runner = RecordedRunner({("mdadm", "--detail", "/dev/md0"): (hw / "mdadm-detail/ohai-md0-raid10.txt").read_text()})
    mounts = "/dev/md0 /srv/mysql ext4 rw,relatime 0 0\n"
    [t] = detect_tiers(str(tmp_path / "nosys"), _proc(tmp_path, hw / "mdstat/ohai-mdstat-raid10.txt", mounts), runner)
    assert (t.mountpoint, t.kind, t.fs) == ("/srv/mysql", "md-raid", "ext4")
    assert (t.raid.level, t.raid.layout, t.raid.state, t.raid.chunk_bytes) == ("raid10", "near=2", "clean", 256 * 1024)
    assert t.raid.members == ("sdc", "sdd", "sde", "sdf", "sdg", "sdh")
    assert t.raid.degraded == 0 and t.raid.sources[0] == "mdadm"
    assert t.capacity_bytes == 2929893888 * 1024
    assert ("mdadm", "--detail", "/dev/md0") in runner.calls


def test_mdadm_detail_parser_on_all_recordings(hw):
    d = parse_mdadm_detail((hw / "mdadm-detail/insights-md0-raid5-reshaping.txt").read_text())
    assert (d.level, d.chunk_bytes, d.int_field("Raid Devices"), d.fields["Layout"]) == ("raid5", 512 * 1024, 21, "left-symmetric")
    assert len([s for _, s in d.devices if s == "active sync"]) == 21 and ("/dev/sda1", "spare") in d.devices
    inactive = parse_mdadm_detail((hw / "mdadm-detail/insights-md1-raid5-inactive.txt").read_text())
    assert inactive.fields["State"] == "inactive" and inactive.chunk_bytes is None and len(inactive.devices) == 4
    nvme = parse_mdadm_detail((hw / "mdadm-detail/insights-md2-raid1-nvme.txt").read_text())
    assert [p for p, _ in nvme.devices] == ["/dev/nvme2n1", "/dev/nvme3n1"]
    for f in (hw / "mdadm-detail").iterdir():
        assert parse_mdadm_detail(f.read_text()).level.startswith("raid"), f.name


def test_mdstat_parser_reads_every_recording(hw):
    for f in sorted((hw / "mdstat").iterdir()):
        arrays = parse_mdstat(f.read_text())
        if f.name == "pymdstat-mdstat.01.txt":
            assert arrays == {}
            continue
        assert arrays, f.name
        for a in arrays.values():
            assert a.members, (f.name, a.name)
    unindented = parse_mdstat((hw / "mdstat/pymdstat-mdstat.15.txt").read_text())
    assert unindented["md3"].chunk_bytes == 64 * 1024 and unindented["md3"].status == "UUUUUUUU"


# ---- NVMe, HDD -----------------------------------------------------------------------------------

def test_nvme_and_hdd_from_sysfs(hw, tmp_path):
    [nvme] = detect_tiers(str(hw / "nvme-sysfs/sys"), _proc(tmp_path), RecordedRunner())
    assert (nvme.device, nvme.kind, nvme.rotational, nvme.model) == ("/dev/nvme0n1", "nvme", False, "CT2000P3SSD8")
    assert nvme.capacity_bytes == 3907029168 * 512 and nvme.logical_block_size == 512
    assert nvme.mountpoint is None and not nvme.volatile and not nvme.dax
    [hdd] = detect_tiers(str(hw / "hdd-sysfs/sys"), _proc(tmp_path), RecordedRunner())
    assert (hdd.kind, hdd.rotational, hdd.capacity_bytes) == ("hdd", True, 3750748848 * 512)


def test_mounted_nvme_partition_resolves_to_its_disk(hw, tmp_path):
    mounts = "/dev/nvme0n1p1 /var/lib/mysql xfs rw,noatime 0 0\n"
    [t] = detect_tiers(str(hw / "nvme-sysfs/sys"), _proc(tmp_path, mounts=mounts), RecordedRunner())
    assert (t.mountpoint, t.kind, t.fs, t.rotational, t.model) == ("/var/lib/mysql", "nvme", "xfs", False, "CT2000P3SSD8")
    assert t.o_direct is None  # recorded tree: nothing is probed


# ---- persistent memory and DAX -------------------------------------------------------------------

def _pmem(hw, tmp_path, mount_file: str, ndctl: dict | None = None):
    mounts = parse_mount_command_output((hw / "mounts" / mount_file).read_text())
    runner = RecordedRunner({tuple(k): (hw / v).read_text() for k, v in (ndctl or {}).items()})
    return detect_tiers(str(hw / "pmem-sysfs/sys"), _proc(tmp_path), runner, mounts=mounts)


BUSES = {("ndctl", "list", "--buses", "--namespaces"): "ndctl/ndctl-man-list-buses-namespaces.txt"}


@pytest.mark.parametrize("mount_file, dax", [
    ("pmemdocs-mount-ext4-dax.txt", True),
    ("pmemdocs-mount-xfs-dax.txt", True),
    ("pmemdocs-mount-xfs-dax-after-fix.txt", True),
    ("zbtree-mount-ext4-dax-always.txt", True),
    ("pmemdocs-mount-xfs-no-dax-raw-namespace.txt", False),
    ("pmemio-blog-mount-ext4-dax-turned-off.txt", False),
])
def test_dax_from_mount_options_on_emulated_pmem(hw, tmp_path, mount_file, dax):
    [t] = [t for t in _pmem(hw, tmp_path, mount_file, BUSES) if t.mountpoint]
    assert (t.device, t.kind, t.dax) == ("/dev/pmem0", "pmem", dax)
    assert t.dax_source == ("mount-options" if dax else "none")
    assert t.pmem.provider == "e820" and t.pmem.emulated and t.volatile   # memmap= is DRAM
    assert t.pmem.queue_dax is True and t.pmem.mode == "fsdax"
    assert any("DAX is not in effect" in n for n in t.notes) == (not dax)


def test_dax_always_on_two_pmem_devices(hw, tmp_path):
    tiers = [t for t in _pmem(hw, tmp_path, "qemu-devel-mount-xfs-dax-always.txt", BUSES) if t.mountpoint]
    assert [(t.mountpoint, t.device, t.dax) for t in tiers] == [("/mnt1", "/dev/pmem0", True), ("/mnt2", "/dev/pmem1", True)]


def test_raw_namespace_refuses_dax(hw, tmp_path):
    ndctl = {("ndctl", "list", "--namespaces"): "ndctl/pmemdocs-ndctl-list-Nu-raw-wrapped.json"}
    [t] = _pmem(hw, tmp_path, "pmemdocs-mount-xfs-no-dax-raw-namespace.txt", ndctl)
    assert (t.kind, t.pmem.mode, t.dax, t.capacity_bytes) == ("pmem", "raw", False, 704 << 20)
    assert any("--mode=fsdax" in n for n in t.notes)


def test_dcpmm_fsdax_namespaces_with_badblocks(hw, tmp_path):
    ndctl = {("ndctl", "list", "--namespaces"): "ndctl/daos-ndctl-list-M-badblocks.json"}
    tiers = _by_device(_pmem(hw, tmp_path, "zbtree-mount-ext4-dax-always.txt", ndctl))
    pm0, pm1 = tiers["/dev/pmem0"], tiers["/dev/pmem1"]
    assert (pm0.mountpoint, pm0.kind, pm0.dax, pm0.volatile) == ("/mnt/pmem", "dcpmm-fsdax", True, False)
    assert pm0.pmem.align == 2097152 and pm0.capacity_bytes == 3183575302144
    assert pm1.mountpoint is None and pm1.kind == "dcpmm-fsdax" and pm1.pmem.badblock_count == 8
    assert any("8 bad blocks" in n for n in pm1.notes)


def test_devdax_from_ndctl_and_daxctl(hw, tmp_path):
    runner = {("ndctl", "list", "--namespaces"): "ndctl/pmemdocs-ndctl-create-namespace-devdax.json",
              ("daxctl", "list"): "daxctl/pmemio-blog-daxctl-list-devdax.json"}
    tiers = _by_device(detect_tiers(str(tmp_path / "nosys"), _proc(tmp_path),
                                    RecordedRunner({k: (hw / v).read_text() for k, v in runner.items()})))
    assert tiers["/dev/dax0.0"].kind == "dcpmm-devdax" and tiers["/dev/dax0.0"].pmem.align == 2097152
    assert tiers["/dev/dax1.0"].capacity_bytes == 539016298496 and tiers["/dev/dax1.0"].fs is None


def test_ndctl_and_daxctl_parsers_on_every_recording(hw):
    for f in sorted((hw / "ndctl").iterdir()):
        namespaces = parse_ndctl_namespaces(f.read_text())
        assert namespaces and all(ns.namespace and ns.namespace.startswith("namespace") for ns in namespaces), f.name
    legacy = parse_ndctl_namespaces((hw / "ndctl/pmemdocs-ndctl-create-namespace-reconfig-legacy-memory-mode.json").read_text())
    assert legacy[0].mode == "memory"   # old ndctl's name for fsdax
    buses = parse_ndctl_namespaces((hw / "ndctl/ndctl-man-list-buses-namespaces.txt").read_text())
    assert [(n.blockdev, n.provider) for n in buses] == [("pmem9", "nfit_test.1"), ("pmem0", "e820")]
    for f in sorted((hw / "daxctl").iterdir()):
        assert [d["chardev"] for d in parse_daxctl_devices(f.read_text())] == ["dax1.0"], f.name


# ---- zram as recorded on this kind of machine ----------------------------------------------------

def test_zram_recording_algorithm_and_ratio(local_tiers, tmp_path):
    mounts = parse_mounts((local_tiers / "proc-mounts.txt").read_text())
    tiers = detect_tiers(str(local_tiers / "sys"), _proc(tmp_path), RecordedRunner(), mounts=mounts)
    [z] = [t for t in tiers if t.kind == "zram"]
    assert (z.mountpoint, z.fs, z.volatile, z.rotational) == ("/mnt/zram", "ext4", True, False)
    assert z.zram.algorithm == "lz4" and z.zram.algorithms_available == ("lzo-rle", "lzo", "lz4")
    assert z.zram.orig_data_size == 201981952 and z.zram.compr_data_size == 67726069
    assert z.zram.compression_ratio == pytest.approx(201981952 / 67726069)
    assert z.capacity_bytes == 1 << 30
    [shm] = [t for t in tiers if t.mountpoint == "/dev/shm"]   # listed once although mounted twice
    assert shm.kind == "tmpfs" and shm.volatile


def test_zram_sysfs_value_parsers():
    assert parse_comp_algorithm("lzo-rle lzo [lz4] zstd") == ("lz4", ("lzo-rle", "lzo", "lz4", "zstd"))
    mm = parse_mm_stat("4096 74 12288 0 12288 0 0 0")   # an 8-field mm_stat (kernels before huge_pages_since)
    assert mm["orig_data_size"] == 4096 and mm["huge_pages"] == 0 and "huge_pages_since" not in mm


def test_tmpfs_source_on_zram_is_flagged(local_tiers, tmp_path):
    """Seed 004's `mount -t tmpfs /dev/zram0 DIR` makes a plain tmpfs: detection says so."""
    mounts = parse_mounts("/dev/zram0 /mnt/ramdisk tmpfs rw,relatime 0 0\n")
    [t] = detect_tiers(str(local_tiers / "sys"), _proc(tmp_path), RecordedRunner(), mounts=mounts)
    assert t.fs == "tmpfs" and any("zram device is not used" in n for n in t.notes)


def test_dax_option_on_raw_namespace_is_not_effective(hw, tmp_path):
    ndctl = {("ndctl", "list", "--namespaces"): "ndctl/pmemdocs-ndctl-list-Nu-raw-wrapped.json"}
    [t] = _pmem(hw, tmp_path, "pmemdocs-mount-ext4-dax.txt", ndctl)
    assert "dax" in t.mount_options and t.dax is False and t.pmem.mode == "raw"
