"""The TPC-C transaction mix: one validated table, and the shuffled deck that draws from it.

TPC-C 5.2.3 sets the minimum shares of the mix (Payment 43%, Order-Status,
Delivery and Stock-Level 4% each; New-Order takes the rest) and 5.2.4.2 lets the
terminal pick the next transaction from a shuffled deck of cards, reshuffled when
exhausted; its example deck is 23 cards, 10 New-Order, 10 Payment and one each of
the others (43.5/43.5/4.3/4.3/4.3%), which is what HammerDB uses.  That deck is the
default.  The 100-card 45/43/4/4/4 deck (go-tpc's default ``--weight``,
BenchBase) yields about 3.5% more New-Orders per transaction; it is available only
when asked for (``--deck 100``) and every result names the deck it used.

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
    weight: int  # cards in the deck
    min_share: float  # TPC-C 5.2.3 minimum share of the mix (percent); 0 for New-Order
    keying_s: float  # TPC-C 5.2.5.7 keying time
    think_mean_s: float  # TPC-C 5.2.5.7 mean think time


def _mix(weights: dict[str, int]) -> tuple[MixEntry, ...]:
    times = {"new_order": (0.0, 18.0, 12.0), "payment": (43.0, 3.0, 12.0), "order_status": (4.0, 2.0, 10.0),
             "delivery": (4.0, 2.0, 5.0), "stock_level": (4.0, 2.0, 5.0)}
    return tuple(MixEntry(op, weights[op], *times[op]) for op in OPS)


# The decks, by name; DEFAULT_DECK is the spec's.
DECKS: dict[str, tuple[MixEntry, ...]] = {
    "23": _mix({"new_order": 10, "payment": 10, "order_status": 1, "delivery": 1, "stock_level": 1}),
    "100": _mix({"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}),
}
DEFAULT_DECK = "23"
DECK_DESCRIPTIONS = {
    "23": "23 cards 10/10/1/1/1 (TPC-C 5.2.4.2, as HammerDB)",
    "100": "100 cards 45/43/4/4/4 (as go-tpc's default weights; not the spec's deck)",
}
MIX = DECKS[DEFAULT_DECK]


def validate_mix(mix: tuple[MixEntry, ...] = MIX) -> tuple[MixEntry, ...]:
    """The table must name every op once and every share must meet its 5.2.3 minimum."""
    ops = [e.op for e in mix]
    if sorted(ops) != sorted(OPS):
        raise ValueError(f"the mix must name each of {', '.join(OPS)} exactly once, not {ops}")
    total = sum(e.weight for e in mix)
    if total < 1 or any(e.weight < 1 for e in mix):
        raise ValueError(f"every transaction needs at least one card; the weights are {[e.weight for e in mix]}")
    for e in mix:
        if 100.0 * e.weight / total < e.min_share:
            raise ValueError(f"{e.op} has {e.weight} of {total} cards ({100.0 * e.weight / total:.1f}%), below the "
                             f"TPC-C 5.2.3 minimum of {e.min_share}%")
    return mix


for _deck in DECKS.values():
    validate_mix(_deck)
BY_OP = {e.op: e for e in MIX}


def deck_mix(name: str) -> tuple[MixEntry, ...]:
    try:
        return DECKS[name]
    except KeyError:
        raise ValueError(f"unknown deck {name!r}; use one of {', '.join(DECKS)}") from None


def realized_mix(counts: dict[str, dict[str, int]]) -> dict[str, float]:
    """Each transaction type's share (percent) of the transactions run, one per input (retries not counted)."""
    done = {op: sum(v for k, v in c.items() if k != "retry") for op, c in counts.items()}
    total = sum(done.values())
    return {op: round(100.0 * n / total, 2) if total else 0.0 for op, n in done.items()}


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
