"""A real throttled tier (root): a loop device over a file, ext4, limits in the block-I/O cgroup.

What is proven is that the kernel counts the I/O of fio and of a sandbox server against the throttled
device inside the group (its throttle accounting), which is what makes the limits bind them; how slow the
tier then is shows in `tiers bench` and `docs/tiers.md`, never in a timed assertion here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tuner.core.io_throttle import Limits, ThrottleGroup
from tuner.core.probe import read_mounts
from datadir_mover.tiers.detect import tier_for_path
from datadir_mover.tiers.plan import apply_plan
from datadir_mover.tiers.provision import plan_create, plan_destroy
from datadir_mover.tiers.requests import ThrottledCreate
from tuner.core.errors import UsageError
from waiting import wait_for

pytestmark = pytest.mark.root


def _loops_of(backing: Path) -> list[str]:
    out = []
    for entry in Path("/sys/block").iterdir():
        text = (entry / "loop" / "backing_file")
        if text.exists() and text.read_text().strip() == str(backing):
            out.append(entry.name)
    return out


@pytest.fixture
def throttled(tmp_path):
    """A 48M throttled tier at generous limits (the test is about binding, not speed), destroyed after."""
    mount, backing = tmp_path / "slow", Path("/var/tmp") / f"innotier-test-{os.getpid()}-slow.img"
    request = ThrottledCreate(size_bytes=48 << 20, mount=str(mount), backing=str(backing),
                              limits=Limits(read_iops=5000, write_iops=4000))
    apply_plan(plan_create(request))
    try:
        yield mount, backing
    finally:
        if any(m.mountpoint == str(mount) for m in read_mounts()):
            apply_plan(plan_destroy(str(mount), force=True))


def test_dry_run_prints_the_commands_and_changes_nothing(tmp_path, cli):
    backing = tmp_path / "b.img"
    proc = cli("tiers", "create", "throttled", "--size", "64M", "--backing", str(backing), "--mount",
               str(tmp_path / "m"), "--write-iops", "100", "--dry-run", check=True)
    assert "losetup --find --show --direct-io=on" in proc.stdout
    assert "blkio.throttle.write_iops_device" in proc.stdout or "io.max" in proc.stdout
    assert not backing.exists() and not (tmp_path / "m").exists() and not _loops_of(backing)


def test_bad_input_is_one_line_and_changes_nothing(tmp_path, cli):
    (tmp_path / "taken.img").write_bytes(b"x")
    cases = [
        (["--write-iops", "100", "--backing", str(tmp_path / "taken.img")], "exists; give a new file"),
        (["--backing", str(tmp_path / "b.img")], "needs a limit"),
        (["--write-iops", "0", "--backing", str(tmp_path / "b.img")], "must be a positive number"),
        (["--write-iops", "10", "--backing", str(tmp_path / "no" / "b.img")], "is not a directory"),
    ]
    for extra, words in cases:
        proc = cli("tiers", "create", "throttled", "--size", "64M", "--mount", str(tmp_path / "m"), *extra)
        assert proc.returncode != 0 and words in proc.stderr, (extra, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    assert (tmp_path / "taken.img").read_bytes() == b"x" and not (tmp_path / "b.img").exists()
    assert not (tmp_path / "m").exists()
    with pytest.raises(UsageError, match="needs a limit"):
        plan_create(ThrottledCreate(size_bytes=1 << 20, mount=str(tmp_path / "m"), backing=str(tmp_path / "b")))


def test_fio_and_a_sandbox_server_are_bound_by_the_limits(throttled, shared_sandbox, cli):
    mount, backing = throttled
    tier = tier_for_path(mount)
    assert tier.kind == "throttled" and not tier.volatile
    assert any("5000 read IOPS, 4000 write IOPS" in n for n in tier.notes)
    group = ThrottleGroup()
    device = next(d for d, lim in group.limits().items() if lim == Limits(read_iops=5000, write_iops=4000))
    before = group.served(device)

    proc = cli("tiers", "bench", str(mount), "--size", "8M", "--runtime", "1", "--json", check=True)
    jobs = {j["name"]: j for j in json.loads(proc.stdout)["jobs"]}
    assert set(jobs) >= {"randread", "randwrite"}
    after_fio = group.served(device)
    assert after_fio.reads > before.reads and after_fio.writes > before.writes  # fio's I/O was in the group

    shared_sandbox.stop("clean")
    shared_sandbox.start()
    assert shared_sandbox.running_pid() in group.members()


def test_destroy_removes_limits_loop_and_backing_file(tmp_path):
    mount, backing = tmp_path / "slow", tmp_path / "slow.img"
    apply_plan(plan_create(ThrottledCreate(size_bytes=32 << 20, mount=str(mount), backing=str(backing),
                                           limits=Limits(write_iops=100))))
    loops = _loops_of(backing)
    assert len(loops) == 1 and backing.exists()
    number = Path(f"/sys/block/{loops[0]}/dev").read_text().strip()
    assert ThrottleGroup().limits()[number] == Limits(write_iops=100)
    apply_plan(plan_destroy(str(mount)))
    wait_for(lambda: not _loops_of(backing), 10, "the loop device to detach")
    assert number not in ThrottleGroup().limits() and not backing.exists()
    assert not any(m.mountpoint == str(mount) for m in read_mounts())
