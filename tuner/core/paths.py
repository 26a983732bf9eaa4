"""Where innotier keeps its state: $INNOTIER_HOME and the folders under it."""

from __future__ import annotations

import os
from pathlib import Path


def innotier_home() -> Path:
    """Where sandboxes, golden copies, journals and results live: $INNOTIER_HOME, else ~/.local/share/innotier."""
    env = os.environ.get("INNOTIER_HOME")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "innotier"


def sandboxes_dir() -> Path:
    return innotier_home() / "sandboxes"


def innotier_cache() -> Path:
    """Where built artefacts shared by every INNOTIER_HOME of this machine live (server trees, lab images).

    $INNOTIER_CACHE, else /var/cache/innotier for root, else $XDG_CACHE_HOME/innotier (~/.cache/innotier).
    Unlike INNOTIER_HOME (one per test session in CI), this survives between runs, so a build is paid once
    per machine.
    """
    env = os.environ.get("INNOTIER_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    if os.geteuid() == 0:
        return Path("/var/cache/innotier")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "innotier"
