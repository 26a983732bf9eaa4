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
