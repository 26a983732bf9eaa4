"""``persist status``: the last consistent copy, its age (what a power loss now would lose) and the RPO."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tuner.core.units import format_duration

from datadir_mover.persist import missed_sync
from datadir_mover.persist.config import load_config
from datadir_mover.persist.generations import current
from datadir_mover.persist.restore import RESTORE_STATE


def status(backing: str, now: float | None = None) -> dict[str, Any]:
    cfg = load_config(backing)
    now = now or time.time()
    gen = current(backing)
    out: dict[str, Any] = {"tier": cfg.tier, "backing": cfg.backing, "interval_s": cfg.interval_s,
                           "method": cfg.method, "restore_interrupted": Path(backing, RESTORE_STATE).exists(),
                           "missed_sync_at_shutdown": missed_sync.read(backing)}
    if gen is None:
        out.update({"last_copy": None, "statement": f"no consistent copy yet: everything on {cfg.tier} is lost "
                    "on a power loss until the first sync completes (`innotier persist sync`)"})
        return out
    age = max(0.0, now - gen.finished_at)
    rpo = cfg.interval_s + gen.duration_s
    out.update({"last_copy": gen.to_dict(), "age_s": round(age, 1), "data_loss_window_s": round(age, 1),
                "rpo_s": round(rpo, 1),
                "statement": (f"last consistent copy: generation {gen.id}, taken "
                              f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(gen.finished_at))} "
                              f"({format_duration(age, compact=True)} ago) by {gen.method} in {gen.duration_s:.1f} s. "
                              f"A power loss now loses the transactions committed in the last {format_duration(age, compact=True)}. "
                              f"Recovery point objective: up to {format_duration(rpo, compact=True)} of commits can be lost "
                              f"(sync every {format_duration(cfg.interval_s, compact=True)} + {gen.duration_s:.0f} s per sync).")})
    return out
