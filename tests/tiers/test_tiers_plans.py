"""Provisioning plans: exact dry-run commands, clear failure where the host cannot do it (no DAX
device, no md driver), and bad input refused with one line and nothing changed."""

from __future__ import annotations

import os

import pytest

from tuner.core.probe import read_mounts
from datadir_mover.tiers.fio import BenchSpec, job_file
from datadir_mover.tiers.provision import plan_create, plan_destroy
from datadir_mover.tiers_cli import request_from_args
from tuner.cli import build_parser
from tuner.core.errors import UsageError


def _plan(*argv: str):
    args = build_parser().parse_args(["tiers", "create", *argv])
    return plan_create(request_from_args(args))


def _mounts() -> set:
    return {(m.device, m.mountpoint) for m in read_mounts()}


# ---- pmem ----------------------------------------------------------------------------------------

def test_pmem_dry_run_prints_the_exact_commands(cli, tmp_path):
    target = tmp_path / "pmem"
    out = cli("tiers", "create", "pmem", "--mount", str(target), "--dry-run", check=True).stdout
    assert "memmap=4G!12G" in out and "update-grub" in out and "reboot" in out
    assert "ndctl create-namespace --force --reconfig=namespace0.0 --mode=fsdax" in out
    assert "mkfs.ext4 -q -F -b 4096 /dev/pmem0" in out
    assert f"mount -t ext4 -o dax /dev/pmem0 {target}" in out
    assert "STATX_ATTR_DAX" in out
    assert not target.exists()


def test_pmem_nvdimm_xfs_plan_has_no_reflink():
    plan = _plan("pmem", "--source", "nvdimm", "--region", "region1", "--size", "50G", "--fs", "xfs",
                 "--device", "/dev/pmem1", "--mount", "/mnt/innotier-pmem-never")
    commands = [s.command for s in plan.steps]
    assert "ndctl create-namespace --mode=fsdax --region=region1 --size=50G" in commands
    assert "mkfs.xfs -q -f -m reflink=0 /dev/pmem1" in commands
    assert not any(s.manual for s in plan.steps)   # no kernel parameter for real NVDIMMs


@pytest.mark.root
def test_pmem_create_fails_here_with_the_reason_and_the_plan(cli, tmp_path):
    assert not any(p.startswith("pmem") for p in os.listdir("/sys/block")), "this test expects a host without pmem"
    target = tmp_path / "pmem"
    before = _mounts()
    proc = cli("tiers", "create", "pmem", "--mount", str(target))
    assert proc.returncode == 6
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("innotier: cannot create a DAX ext4 tier") and "/dev/pmem0 is missing" in line
    assert "ndctl create-namespace" in proc.stdout and "# cannot apply here" in proc.stdout
    assert not target.exists() and _mounts() == before


# ---- md RAID -------------------------------------------------------------------------------------

def test_raid_dry_run_prints_mdadm_and_a_stripe_aligned_mkfs(cli, tmp_path):
    target = tmp_path / "r5"
    out = cli("tiers", "create", "raid", "--level", "5", "--chunk", "512K", "--devices", "/dev/sdb", "/dev/sdc",
              "/dev/sdd", "--mount", str(target), "--dry-run", check=True).stdout
    assert ("mdadm --create /dev/md/innotier0 --level=5 --chunk=512 --raid-devices=3 --metadata=1.2 "
            "/dev/sdb /dev/sdc /dev/sdd") in out
    # mke2fs(8): stride = chunk / block = 512K / 4K = 128; stripe_width = stride x (3 - 1) data disks
    assert "-E lazy_itable_init=0,lazy_journal_init=0,stride=128,stripe_width=256 /dev/md/innotier0" in out
    assert f"mount -t ext4 /dev/md/innotier0 {target}" in out
    assert not target.exists()


@pytest.mark.parametrize("level, n, chunk_arg, stripe", [
    ("0", 2, "--chunk=64K", "stride=16,stripe_width=32"),
    ("6", 4, "--chunk=512K", "stride=128,stripe_width=256"),
    ("10", 4, "--chunk=256K", "stride=64,stripe_width=128"),
])
def test_raid_levels_plan(level, n, chunk_arg, stripe):
    devices = [f"/dev/vdx{i}" for i in range(n)]
    plan = _plan("raid", "--level", level, chunk_arg, "--devices", *devices, "--name", "t1", "--mount",
                 "/mnt/innotier-raid-never")
    create = plan.steps[0].command
    assert f"--level={level}" in create and f"--chunk={int(chunk_arg.split('=')[1][:-1])}" in create
    assert any(stripe in s.command for s in plan.steps)
    assert any("is not a block device" in b for b in plan.blockers)


def test_raid1_has_no_chunk():
    plan = _plan("raid", "--level", "1", "--devices", "/dev/vdx1", "/dev/vdx2")
    assert "--chunk" not in plan.steps[0].command and len(plan.steps) == 1
    assert any("no chunk size" in n for n in plan.notes)


@pytest.mark.root
def test_raid_create_fails_here_because_there_is_no_md_driver(cli, tmp_path):
    assert not os.path.exists("/proc/mdstat"), "this test expects a host without the md driver"
    proc = cli("tiers", "create", "raid", "--level", "0", "--devices", "/dev/loop0", "/dev/loop1")
    assert proc.returncode == 6
    [line] = proc.stderr.strip().splitlines()
    assert "the md driver is not loaded" in line
    assert "mdadm --create /dev/md/innotier0 --level=0 --chunk=512" in proc.stdout


# ---- bad input: one line, nothing changed -------------------------------------------------------

def test_mount_point_not_empty(tmp_path):
    (tmp_path / "keep.ibd").write_bytes(b"x")
    with pytest.raises(UsageError, match="is not empty"):
        _plan("ramdisk", "--size", "64M", "--mount", str(tmp_path))
    assert os.listdir(tmp_path) == ["keep.ibd"]


def test_mount_point_already_a_mount():
    with pytest.raises(UsageError, match="already a mount point"):
        _plan("zram", "--size", "64M", "--mount", "/dev/shm")


@pytest.mark.parametrize("kind", ["zram", "ramdisk"])
def test_ram_tier_larger_than_memory(kind, tmp_path):
    with pytest.raises(UsageError, match="larger than the memory available"):
        _plan(kind, "--size", "100T", "--mount", str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()


def test_unknown_zram_algorithm_lists_the_kernels(tmp_path):
    available = next(open(f"/sys/block/{d}/comp_algorithm").read().replace("[", "").replace("]", "").split()
                     for d in sorted(os.listdir("/sys/block")) if d.startswith("zram"))
    with pytest.raises(UsageError) as err:
        _plan("zram", "--size", "64M", "--algorithm", "snappy", "--mount", str(tmp_path / "z"))
    assert f"choose one of: {', '.join(available)}" in str(err.value)


@pytest.mark.parametrize("argv, message", [
    (["--level", "5", "--devices", "/dev/a", "/dev/b"], "at least 3 devices"),
    (["--level", "6", "--devices", "/dev/a", "/dev/b", "/dev/c"], "at least 4 devices"),
    (["--level", "10", "--devices", "/dev/a", "/dev/b", "/dev/c"], "at least 4 devices"),
    (["--level", "0", "--devices", "/dev/a", "/dev/a"], "twice"),
    (["--level", "0", "--chunk", "500K", "--devices", "/dev/a", "/dev/b"], "power of two"),
    (["--level", "0", "--fs", "xfs", "--devices", "/dev/a", "/dev/b"], "--fs needs --mount"),
])
def test_raid_bad_input(argv, message):
    with pytest.raises(UsageError, match=message):
        _plan("raid", *argv)


def test_pmem_bad_memmap(tmp_path):
    with pytest.raises(UsageError, match="SIZE!OFFSET"):
        _plan("pmem", "--memmap", "4G@12G", "--mount", str(tmp_path / "p"))


def test_cli_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    proc = cli("tiers", "create", "zram", "--size", "100T", "--mount", str(tmp_path / "z"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("innotier: zram size 100T is larger than the memory available")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = cli("tiers", "create", "raid", "--level", "4", "--devices", "/dev/a", "/dev/b", "/dev/c")
    assert proc.returncode == 2 and "invalid choice: 4" in proc.stderr


@pytest.mark.parametrize("path, message", [
    ("/", "system mount"), ("/dev/shm", "system mount"), ("/nonexistent-innotier", "not a mount point"),
])
def test_destroy_refuses(path, message):
    with pytest.raises(UsageError, match=message):
        plan_destroy(path)


# ---- fio job file -------------------------------------------------------------------------------

def test_fio_job_file_follows_the_seeds():
    text = job_file(BenchSpec(directory="/t", size_bytes=16 << 20, runtime_s=2, direct=False), "/t/w")
    sections = text.split("\n\n")
    assert "direct=0" in sections[0] and "size=16777216" in sections[0] and "time_based=1" in sections[0]
    jobs = {s.splitlines()[0]: s for s in sections[1:]}
    assert "rw=randwrite" in jobs["[randwrite]"] and "fsync=1" in jobs["[randwrite]"] and "bs=4k" in jobs["[randwrite]"]
    assert "ioengine=psync" in jobs["[randread]"] and "fsync" not in jobs["[randread]"]
    assert "ioengine=libaio" in jobs["[seqread]"] and "iodepth=32" in jobs["[seqwrite]"]
    assert all("stonewall" in s for s in jobs.values())
