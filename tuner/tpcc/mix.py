"""The TPC-C transaction mix: one validated table, and the shuffled deck that draws from it.

TPC-C 5.2.3 sets the minimum shares of the mix (Payment 43%, Order-Status,
Delivery and Stock-Level 4% each; New-Order takes the rest) and 5.2.4.2 allows
the terminal to pick the next transaction from a shuffled deck of cards in
which each type appears in proportion to its weight.  We use the usual 45/43/4/4/4
mix (go-tpc ``--weight 45,43,4,4,4``, BenchBase) with a deck of 100 cards that
is reshuffled when exhausted, so every 100 transactions of one client hold the
exact mix.

Keying and think times are TPC-C 5.2.5.7 (keying, fixed) and 5.2.5.4 (think,
negative exponential with the given mean, truncated at 10x the mean); they are
used only with ``--keying-and-think``, as the peers leave them off by default.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from tuner.core.measure import OPS


@dataclass(frozen=True)
class MixEntry:
    op: str  # one of tuner.core.measure.OPS
    weight: int  # cards in the 100-card deck
    min_share: float  # TPC-C 5.2.3 minimum share of the mix (percent); 0 for New-Order
    keying_s: float  # TPC-C 5.2.5.7 keying time
    think_mean_s: float  # TPC-C 5.2.5.7 mean think time


MIX: tuple[MixEntry, ...] = (
    MixEntry("new_order", 45, 0.0, 18.0, 12.0),
    MixEntry("payment", 43, 43.0, 3.0, 12.0),
    MixEntry("order_status", 4, 4.0, 2.0, 10.0),
    MixEntry("delivery", 4, 4.0, 2.0, 5.0),
    MixEntry("stock_level", 4, 4.0, 2.0, 5.0),
)


def validate_mix(mix: tuple[MixEntry, ...] = MIX) -> tuple[MixEntry, ...]:
    """The table must name every op once, sum to 100 cards and meet the 5.2.3 minimums."""
    ops = [e.op for e in mix]
    if sorted(ops) != sorted(OPS):
        raise ValueError(f"the mix must name each of {', '.join(OPS)} exactly once, not {ops}")
    total = sum(e.weight for e in mix)
    if total != 100:
        raise ValueError(f"the mix weights sum to {total}; they must sum to 100")
    for e in mix:
        if e.weight < e.min_share:
            raise ValueError(f"{e.op} has weight {e.weight}, below the TPC-C 5.2.3 minimum of {e.min_share}%")
    return mix


validate_mix()
BY_OP = {e.op: e for e in MIX}


class Deck:
    """TPC-C 5.2.4.2 card deck: draw without replacement, reshuffle when empty."""

    __slots__ = ("_cards", "_rng", "_full")

    def __init__(self, rng: random.Random, mix: tuple[MixEntry, ...] = MIX) -> None:
        self._rng = rng
        self._cards: list[str] = []
        self._full = [e.op for e in validate_mix(mix) for _ in range(e.weight)]

    def draw(self) -> str:
        if not self._cards:
            self._cards = self._full[:]
            self._rng.shuffle(self._cards)
        return self._cards.pop()


def keying_seconds(op: str) -> float:
    return BY_OP[op].keying_s


def think_seconds(op: str, rng: random.Random) -> float:
    """Negative exponential think time, truncated at 10x its mean (TPC-C 5.2.5.4)."""
    mean = BY_OP[op].think_mean_s
    return min(-math.log(1.0 - rng.random()) * mean, 10.0 * mean)
