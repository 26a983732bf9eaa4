"""Fixtures of the mover's tests: real tmpfs and zram-ext4 mounts (root), the golden loaded datadir, clones."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import mvhelpers  # noqa: E402


@pytest.fixture(scope="session")
def mv_tiers(innotier_home):
    """{'tmpfs': path, 'zram': path}: a real tmpfs and a real zram-backed ext4, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.fail("the mover's tests need root (mounts, zram); CI runs them as root")
    base = Path(innotier_home) / "tiers"
    paths = {"tmpfs": str(base / "tmpfs"), "zram": str(base / "zram")}
    mvhelpers.mount_tmpfs(paths["tmpfs"], "1G")
    try:
        mvhelpers.mount_zram_ext4(paths["zram"], "1G")
        yield paths
    finally:
        for p in paths.values():
            mvhelpers.unmount(p)


@pytest.fixture(scope="session")
def golden(innotier_home):
    return mvhelpers.golden_sandbox()


@pytest.fixture
def clone(golden, request):
    """A running clone of the golden sandbox, named for the test; killed and destroyed afterwards."""
    made = []

    def make(name: str, datadir: str | None = None, start: bool = True):
        sb = mvhelpers.clone_sandbox(name, datadir=datadir, start=start)
        made.append(sb.name)
        return sb

    yield make
    from tuner.sandbox import Sandbox

    for name in made:
        try:
            Sandbox.load(name).destroy(force=True)
        except Exception:
            pass
