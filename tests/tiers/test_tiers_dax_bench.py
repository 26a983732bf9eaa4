"""`tiers bench --profile dax [--against MOUNT]` (issue 33, item 2): the PMDK thesis's DAX-against-page-cache
measurements on two real tiers side by side (a tmpfs and a zram-backed ext4: this machine has no DAX, so
MAP_SYNC must be refused and reported as "not DAX" on both), and bad input refused with nothing stored."""

from __future__ import annotations

import json
import os

import pytest

from datadir_mover.tiers import fio_dax


def test_dax_profile_on_two_real_tiers_side_by_side(mv_tiers, cli, innotier_home):
    tmpfs, zram = mv_tiers["tmpfs"], mv_tiers["zram"]
    before = {m: sorted(os.listdir(m)) for m in (tmpfs, zram)}  # the session's tiers hold other tests' files
    proc = cli("tiers", "bench", tmpfs, "--profile", "dax", "--against", zram, "--size", "16M", "--runtime", "1",
               "--json", check=True)
    result = json.loads(proc.stdout)
    a, b = result["runs"]
    assert (a["tier"]["kind"], b["tier"]["fs"]) == ("tmpfs", "ext4") and a["dax"] is False and b["dax"] is False
    for run in (a, b):
        jobs = {j["name"]: j for j in run["jobs"]}
        # sequential and random, read and write, each through libaio and psync
        assert set(jobs) == {f"{k}{rw}-{e}" for k in ("seq", "rand") for rw in ("read", "write")
                             for e in ("libaio", "psync")}
        assert all(j["bw_bytes"] > 0 for j in jobs.values())
        assert jobs["seqread-libaio"]["iodepth"] == 32 and jobs["randwrite-psync"]["iodepth"] == 1
        assert all(run["file_ops"][op]["median_us"] > 0 for op in ("open", "append_fsync", "unlink"))
        shared = run["faults"]["shared"]
        assert shared["write_fault_us"] is not None and shared["read_fault_us"] is not None
        # MAP_SYNC exists only on DAX: the kernel refuses it here, and the result says why
        assert run["faults"]["map_sync"] == {"write_fault_us": None, "read_fault_us": None, "refused": "not DAX"}
        mount = run["tier"]["mountpoint"]
        assert sorted(os.listdir(mount)) == before[mount]  # scratch files removed, nothing else touched
    # an fsync on zram-ext4 reaches its journal; on tmpfs it returns at once
    assert b["file_ops"]["append_fsync"]["median_us"] > a["file_ops"]["append_fsync"]["median_us"]
    stored = json.loads(open(result["stored_at"]).read())
    assert stored["profile"] == "dax" and len(stored["runs"]) == 2
    assert result["stored_at"].startswith(str(innotier_home / "tiers" / "bench"))
    # the table for people: one column per tier and their ratio
    text = cli("tiers", "bench", tmpfs, "--profile", "dax", "--size", "8M", "--runtime", "1", check=True).stdout
    assert "page fault, MAP_SYNC, first write" in text and "not DAX" in text and "B / A" not in text


def test_map_sync_off_dax_is_reported_not_raised(tmp_path):
    assert fio_dax.fault_cost(str(tmp_path), 1 << 20, map_sync=True) == fio_dax.FaultCost(None, None, "not DAX")
    plain = fio_dax.fault_cost(str(tmp_path), 1 << 20, map_sync=False)
    assert plain.refused is None and plain.write_fault_us >= 0 and os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, message", [
    (["--profile", "dax", "--against", "/nonexistent/science"], "--against /nonexistent/science is not a directory"),
    (["--against", "/tmp"], "--against compares tiers with --profile dax only"),
    (["--profile", "dax", "--compress-percentage", "50"], "belong to the standard profile"),
])
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, cli, innotier_home, args, message):
    bench = innotier_home / "tiers" / "bench"
    before = sorted(os.listdir(bench)) if bench.exists() else []
    proc = cli("tiers", "bench", str(tmp_path), *args, "--size", "8M", "--runtime", "1")
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (sorted(os.listdir(bench)) if bench.exists() else []) == before and os.listdir(tmp_path) == []
