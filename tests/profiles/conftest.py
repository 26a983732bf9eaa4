"""Fixtures for the profile tests: one real MariaDB sandbox per page size (reused, reconfigured between profiles)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tuner.core.probe import MountEntry

HERE = Path(__file__).resolve().parent
SMALL_POOL = "64M"


@pytest.fixture(scope="session")
def page_sandboxes(innotier_home):
    """get(page) -> a MariaDB 10.11 sandbox initialized with that page size (created on first use, small buffer pool)."""
    from tuner.core import sandbox as sbx

    created: dict[str, sbx.Sandbox] = {}

    def get(page: str) -> sbx.Sandbox:
        if page not in created:
            created[page] = sbx.create(f"prof-{page}", page_size=page,
                                       options={"innodb_buffer_pool_size": SMALL_POOL})
        return created[page]

    yield get
    for sb in created.values():
        if sb.state() == sbx.SandboxState.RUNNING:
            sb.stop("kill")


@pytest.fixture(scope="session")
def ramfs_dir():
    """A real ramfs mount (ramfs never accepts O_DIRECT); needs root."""
    d = tempfile.mkdtemp(prefix="innotier-ramfs-")
    subprocess.run(["mount", "-t", "ramfs", "ramfs", d], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", d], check=False)
        Path(d).rmdir()


def parse_mount_line(line: str) -> MountEntry:
    """A `mount(8)` line (`dev on dir type fs (opts)`, the format of the recorded DAX fixtures) as a MountEntry."""
    m = re.match(r"^(\S+) on (\S+) type (\S+) \(([^)]*)\)", line.strip())
    assert m, f"not a mount(8) line: {line!r}"
    return MountEntry(m.group(1), m.group(2), m.group(3), tuple(m.group(4).split(",")))


@pytest.fixture
def dax_mount(fixtures_dir, tmp_path):
    """The recorded ext4-DAX mount (pmem docs) with its mount point mapped onto a local directory.

    Device, type and options are the recorded ones; only the mount point is replaced, because
    lint resolves the tier path on this machine.  Returns (tier_path, mounts)."""
    rec = parse_mount_line((fixtures_dir / "hardware/mounts/pmemdocs-mount-ext4-dax.txt").read_text())
    assert rec.dax
    local = MountEntry(rec.device, str(tmp_path), rec.fstype, rec.options)
    return str(tmp_path), [MountEntry("/dev/vda", "/", "ext4", ("rw",)), local]
