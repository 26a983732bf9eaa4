"""Page size from a real datadir's ibdata1 header; diff with unit/default normalization, a live server and pt-config-diff."""

from __future__ import annotations

import re
import shutil

import pytest

from tuner.core.datadir import datadir_page_size, page_size_from_flags
from profiles.diff import diff, pt_config_diff, side_from_file, side_from_profile, side_from_server
from profiles.target import parse_target


@pytest.mark.parametrize("page", ["4k", "8k", "16k"])
def test_page_size_read_from_real_mariadb_datadir(page, page_sandboxes):
    sb = page_sandboxes(page)
    assert datadir_page_size(sb.datadir) == sb.page_size


@pytest.mark.parametrize("flags,size", [
    (0, 16384),            # MySQL / MariaDB non-full_crc32: PAGE_SSIZE 0 = original 16k
    (3 << 6 | 1, 4096),    # PAGE_SSIZE 3 at bits 6-9 (+ POST_ANTELOPE)
    (4 << 6 | 0x21, 8192),  # + ATOMIC_BLOBS
    (7 << 6, 65536),
    (0x10 | 5, 16384),     # MariaDB full_crc32: marker bit 4, PAGE_SSIZE in bits 0-3
    (0x10 | 3, 4096),
])
def test_flag_layouts(flags, size):
    assert page_size_from_flags(flags) == size


def test_datadir_without_ibdata_has_no_page_size(tmp_path):
    assert datadir_page_size(str(tmp_path)) is None


def test_diff_normalizes_units_and_defaults(tmp_path):
    t = parse_target("mariadb-10.11")
    a = tmp_path / "a.cnf"
    b = tmp_path / "b.cnf"
    a.write_text("[mysqld]\ninnodb_buffer_pool_size = 512M\ninnodb_flush_method = O_DIRECT\ninnodb_doublewrite = 1\n")
    b.write_text("[mariadb]\ninnodb-buffer-pool-size = 536870912\ninnodb_flush_method = fsync\n"
                 "innodb_io_capacity = 200\n")
    rows = {r.option: r for r in diff(side_from_file(str(a), t), side_from_file(str(b), t), t)}
    assert set(rows) == {"innodb_flush_method"}  # 512M == 536870912; doublewrite 1 == default ON; io 200 == default
    assert (rows["innodb_flush_method"].a, rows["innodb_flush_method"].b) == ("O_DIRECT", "fsync")


def test_diff_two_profiles():
    t = parse_target("mysql-8.0")
    rows = {r.option: r for r in diff(side_from_profile("dcpmm-4k-dwb-on-o-direct", t),
                                      side_from_profile("dcpmm-4k-dwb-off-o-direct-no-fsync", t), t)}
    assert set(rows) == {"innodb_doublewrite", "innodb_flush_method"}


@pytest.mark.root
def test_diff_against_a_live_server(page_sandboxes, tmp_path):
    from profiles.apply import apply_profile_to_sandbox
    from profiles.model import load_profile
    from tuner.core import sandbox as sbx

    sb = page_sandboxes("8k")
    if sb.state() == sbx.SandboxState.RUNNING:
        sb.stop()
    apply_profile_to_sandbox(sb, load_profile("dcpmm-8k-dwb-off-o-direct").with_buffer_pool(64 << 20))
    sb.start()
    server, t = side_from_server(sb.connection_spec())
    drop_in = side_from_file(str(sb.conf_d / "40-innotier-profile.cnf"), t)
    assert diff(server, drop_in, t) == []  # the server runs what the file says
    other = side_from_profile("dcpmm-8k-dwb-on-o-direct", t)
    rows = {r.option: r for r in diff(server, other, t)}
    assert rows["innodb_doublewrite"].a == "OFF" and rows["innodb_doublewrite"].b == "ON"
    assert rows["innodb_buffer_pool_size"].a == str(64 << 20)


def test_pt_config_diff_view(tmp_path):
    if not shutil.which("pt-config-diff"):
        pytest.fail("percona-toolkit is expected on the CI machine (apt-get install percona-toolkit)")
    t = parse_target("mariadb-10.11")
    a = tmp_path / "a.cnf"
    a.write_text("[mysqld]\ninnodb_flush_method = O_DIRECT\ninnodb_buffer_pool_size = 512M\n")
    out = pt_config_diff(side_from_file(str(a), t), side_from_profile("ram-backed", t))
    assert "innodb_flush_method" in out and "fsync" in out


def test_profile_diff_fits_80_columns(cli):
    out = cli("profile", "diff", "dcpmm-4k-dwb-on-o-direct", "dcpmm-4k-dwb-off-o-direct", "--flavor", "mysql-8.0",
              check=True, env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert lines[0] == "A = profile dcpmm-4k-dwb-on-o-direct (mysql-8.0 (newest 8.0 release))"
    assert lines[1] == "B = profile dcpmm-4k-dwb-off-o-direct (mysql-8.0 (newest 8.0 release))"
    assert all(len(ln) <= 80 for ln in lines), out
    assert re.search(r"innodb_doublewrite\s+│ ON\s+│ OFF", out), out
