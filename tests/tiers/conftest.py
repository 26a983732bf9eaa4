"""Tier-test fixtures: the recorded hardware trees, and real mounts that are always cleaned up.

``made_tiers`` hands a test a list to put the mount points it creates in; whatever
the test's outcome, the finalizer unmounts each one and, for zram, resets and
hot-removes the device that was mounted there (only that device: other people
may be using zram on the same host).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tuner.core.probe import read_mounts


@pytest.fixture(scope="session")
def hw(fixtures_dir) -> Path:
    return fixtures_dir / "hardware"


@pytest.fixture(scope="session")
def local_tiers(fixtures_dir) -> Path:
    return fixtures_dir / "local-tiers"


def _teardown_mount(path: str) -> None:
    for _ in range(3):
        entries = [m for m in read_mounts() if m.mountpoint == path]
        if not entries:
            break
        device = entries[-1].device
        subprocess.run(["umount", path], check=False, capture_output=True)
        m = re.match(r"^/dev/zram(\d+)$", device)
        if m and not any(e.device == device for e in read_mounts()):
            for attr, value in (("/sys/block/zram%s/reset" % m.group(1), "1"),
                                ("/sys/class/zram-control/hot_remove", m.group(1))):
                for _ in range(20):
                    try:
                        Path(attr).write_text(value)
                        break
                    except OSError:
                        time.sleep(0.1)


@pytest.fixture
def made_tiers():
    paths: list[str] = []
    yield paths
    for p in paths:
        _teardown_mount(os.path.abspath(p))

