"""A simulated TPC-C terminal: its home warehouse and district, and the random inputs it keys in.

TPC-C 2.4.1.1: a terminal's home warehouse is fixed for the whole run; 2.8.1.1:
so is its district for Stock-Level.  Clients are spread over warehouses
round-robin (client i -> warehouse i mod W + 1), districts likewise.

The last-name syllables (4.3.2.3) and the run's NURand C constants come from
``tuner.tpcc.rand`` / ``tuner.tpcc.schema.run_constants``, shared with the loader
(C-Run of C_LAST differs from the C-Load stored by the loader by 65..119, not 96
or 112: clause 2.1.6.1).  NURand itself is ``tuner.tpcc.rand.nurand``'s formula,
inlined here on ``random()`` because this is the driver's hot path.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tuner.tpcc import rand as tpcc_rand
from tuner.tpcc.rand import NURandConstants as RunConstants
from tuner.tpcc.schema import CUSTOMERS_PER_D, DISTRICTS_PER_W, ITEMS

__all__ = ["Terminal", "RunConstants", "ITEMS", "DISTRICTS_PER_W", "CUSTOMERS_PER_D"]


@dataclass
class Terminal:
    number: int  # 0-based client number
    w_id: int  # home warehouse (2.4.1.1)
    d_id: int  # this terminal's district for Stock-Level (2.8.1.1)
    warehouses: int
    constants: RunConstants
    rng: random.Random = field(repr=False, default_factory=random.Random)
    names: tuple[str, ...] = field(repr=False, default=())

    @classmethod
    def for_client(cls, number: int, warehouses: int, constants: RunConstants, seed: int | None = None) -> "Terminal":
        rng = random.Random(seed if seed is not None else (number * 7919 + random.randrange(1 << 30)))
        return cls(number=number, w_id=number % warehouses + 1,
                   d_id=(number // warehouses) % DISTRICTS_PER_W + 1, warehouses=warehouses,
                   constants=constants, rng=rng, names=tuple(tpcc_rand.last_name(i) for i in range(1000)))

    # Uniform integers from random() (a 53-bit float): a third of randint's cost, and this is the
    # driver's hot path (a New-Order draws about 40 of them).

    def uniform(self, lo: int, hi: int) -> int:
        """random(lo, hi) of 2.1.5: uniform over [lo, hi], both included."""
        return lo + int(self.rng.random() * (hi - lo + 1))

    # -- NURand (2.1.6): ((random(0, A) | random(x, y)) + C) % (y - x + 1) + x

    def customer_id(self) -> int:
        r = self.rng.random
        return ((int(r() * 1024) | (1 + int(r() * CUSTOMERS_PER_D))) + self.constants.c_id) % CUSTOMERS_PER_D + 1

    def item_id(self) -> int:
        r = self.rng.random
        return ((int(r() * 8192) | (1 + int(r() * ITEMS))) + self.constants.ol_i_id) % ITEMS + 1

    def last_name(self) -> str:
        r = self.rng.random
        return self.names[((int(r() * 256) | int(r() * 1000)) + self.constants.c_last) % 1000]

    def other_warehouse(self) -> int:
        """A warehouse other than home, uniformly (2.4.1.5, 2.5.1.2); home when there is only one."""
        if self.warehouses == 1:
            return self.w_id
        w = self.uniform(1, self.warehouses - 1)
        return w if w < self.w_id else w + 1
