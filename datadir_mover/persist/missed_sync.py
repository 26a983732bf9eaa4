"""The record of a sync at shutdown that did not happen: without it the boot restore would silently bring back
an older generation and the commits since it would be gone with no word.

``sync --offline --if-clean`` (the restore unit's ExecStop) writes ``sync-failed.json`` when its copy fails
(backing full or read-only, a file unreadable) or when the server did not stop cleanly.  It goes into the
backing directory, or, when that cannot be written (the very failure being recorded), into
``$INNOTIER_HOME/persist/<backing as a name>/``.  A restore refuses while either exists, naming the
generation it would bring back and how much it would lose; ``restore --accept-loss`` goes on and removes the
record, as does the next sync that completes.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path
from typing import Any

from tuner.core.durable import fsync_dir, write_json_atomic
from tuner.core.paths import innotier_home

RECORD = "sync-failed.json"


def _fallback_dir(backing: str) -> Path:
    return innotier_home() / "persist" / (re.sub(r"[^A-Za-z0-9]+", "-", str(Path(backing).resolve())).strip("-"))


def _places(backing: str) -> list[Path]:
    return [Path(backing, RECORD), _fallback_dir(backing) / RECORD]


def record(backing: str, reason: str, last_generation: str | None, now: float | None = None) -> Path:
    """Write the record where it can be written; returns where."""
    entry = {"failed_at": now or time.time(), "reason": reason, "last_generation": last_generation}
    try:
        write_json_atomic(_places(backing)[0], entry, mode=0o600)
        return _places(backing)[0]
    except OSError:
        fallback = _places(backing)[1]
        fallback.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_json_atomic(fallback, entry, mode=0o600)
        return fallback


def read(backing: str) -> dict[str, Any] | None:
    """The latest record of a missed sync at shutdown, or None."""
    found = []
    for p in _places(backing):
        with contextlib.suppress(FileNotFoundError, ValueError):
            found.append(json.loads(p.read_text()))
    return max(found, key=lambda e: e.get("failed_at", 0)) if found else None


def clear(backing: str) -> None:
    for p in _places(backing):
        if p.exists():
            p.unlink()
            fsync_dir(p.parent)
