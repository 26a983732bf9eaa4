"""Real tiers on this machine (root): detection of its mounts, zram with ext4, tmpfs and ramfs
created, probed, benchmarked with fio and destroyed.  Every mount a test makes is torn down by the
``made_tiers`` finalizer even when the test fails."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

from tuner.core.probe import mount_of, read_mounts
from datadir_mover.tiers.detect import detect_tiers, tier_for_path
from datadir_mover.tiers.plan import apply_plan
from datadir_mover.tiers.provision import plan_create, plan_destroy
from datadir_mover.tiers_cli import request_from_args
from tuner.cli import build_parser

pytestmark = pytest.mark.root

KERNEL = tuple(int(x) for x in platform.release().split("-")[0].split(".")[:2])
TMPFS_O_DIRECT = KERNEL >= (6, 6)   # tmpfs accepts O_DIRECT from Linux 6.6


def _mounted(path) -> list:
    return [m for m in read_mounts() if m.mountpoint == os.path.abspath(path)]


def _create(made_tiers, *argv):
    args = build_parser().parse_args(["tiers", "create", *argv])
    made_tiers.append(args.mount)
    apply_plan(plan_create(request_from_args(args)))
    return args.mount


def test_detects_this_machines_mounts():
    tiers = {t.mountpoint: t for t in detect_tiers() if t.mountpoint}
    root = tiers["/"]
    name = os.path.realpath(root.device).rsplit("/", 1)[-1]
    rotational = Path(f"/sys/block/{name}/queue/rotational").read_text().strip() == "1"
    assert root.rotational == rotational and not root.volatile
    assert root.kind == ("virtio" if name.startswith("vd") else root.kind)
    assert root.capacity_bytes > root.free_bytes > 0
    assert root.o_direct is True and root.dax is False and root.dax_source == "statx"
    shm = tiers["/dev/shm"]
    assert (shm.kind, shm.volatile, shm.o_direct) == ("tmpfs", True, TMPFS_O_DIRECT)


def test_tier_for_a_path_that_does_not_exist_yet(tmp_path):
    t = tier_for_path(tmp_path / "not" / "yet")
    assert t.mountpoint == mount_of(tmp_path).mountpoint and t.fs == mount_of(tmp_path).fstype
    assert t.o_direct is not None and not (tmp_path / "not").exists()


def test_tmpfs_and_ramfs_real(made_tiers, tmp_path):
    tmpfs = _create(made_tiers, "ramdisk", "--fs", "tmpfs", "--size", "64M", "--mount", str(tmp_path / "tmpfs"))
    ramfs = _create(made_tiers, "ramdisk", "--fs", "ramfs", "--size", "64M", "--mount", str(tmp_path / "ramfs"))
    t, r = tier_for_path(tmpfs), tier_for_path(ramfs)
    assert (t.kind, t.mountpoint, t.volatile, t.o_direct) == ("tmpfs", tmpfs, True, TMPFS_O_DIRECT)
    assert t.capacity_bytes == 64 << 20 and "size=65536k" in t.mount_options
    assert (r.kind, r.volatile, r.o_direct, r.capacity_bytes) == ("ramfs", True, False, None)
    assert any("no size limit" in n for n in r.notes)
    for path in (tmpfs, ramfs):
        apply_plan(plan_destroy(path))
        assert not _mounted(path)


def test_zram_ext4_real_create_detect_destroy(made_tiers, tmp_path, cli):
    target = tmp_path / "zram"
    made_tiers.append(str(target))
    available = Path("/sys/class/zram-control").exists()
    assert available, "zram must be available on the CI host"
    proc = cli("tiers", "create", "zram", "--size", "128M", "--algorithm", "lz4", "--fs", "ext4",
               "--mount", str(target), "--json", check=True)
    created = json.loads(proc.stdout)["tier"]
    assert created["kind"] == "zram" and created["fs"] == "ext4" and created["zram"]["algorithm"] == "lz4"
    name = created["device"].rsplit("/", 1)[-1]
    # InnoDB-like mix: zeros (same-filled pages), random bytes (incompressible), repeated text
    (target / "zeros").write_bytes(bytes(8 << 20))
    (target / "random").write_bytes(os.urandom(8 << 20))
    (target / "text").write_bytes(b"innodb page 16k row format dynamic " * ((8 << 20) // 35))
    os.sync()
    proc = cli("tiers", "list", "--json", check=True)
    [z] = [t for t in json.loads(proc.stdout) if t["mountpoint"] == str(target)]
    assert z["kind"] == "zram" and z["volatile"] is True and z["rotational"] is False and z["o_direct"] is True
    assert z["zram"]["algorithm"] == "lz4" and z["zram"]["disksize_bytes"] == 128 << 20
    assert z["zram"]["orig_data_size"] >= 8 << 20
    assert z["zram"]["compression_ratio"] > 1.2     # text compresses; random does not
    refused = cli("tiers", "destroy", str(target))
    assert refused.returncode == 2 and "still holds 3 entries" in refused.stderr and _mounted(target)
    cli("tiers", "destroy", str(target), "--force", check=True)
    assert not _mounted(target)
    gone = Path(f"/sys/block/{name}")
    assert not gone.exists() or Path(gone, "disksize").read_text().strip() != str(128 << 20)


def test_zram_create_failure_is_undone(cli, tmp_path, made_tiers):
    """mkfs.btrfs refuses a 16 MiB device: the zram device and the mount point made so far are removed."""
    target = tmp_path / "too-small"
    made_tiers.append(str(target))
    proc = cli("tiers", "create", "zram", "--size", "16M", "--fs", "btrfs", "--mount", str(target))
    assert proc.returncode == 6, proc.stderr
    assert "make the btrfs file system failed" in proc.stderr and "undone" in proc.stderr
    assert "- echo" in proc.stderr and "/sys/class/zram-control/hot_remove" in proc.stderr
    assert not target.exists() and not _mounted(target)


def test_fio_bench_on_tmpfs(made_tiers, tmp_path, cli, innotier_home):
    path = _create(made_tiers, "ramdisk", "--size", "128M", "--mount", str(tmp_path / "bench"))
    proc = cli("tiers", "bench", path, "--size", "16M", "--runtime", "1", "--json", check=True)
    result = json.loads(proc.stdout)
    assert result["io_mode"] == ("O_DIRECT" if TMPFS_O_DIRECT else result["io_mode"])
    assert result["fio_version"].startswith("fio-") and result["kernel"] == platform.release()
    assert result["tier"]["kind"] == "tmpfs" and result["tier"]["mountpoint"] == path
    jobs = {j["name"]: j for j in result["jobs"]}
    assert set(jobs) == {"seqwrite", "seqread", "randread", "randwrite"}
    assert all(j["iops"] > 0 and j["bw_bytes"] > 0 for j in jobs.values())
    assert jobs["randwrite"]["fsync_mean_us"] is not None and jobs["randread"]["fsync_mean_us"] is None
    stored = Path(result["stored_at"])
    assert stored.parent == innotier_home / "tiers" / "bench" and json.loads(stored.read_text())["jobs"]
    assert os.listdir(path) == []   # fio's file and job file are removed


def test_bench_refuses_a_size_that_does_not_fit(made_tiers, tmp_path, cli):
    path = _create(made_tiers, "ramdisk", "--size", "16M", "--mount", str(tmp_path / "small"))
    proc = cli("tiers", "bench", path, "--size", "64M", "--runtime", "1")
    assert proc.returncode == 2 and "does not fit" in proc.stderr and os.listdir(path) == []
