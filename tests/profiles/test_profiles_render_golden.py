"""Golden files of rendered option files for flavors without a binary here (MySQL 5.7/8.0/8.4, MariaDB 10.6/11.4).

Regenerate after an intended change with INNOTIER_REGEN_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profiles.model import load_profile, profile_from_mapping
from profiles.render import header_for, render, render_option_file
from profiles.target import parse_target
from tuner.core.errors import ProfileError

GOLDEN = Path(__file__).resolve().parent / "golden"
PLACED = {"name": "placed", "page_size": "16k", "flush_method": "O_DIRECT", "doublewrite": "on",
          "buffer_pool_size": "1536M", "buffer_pool_instances": 4, "redo_capacity": "2G",
          "placements": {"redo": "/mnt/nvme/redo", "undo": "/mnt/nvme/undo", "doublewrite": "/mnt/nvme/dblwr",
                         "tmpdir": "/mnt/ram/tmp"}}

CASES = [
    (name, target)
    for name in ("dissertation-tuning", "dcpmm-4k-dwb-off-o-direct-no-fsync", "dcpmm-16k-dwb-on-o-direct-no-fsync",
                 "ssd-default", "dax-pmem", "ram-backed")
    for target in ("mysql-5.7", "mysql-8.0", "mysql-8.0.25", "mysql-8.4", "mariadb-10.6", "mariadb-11.4")
] + [("dissertation-mysql57", "mysql-5.7.31"), ("placed", "mysql-8.0"), ("placed", "mysql-8.4")]


def _profile(name):
    if name == "placed":
        return profile_from_mapping(PLACED, "tests/profiles golden input")
    return load_profile(name)


def _render_text(name, target_text):
    t = parse_target(target_text)
    p = _profile(name)
    r = render(p, t.flavor, t.version)
    return render_option_file(r.options, header_for(p, r))


@pytest.mark.parametrize("name,target", CASES, ids=[f"{n}@{t}" for n, t in CASES])
def test_render_matches_golden(name, target):
    text = _render_text(name, target)
    path = GOLDEN / f"{name}@{target}.cnf"
    if os.environ.get("INNOTIER_REGEN_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}; run with INNOTIER_REGEN_GOLDEN=1 and review it"
    assert text == path.read_text()


def test_render_is_deterministic():
    assert _render_text("dissertation-tuning", "mysql-8.4") == _render_text("dissertation-tuning", "mysql-8.4")


@pytest.mark.parametrize("name,target", CASES, ids=[f"{n}@{t}" for n, t in CASES])
def test_rendered_file_lints_clean(name, target, tmp_path):
    """What the generator writes passes lint for the same target (no errors, no warnings)."""
    from profiles.lint import lint_file

    f = tmp_path / "x.cnf"
    f.write_text(_render_text(name, target))
    t = parse_target(target)
    bad = [x for x in lint_file(f, t.flavor, t.version) if x.severity != "info"]
    assert bad == []


@pytest.mark.parametrize("key,value,expected", [
    ("mysql-8.0", "innodb_redo_log_capacity", "2G"),
    ("mysql-8.0.25", "innodb_log_file_size", "1G"),
    ("mysql-5.7", "innodb_log_files_in_group", "2"),
    ("mariadb-10.11", "innodb_log_file_size", "2G"),
])
def test_redo_name_follows_version(key, value, expected):
    t = parse_target(key)
    opts = render(_profile("placed") if t.family == "mysql" and t.version.series != "5.7" else
                  profile_from_mapping({**PLACED, "placements": {}}, "t"), t.flavor, t.version).options
    assert opts[value] == expected


def test_mariadb_drops_buffer_pool_instances_with_a_note():
    t = parse_target("mariadb-10.11")
    r = render(load_profile("dissertation-tuning"), t.flavor, t.version)
    assert "innodb_buffer_pool_instances" not in r.options
    assert any("MDEV-15058" in n for n in r.notes)


@pytest.mark.parametrize("target,doublewrite", [("mysql-8.0.25", "detect_only"), ("mariadb-10.11", "detect_only"),
                                                ("mariadb-10.11", "fast"), ("mysql-8.4", "fast")])
def test_doublewrite_values_not_on_target_are_refused(target, doublewrite):
    t = parse_target(target)
    p = profile_from_mapping({"name": "x", "doublewrite": doublewrite}, "t")
    with pytest.raises(ProfileError, match="not available"):
        render(p, t.flavor, t.version)


def test_doublewrite_placement_refused_where_it_lives_in_ibdata():
    t = parse_target("mariadb-10.11")
    p = profile_from_mapping({"name": "x", "placements": {"doublewrite": "/mnt/x"}}, "t")
    with pytest.raises(ProfileError, match="system tablespace"):
        render(p, t.flavor, t.version)
