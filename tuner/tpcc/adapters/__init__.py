"""Adapters for external TPC-C drivers: one module per tool behind one small interface, and an explicit registry.

Every adapter module has::

    name: str                                             # "hammerdb", "tpcc-mysql", "sysbench-tpcc", "go-tpc"
    find_tool(tool_path: str | None) -> str               # --tool-path or PATH; else tuner.core.errors.ToolMissing
    load(spec, warehouses, database="tpcc", tool_path=None, *, drop=False, jobs=None, on_line=None) -> float
    run(spec, cfg: RunConfig, *, on_line=None, on_measuring=None) -> tuner.core.measure.RunResult
    parse_output(text: str) -> tuner.core.measure.RunResult    # the tool's console output, recorded or live

``load`` builds the peer's own schema in its own database (schemas differ
between tools; give each peer a separate database) and returns seconds taken.
``run`` uses cfg's warehouses, clients, warm-up, duration and interval, and
fills ``RunResult.driver`` with the adapter's name.  ``on_line`` receives the
tool's console lines (passwords redacted) as they come, for live progress;
``on_measuring(seconds)`` is called once when the measured phase starts (after
the warm-up), with the length the tool will measure.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tuner.core.errors import UsageError

# name -> module (imported on first use, so `innotier --help` stays fast)
ADAPTERS = {
    "hammerdb": "tuner.tpcc.adapters.hammerdb",
    "tpcc-mysql": "tuner.tpcc.adapters.tpcc_mysql",
    "sysbench-tpcc": "tuner.tpcc.adapters.sysbench_tpcc",
    "go-tpc": "tuner.tpcc.adapters.go_tpc",
}


BUILTIN = "builtin"


def names() -> tuple[str, ...]:
    return tuple(ADAPTERS)


def drivers() -> tuple[str, ...]:
    """Every value of a run's driver: the built-in one, then the external tools of the registry."""
    return (BUILTIN,) + names()


def get(name: str) -> ModuleType:
    """The adapter module for ``name``; an unknown name raises UsageError listing the valid ones."""
    module = ADAPTERS.get(name)
    if module is None:
        raise UsageError(f"unknown external driver {name!r}; use one of {', '.join(ADAPTERS)}")
    return importlib.import_module(module)
