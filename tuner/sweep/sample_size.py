"""How many blocks a comparison needs: 80% power from the noncentral t, with the spread's own uncertainty.

The spread measured so far is itself uncertain (a few blocks give it a few degrees of freedom), so the
answer is a range: the blocks needed at the low and high ends of the spread's 80% interval (chi-square
on its degrees of freedom).  Power at N blocks: for "differs", P(|T| > c_N) with T noncentral t on the
degrees of freedom N blocks give; for "equivalent" (an effect inside the margin), the chance that the
interval at N blocks lies inside the margin.  ``c_N`` is the look's critical value from the schedule, so
the count already pays for the looks and the family.  The count is capped by the schedule's last look.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from tuner.sweep.numlib import sps

POWER = 0.80
SPREAD_INTERVAL = 0.80


@dataclass(frozen=True)
class BlocksNeeded:
    """Total blocks for 80% power at the low and high end of the spread; None: beyond ``cap``."""

    low: int | None
    high: int | None
    cap: int

    def more_text(self, have: int) -> str:
        """How many more blocks 80% power needs, as the report's verdict says it."""
        if self.low is None:
            return f"80% power would need more blocks than the schedule's {self.cap} at this spread"
        lo = max(self.low - have, 1)
        if self.high is None:
            return f"80% power needs {lo} to more than the schedule's {self.cap} blocks allow"
        hi = max(self.high - have, lo)
        more = f"~{lo} more block{'s' if hi > 1 else ''}" if lo == hi else f"{lo}-{hi} more blocks"
        return f"{more} for 80% power"

    def to_dict(self) -> dict:
        return {"low": self.low, "high": self.high, "cap": self.cap, "power": POWER}


def power_at(n: int, effect: float, sd: float, df: int, crit: float, margin: float) -> float:
    """Chance that ``n`` blocks decide: the interval excludes 0 ("differs") or lies inside +/-margin."""
    if sd <= 0.0:
        return 1.0
    se = sd / math.sqrt(n)
    differs = float(sps.nct.sf(crit, df, abs(effect) / se) + sps.nct.cdf(-crit, df, abs(effect) / se))
    room = margin - crit * se
    inside = 0.0
    if room > 0:
        inside = float(sps.t.cdf((room - abs(effect)) / se, df) - sps.t.cdf((-room - abs(effect)) / se, df))
    return max(differs, inside)


def blocks_for(effect: float, sd: float, critical: Callable[[int], float], df_per_block: int, first: int,
               cap: int, margin: float, floor: Callable[[int], float] | None = None) -> int | None:
    """The fewest total blocks in first..cap with 80% power; None when even ``cap`` has less.

    ``floor(n)``, when given, is a cheap critical value never above ``critical(n)``: power only falls as the
    critical value rises, so a count that lacks power at the floor lacks it at the real value too, and the
    real one (a simulation per count for a fixed design: about a second each) is asked only from the first
    count the floor lets through."""
    start = max(first, 2)
    if floor is not None:
        start = next((n for n in range(start, cap + 1)
                      if power_at(n, effect, sd, (n - 1) * df_per_block, floor(n), margin) >= POWER), cap + 1)
    for n in range(start, cap + 1):
        if power_at(n, effect, sd, (n - 1) * df_per_block, critical(n), margin) >= POWER:
            return n
    return None


def blocks_needed(effect: float, sd: float, df: int | None, critical: Callable[[int], float], df_per_block: int,
                  first: int, cap: int, margin: float, floor: Callable[[int], float] | None = None) -> BlocksNeeded:
    """The range of total blocks needed over the spread's 80% interval (a point when ``df`` is None: assumed)."""
    if df is None or df < 1:
        n = blocks_for(effect, sd, critical, df_per_block, first, cap, margin, floor)
        return BlocksNeeded(n, n, cap)
    tail = (1.0 - SPREAD_INTERVAL) / 2.0
    sd_low = sd * math.sqrt(df / float(sps.chi2.ppf(1.0 - tail, df)))
    sd_high = sd * math.sqrt(df / float(sps.chi2.ppf(tail, df)))
    return BlocksNeeded(blocks_for(effect, sd_low, critical, df_per_block, first, cap, margin, floor),
                        blocks_for(effect, sd_high, critical, df_per_block, first, cap, margin, floor), cap)
