"""`innotier tiers ...`, `innotier move ...`, `innotier persist ...`."""

from __future__ import annotations

from tuner.cliutil import register_modules

AREAS = ("datadir_mover.tiers_cli", "datadir_mover.move_cli", "datadir_mover.persist_cli")


def register(sub) -> None:
    register_modules(sub, AREAS)
