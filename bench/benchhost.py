"""What the mover benches share on the host: the load average they print, and their own tmpfs under the
bench's INNOTIER_HOME (root only)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def bench_home_with_tmpfs(home: str, tier_name: str, size: str) -> Path:
    """Make ``home`` the bench's INNOTIER_HOME and mount a fresh tmpfs of ``size`` at ``home/tier_name``."""
    root = Path(home)
    root.mkdir(parents=True, exist_ok=True)
    os.environ["INNOTIER_HOME"] = str(root)
    tier = root / tier_name
    if tier.is_mount():
        subprocess.run(["umount", str(tier)], check=True)  # left by an interrupted run
    tier.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(tier)], check=True)
    return tier
