"""The RAID paper's expected-performance formulas (section 4.1; the paper: docs/sources.md), checked on its own numbers.

Single Intel Optane SSD 900P (Table 1 text): 2.5 GB/s sequential read, 2.4 GB/s sequential write
(direct I/O).  The abstract: software overhead "reduced the performance by up to 75%, 52%, 76%, 91%,
and 92% in RAID 0, 1, 10, 5, and 6" compared with the expected performance.
"""

from __future__ import annotations

import pytest

from datadir_mover.tiers.raid import expected_raid_performance, measured_vs_expected
from tuner.core.errors import UsageError

READ_ONE, WRITE_ONE = 2.5, 2.4   # GB/s


@pytest.mark.parametrize("level, n, capacity, read, write", [
    (0, 8, 8, 20.0, 19.2),
    (1, 8, 1, 20.0, 2.4),
    (10, 8, 4, 20.0, 9.6),
    (5, 8, 7, 17.5, 4.2),
    (6, 8, 6, 15.0, 2.4),
    (5, 3, 2, 5.0, 1.2),
    (6, 4, 2, 5.0, 0.8),
])
def test_expected_performance(level, n, capacity, read, write):
    e = expected_raid_performance(level, n, READ_ONE, WRITE_ONE)
    assert (e.capacity_factor, e.read, e.write) == (capacity, pytest.approx(read), pytest.approx(write))


def test_paper_raid5_direct_write_is_the_91_percent_loss():
    """RAID 5, 8 devices, direct write measured 384 MB/s (Figure 4d text) against (8-1) x 2.4 / 4 = 4.2 GB/s."""
    r = measured_vs_expected(5, 8, READ_ONE, WRITE_ONE, None, 0.384)
    assert r["expected_write"] == pytest.approx(4.2)
    assert 1 - r["write_ratio"] == pytest.approx(0.91, abs=0.005)
    assert r["read_ratio"] is None


def test_paper_raid0_direct_io_is_close_to_expected():
    """RAID 0, 8 devices, direct read 16.5 GB/s and write 16.9 GB/s (Figure 1c/1d text)."""
    r = measured_vs_expected(0, 8, READ_ONE, WRITE_ONE, 16.5, 16.9)
    assert r["read_ratio"] == pytest.approx(16.5 / 20.0) and r["write_ratio"] == pytest.approx(16.9 / 19.2)


def test_paper_raid1_write_does_not_scale():
    """RAID 1 direct write: 2.3 GB/s for 2 devices, 1.9 GB/s for 8 (Figure 2d); expected 1 x 2.4 either way."""
    two = measured_vs_expected(1, 2, READ_ONE, WRITE_ONE, None, 2.3)
    eight = measured_vs_expected(1, 8, READ_ONE, WRITE_ONE, 15.2, 1.9)
    assert two["expected_write"] == eight["expected_write"] == pytest.approx(2.4)
    assert eight["read_ratio"] == pytest.approx(15.2 / 20.0)


@pytest.mark.parametrize("level, n", [(5, 2), (6, 3), (10, 3), (0, 1), (4, 4)])
def test_formula_refuses_impossible_arrays(level, n):
    with pytest.raises(UsageError):
        expected_raid_performance(level, n, READ_ONE, WRITE_ONE)


def test_bench_raid_section_on_a_recorded_array(hw, tmp_path):
    """`tiers bench` on md RAID 10 (recorded sysfs md10, 4 members) with a member baseline: the paper's
    RAID 10 direct I/O at 4 devices, 9.0 GB/s read and 4.4 GB/s write (Figure 3c/3d text)."""
    from datadir_mover.tiers.detect import detect_tiers
    from datadir_mover.tiers.fio import JobResult, raid_section
    from datadir_mover.tiers.host import RecordedRunner

    (tmp_path / "mounts").write_text("")
    [md10] = [t for t in detect_tiers(str(hw / "md-sysfs/sys"), str(tmp_path), RecordedRunner())
              if t.device == "/dev/md10"]

    def job(name, bw):
        return JobResult(name, name, name, "1M", 32, True, iops=bw / 2**20, bw_bytes=bw, lat_mean_us=None,
                         clat_p99_us=None)

    baseline = {"jobs": [{"name": "seqread", "bw_bytes": 2.5e9, "iops": 0}, {"name": "seqwrite", "bw_bytes": 2.4e9, "iops": 0}]}
    section = raid_section(md10, [job("seqread", 9.0e9), job("seqwrite", 4.4e9)], baseline)
    seq = section["sequential MB/s"]
    assert (section["level"], section["devices"]) == (10, 4)
    assert seq["expected_read"] == pytest.approx(10e9) and seq["expected_write"] == pytest.approx(4.8e9)
    assert seq["read_ratio"] == pytest.approx(0.9) and seq["write_ratio"] == pytest.approx(4.4 / 4.8)
    assert "--member-baseline" in raid_section(md10, [], None)["note"]
