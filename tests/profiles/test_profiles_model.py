"""Profile model: YAML loading, validation and the shipped profiles covering the seeds' tuning points."""

from __future__ import annotations

import pytest

from profiles.model import list_profiles, load_profile, profile_from_mapping
from tuner.core.errors import ProfileError


def test_shipped_profiles_cover_the_seeds():
    by_name = {p.name: p for p in list_profiles()}
    d = by_name["dissertation-tuning"]  # the dissertation, 3.2.4 (docs/sources.md)
    assert (d.buffer_pool_size, d.buffer_pool_instances, d.flush_method, d.extra["innodb_file_per_table"]) == \
        (2 << 30, 8, "O_DIRECT", "ON")
    matrix = {(p.page_size, p.doublewrite, p.flush_method) for p in by_name.values() if p.name.startswith("dcpmm-")}
    assert matrix == {(ps, dw, fm) for ps in (4096, 8192, 16384) for dw in ("ON", "OFF")
                      for fm in ("O_DIRECT", "O_DIRECT_NO_FSYNC")}  # the DCPMM paper, 4.5
    for tier in ("ssd-default", "ram-backed", "dax-pmem"):
        assert tier in by_name
    assert by_name["dax-pmem"].page_size == 4096 and by_name["dax-pmem"].doublewrite == "ON"


def test_sizes_are_normalized():
    p = profile_from_mapping({"name": "x", "buffer_pool_size": "1.5G", "redo_capacity": 536870912,
                              "page_size": 8192}, "t")
    assert (p.buffer_pool_size, p.redo_capacity, p.page_size) == (1536 << 20, 512 << 20, 8192)
    assert p.to_dict()["buffer_pool_size"] == "1536M"


def test_yaml_booleans_for_doublewrite(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("name: p\ndoublewrite: off\npage_size: 4k\n")  # YAML 1.1 reads off as False
    assert load_profile(str(f)).doublewrite == "OFF"


@pytest.mark.parametrize("mapping,needle", [
    ({"name": "x", "page_size": "3k"}, "page size"),
    ({"name": "x", "buffer_pool_size": -5}, "negative"),
    ({"name": "x", "flush_method": "O_DIRECTIO"}, "flush method"),
    ({"name": "x", "bogus": 1}, "unknown profile field"),
    ({"name": "Bad Name"}, "not valid"),
    ({"name": "x", "placements": {"logs": "/a"}}, "unknown"),
    ({"name": "x", "flavor": "sybase-1.0"}, "unknown flavor"),
])
def test_bad_profiles_are_refused(mapping, needle):
    with pytest.raises(ProfileError, match=needle):
        profile_from_mapping(mapping, "test")


def test_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(ProfileError, match="dissertation-tuning"):
        load_profile("no-such-profile")
