"""`innotier tiers ...`, `innotier move ...`, `innotier persist ...`."""

from __future__ import annotations

import importlib

AREAS = ("datadir_mover.tiers_cli", "datadir_mover.move_cli", "datadir_mover.persist_cli")


def register(sub) -> None:
    for name in AREAS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
