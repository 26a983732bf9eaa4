"""`tier_bench:` in a sweep spec: the real `tiers bench` (fio) on a tier the sweep provides, as a cell's record
keeps it; a bench that cannot run fails with the tier named."""

from __future__ import annotations

import pytest

from tuner.core.errors import SweepError
from tuner.sweep.placement import TierSession
from tuner.sweep.spec import TierBench, TierSpec
from tuner.sweep.tier_bench import bench_tiers


@pytest.fixture
def disk_tier(innotier_home):
    session = TierSession("fsmatrix-bench", {"disk": TierSpec(name="disk", kind="home")})
    session.open(["disk"])
    yield session
    assert session.close() == []


def test_bench_of_a_cells_tier_runs_fio_and_keeps_every_job(disk_tier):
    out = bench_tiers(disk_tier, ["disk"], TierBench(size=4 << 20, runtime=1))
    bench = out["disk"]
    assert [j["name"] for j in bench["jobs"]] == ["seqwrite", "seqread", "randread", "randwrite"], bench
    assert all(j["iops"] > 0 and j["bw_bytes"] > 0 for j in bench["jobs"]), bench
    assert bench["tier"]["mountpoint"] and bench["stored_at"] and bench["fio_version"].startswith("fio")
    assert not list(disk_tier.root("disk").iterdir())   # fio's files are gone before the clone lands there


def test_a_bench_that_does_not_fit_fails_the_cell_naming_the_tier(disk_tier):
    with pytest.raises(SweepError, match=r"^tiers bench of tier disk: --size .* does not fit"):
        bench_tiers(disk_tier, ["disk"], TierBench(size=1 << 50, runtime=1))
