"""When an adaptive run stops, and how long it still has: pure functions of what is recorded.

Before each block after the first, the runner asks ``decide``: stop when every planned comparison is
decided (from ``min_blocks`` on), or when one more block would overrun the time budget.  The stop rule
is fixed at the first start of a run (``check_unchanged``): the looks and the error they spend are
planned with it, so only the budget may change on resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tuner.core.errors import SweepError
from tuner.core.units import format_duration
from tuner.sweep.spec import StopRule


@dataclass(frozen=True)
class Decision:
    stop: bool
    reason: str = ""


def decide(rule: StopRule, blocks: int, spent: float, verdicts: Sequence[Any]) -> Decision:
    """After ``blocks`` complete blocks that took ``spent`` seconds of cell runs."""
    if blocks == 0:
        return Decision(False)
    undecided = [v for v in verdicts if not v.decided]
    if blocks >= rule.min_blocks and verdicts and not undecided:
        return Decision(True, "target reached: every comparison is decided")
    if blocks >= rule.max_blocks:
        return Decision(True, f"max_blocks ({rule.max_blocks}) reached; " + more_blocks_text(undecided))
    per_block = spent / blocks
    # the budget decides from min_blocks on: fewer blocks cannot decide anything, so they always run
    if blocks >= rule.min_blocks and spent + per_block > rule.budget:
        return Decision(True, f"time budget ({format_duration(rule.budget)}): one more block would overrun it; "
                        + more_blocks_text(undecided))
    return Decision(False)


def more_blocks_text(undecided: Sequence[Any]) -> str:
    """What 80% power needs for the comparisons still open (each a range, capped by the schedule)."""
    parts = [f"{v.name}: {v.ratio.needed.more_text(v.ratio.n)}" for v in undecided
             if v.ratio is not None and v.ratio.needed is not None]
    missing = [v.name for v in undecided if v.ratio is None]
    text = "; ".join(parts) if parts else "nothing is left undecided" if not undecided else ""
    if missing:
        text += ("; " if text else "") + f"could not be computed: {', '.join(missing)}"
    return text or "the undecided comparisons have no estimate yet"


def check_unchanged(rule: StopRule, stored: dict[str, Any] | None, run_id: str) -> None:
    """Refuse a stop rule that differs from the one the run started with (the budget may change)."""
    if not stored:
        return
    changes = rule.changes_from(stored)
    if changes:
        raise SweepError(f"run {run_id} started with a different stop rule ({', '.join(changes)}): its looks and "
                         "error rate were planned with the first one, so only the budget may change on resume; "
                         "restore the stop rule, or rename the sweep to start a new run")


def seconds_left(per_cell: float, cells_after: int, cell_elapsed: float, budget_left: float | None,
                 golden_extra: float = 0.0) -> float:
    """Time left: the rest of the current cell, the cells after it, at most what the budget leaves."""
    current = max(per_cell - cell_elapsed, 0.0)
    left = current + per_cell * cells_after
    if budget_left is not None:  # adaptive: the stop rule may end it sooner, never later
        left = min(left, max(budget_left - cell_elapsed, current))
    return left + golden_extra
