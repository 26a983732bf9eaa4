"""NumPy and SciPy for the sweep's statistics, imported when a statistic is first computed."""

from __future__ import annotations

import importlib
from typing import Any, Callable


class _OnFirstUse:
    """A module imported on first attribute access."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._mod: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._mod is None:
            self._mod = self._load()
        return getattr(self._mod, name)


# deferred: NumPy and SciPy cost about 1 s of CPU at every `innotier` start (bench/cli_startup.py), and every
# CLI module reaches the statistics through the spec (Target); they load when a statistic is first computed.
np = _OnFirstUse(lambda: importlib.import_module("numpy"))
sps = _OnFirstUse(lambda: importlib.import_module("scipy.stats"))
