"""TPC-C random helpers (TPC-C standard specification v5.11, clauses 2.1.6, 4.3.2).

The driver imports ``nurand``, ``last_name`` and ``make_constants`` from here; the
loader uses the same definitions in SQL form (``tuner.tpcc.loader``), so the two
agree on what a last name and a NURand draw are.

* NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x   (clause 2.1.6),
  with A = 255 for C_LAST, 1023 for C_ID, 8191 for OL_I_ID.
* C is a run-time constant chosen at random in [0 .. A], the same for all terminals.
  For C_LAST, C-Run must differ from the C-Load used to populate the database by a
  C-Delta = |C-Run - C-Load| in [65 .. 119], excluding 96 and 112 (clause 2.1.6.1),
  so the loader stores its C-Load in ``tpcc_meta`` and the run picks a C-Run from it.
* Last names are three syllables picked by the digits of a number in [0 .. 999]
  (clause 4.3.2.3).
* a-strings / n-strings: random alphanumeric / numeric characters of a random length
  in [x .. y] (clause 4.3.2.2); zip codes are an n-string of 4 followed by "11111"
  (clause 4.3.2.7); 10% of I_DATA and S_DATA hold "ORIGINAL" at a random position
  (clause 4.3.3.1).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

SYLLABLES = ("BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING")
ALPHANUMERIC = string.ascii_letters + string.digits
NUMERIC = string.digits
ORIGINAL = "ORIGINAL"
ORIGINAL_FRACTION = 0.10

# NURand A values (clause 2.1.6)
A_C_LAST = 255
A_C_ID = 1023
A_OL_I_ID = 8191

# C-Delta rule for C_LAST (clause 2.1.6.1)
C_DELTA_MIN, C_DELTA_MAX = 65, 119
C_DELTA_EXCLUDED = (96, 112)


def nurand(a: int, x: int, y: int, c: int, rng: random.Random | None = None) -> int:
    """Non-uniform random number in [x .. y] (clause 2.1.6)."""
    r = rng or random
    return (((r.randint(0, a) | r.randint(x, y)) + c) % (y - x + 1)) + x


def last_name(num: int) -> str:
    """C_LAST for a number in [0 .. 999]: syllables of its hundreds, tens and units (clause 4.3.2.3)."""
    if not 0 <= num <= 999:
        raise ValueError(f"last-name number {num} is outside 0..999")
    return SYLLABLES[num // 100] + SYLLABLES[(num // 10) % 10] + SYLLABLES[num % 10]


def a_string(lo: int, hi: int, rng: random.Random | None = None) -> str:
    """Random a-string [lo .. hi] (clause 4.3.2.2)."""
    r = rng or random
    return "".join(r.choices(ALPHANUMERIC, k=r.randint(lo, hi)))


def n_string(lo: int, hi: int, rng: random.Random | None = None) -> str:
    """Random n-string [lo .. hi] (clause 4.3.2.2)."""
    r = rng or random
    return "".join(r.choices(NUMERIC, k=r.randint(lo, hi)))


def zip_code(rng: random.Random | None = None) -> str:
    """Zip code: an n-string of 4 then "11111" (clause 4.3.2.7)."""
    return n_string(4, 4, rng) + "11111"


def data_with_original(lo: int, hi: int, rng: random.Random | None = None) -> str:
    """I_DATA / S_DATA: a-string [lo .. hi]; for 10% "ORIGINAL" at a random position (clause 4.3.3.1)."""
    r = rng or random
    s = a_string(lo, hi, r)
    if r.random() < ORIGINAL_FRACTION:
        pos = r.randint(0, len(s) - len(ORIGINAL))
        s = s[:pos] + ORIGINAL + s[pos + len(ORIGINAL):]
    return s


def valid_c_run(c_load: int, c_run: int) -> bool:
    """True when C-Run for C_LAST is allowed given C-Load (clause 2.1.6.1)."""
    delta = abs(c_run - c_load)
    return C_DELTA_MIN <= delta <= C_DELTA_MAX and delta not in C_DELTA_EXCLUDED and 0 <= c_run <= A_C_LAST


def choose_c_run(c_load: int, rng: random.Random | None = None) -> int:
    """A random C-Run for C_LAST satisfying the C-Delta rule for ``c_load`` (clause 2.1.6.1)."""
    if not 0 <= c_load <= A_C_LAST:
        raise ValueError(f"C-Load {c_load} is outside 0..{A_C_LAST}")
    r = rng or random
    candidates = [c for c in range(A_C_LAST + 1) if valid_c_run(c_load, c)]
    return r.choice(candidates)  # never empty: c_load +/- 65..119 reaches inside 0..255 on one side


@dataclass(frozen=True)
class NURandConstants:
    """The C values of one load or one run (clause 2.1.6): the same for every terminal."""

    c_last: int
    c_id: int
    ol_i_id: int

    def to_dict(self) -> dict[str, int]:
        return {"c_last": self.c_last, "c_id": self.c_id, "ol_i_id": self.ol_i_id}


def make_constants(seed: int | None = None, c_load: int | None = None) -> NURandConstants:
    """C constants drawn at random (seeded for reproducibility).

    Without ``c_load`` these are load constants (C-Load).  With ``c_load`` (read
    from the schema's tpcc_meta) they are run constants whose C_LAST obeys the
    C-Delta rule of clause 2.1.6.1.
    """
    rng = random.Random(seed)
    c_id = rng.randint(0, A_C_ID)
    ol_i_id = rng.randint(0, A_OL_I_ID)
    c_last = rng.randint(0, A_C_LAST) if c_load is None else choose_c_run(c_load, rng)
    return NURandConstants(c_last=c_last, c_id=c_id, ol_i_id=ol_i_id)
