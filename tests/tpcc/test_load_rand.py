"""TPC-C random helpers (clause 2.1.6, 4.3.2) and the loader's random pool: pure functions, no server."""

from __future__ import annotations

import random
import string

import pytest

from tuner.tpcc import rand
from tuner.tpcc.loader import _random_pool


def test_last_names_follow_the_syllable_table():
    assert rand.last_name(0) == "BARBARBAR"
    assert rand.last_name(371) == "PRICALLYOUGHT"  # clause 4.3.2.3's own example
    assert rand.last_name(999) == "EINGEINGEING"
    assert len({rand.last_name(i) for i in range(1000)}) == 1000
    with pytest.raises(ValueError):
        rand.last_name(1000)


def test_nurand_stays_in_range_and_is_not_uniform():
    rng = random.Random(1)
    draws = [rand.nurand(255, 0, 999, 123, rng) for _ in range(50000)]
    assert min(draws) >= 0 and max(draws) <= 999
    counts = sorted((draws.count(v) for v in set(draws)), reverse=True)
    assert counts[0] > 3 * 50000 / 1000  # the OR skews some values far above uniform
    ids = [rand.nurand(1023, 1, 3000, 7, rng) for _ in range(5000)]
    assert min(ids) >= 1 and max(ids) <= 3000


@pytest.mark.parametrize("c_load", [0, 1, 64, 96, 128, 200, 255])
def test_c_run_obeys_the_delta_rule(c_load):
    rng = random.Random(c_load)
    for _ in range(200):
        c_run = rand.choose_c_run(c_load, rng)
        delta = abs(c_run - c_load)
        assert 65 <= delta <= 119 and delta not in (96, 112) and 0 <= c_run <= 255


def test_valid_c_run_and_constants():
    assert rand.valid_c_run(100, 165) and rand.valid_c_run(100, 219)
    assert not rand.valid_c_run(100, 164) and not rand.valid_c_run(100, 196) and not rand.valid_c_run(100, 212)
    assert not rand.valid_c_run(200, 320)  # outside 0..255
    load = rand.make_constants(seed=5)
    assert 0 <= load.c_last <= 255 and 0 <= load.c_id <= 1023 and 0 <= load.ol_i_id <= 8191
    run = rand.make_constants(seed=6, c_load=load.c_last)
    assert rand.valid_c_run(load.c_last, run.c_last)
    assert rand.make_constants(seed=6, c_load=load.c_last) == run  # seeded: reproducible


def test_strings():
    rng = random.Random(3)
    for _ in range(200):
        s = rand.a_string(26, 50, rng)
        assert 26 <= len(s) <= 50 and set(s) <= set(string.ascii_letters + string.digits)
        z = rand.zip_code(rng)
        assert len(z) == 9 and z.endswith("11111") and z[:4].isdigit()
    originals = sum("ORIGINAL" in rand.data_with_original(26, 50, rng) for _ in range(20000))
    assert 1700 < originals < 2300


def test_pool_is_uniform_alphanumeric():
    pool = _random_pool(620000)
    assert len(pool) == 620000 and set(pool) == set((string.ascii_letters + string.digits).encode())
    counts = [pool.count(bytes([c])) for c in set(pool)]
    assert min(counts) > 9000 and max(counts) < 11000  # 10000 expected each
