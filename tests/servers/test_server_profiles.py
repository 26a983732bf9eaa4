"""Every shipped profile that applies boots on the real MySQL 9.7 and MariaDB 11.8, and reads back as rendered.

One sandbox per server and page size is reused: stop, write the profile drop-in, start, compare every rendered
option with the running server's variable, then page size, flush settings, doublewrite, buffer pool and redo
capacity explicitly.  Buffer pools are capped at 64M (rendering of real sizes is covered by the golden files).
"""

from __future__ import annotations

import os
import re

import pytest

from profilehelpers import boot_with_profile
from profiles.catalog import load_catalog
from profiles.model import Profile, list_profiles, load_profile
from profiles.render import render
from profiles.target import make_target
from tuner.core import sandbox as sbx
from tuner.core.server import Flavor, Version
from tuner.core.units import PAGE_SIZES

CAP = 64 << 20
SERVERS = ("mysql-9.7", "mariadb-11.8")
LOG_PROBLEMS = ("unknown variable", "was removed", "ignoring option", "[ERROR]")


def applies(profile: Profile, server: str) -> bool:
    """A profile for any server, or for this server's series."""
    return not profile.flavor or profile.flavor.startswith(server)


CASES = [(server, p.name) for server in SERVERS for p in list_profiles() if applies(p, server)]


@pytest.fixture(scope="module")
def page_sandbox(installed_server):
    made: dict[tuple[str, int], sbx.Sandbox] = {}

    def get(server: str, page: int) -> sbx.Sandbox:
        if (server, page) not in made:
            installed_server(server)
            made[(server, page)] = sbx.create(f"prof-{server}-{PAGE_SIZES[page]}", page_size=page, server=server,
                                              options={"innodb_buffer_pool_size": "64M"})
        return made[(server, page)]

    yield get
    for sb in made.values():
        sb.destroy(force=True)


def boot(sb: sbx.Sandbox, profile: Profile) -> tuple[dict[str, str], str]:
    _, variables, log = boot_with_profile(sb, profile)
    return variables, log


def assert_reads_back(sb: sbx.Sandbox, profile: Profile, v: dict[str, str]) -> None:
    target = make_target(sb.flavor, Version.parse(sb.version))
    cat = load_catalog()
    for option, value in render(profile, sb.flavor, Version.parse(sb.version)).options.items():
        if option == "innodb_buffer_pool_instances" and sb.flavor == Flavor.MYSQL and profile.buffer_pool_size < 1 << 30:
            assert v[option] == "1"  # MySQL uses one instance below a 1G pool (the test caps pools at 64M)
            continue
        row = cat.row(option, target)
        want = row.normalize(value) if row else value
        have = row.normalize(v[option]) if row else v[option]
        assert have == want, f"{profile.name} on {sb.server}: {option} is {v[option]}, rendered {value}"


@pytest.mark.slow
@pytest.mark.parametrize("server,name", CASES)
def test_shipped_profile_boots(server, name, page_sandbox):
    profile = load_profile(name)
    page = profile.page_size or 16384
    sb = page_sandbox(server, page)
    small = profile.with_buffer_pool(min(profile.buffer_pool_size or CAP, CAP))
    v, log = boot(sb, small)
    assert_reads_back(sb, small, v)
    assert int(v["innodb_page_size"]) == page
    assert int(v["innodb_buffer_pool_size"]) == small.buffer_pool_size
    if sb.flavor == Flavor.MYSQL:
        assert v["innodb_flush_method"] == (profile.flush_method or "O_DIRECT")
        assert v["innodb_doublewrite"] == (profile.doublewrite or "ON")
        if profile.redo_capacity:
            assert int(v["innodb_redo_log_capacity"]) == profile.redo_capacity
        assert v["innodb_doublewrite_dir"] in ("", None)
        if v["innodb_doublewrite"] != "OFF":
            assert os.path.exists(os.path.join(sb.datadir, f"#ib_{page}_0.dblwr"))
    else:
        assert v["innodb_doublewrite"] in ((profile.doublewrite or "ON"), "fast")
        if profile.redo_capacity:
            assert int(v["innodb_log_file_size"]) == profile.redo_capacity
        if (profile.flush_method or "O_DIRECT").startswith("O_DIRECT"):
            assert v["innodb_data_file_buffering"] == "OFF" and v["innodb_log_file_buffering"] == "OFF"
        elif profile.flush_method == "fsync":
            assert v["innodb_data_file_buffering"] == "ON"
    for word in LOG_PROBLEMS:
        assert word not in log, f"{name} on {server}: the server logged {word!r}:\n{log}"


@pytest.mark.slow
def test_doublewrite_detect_only_in_its_own_directory_on_mysql(page_sandbox, tmp_path):
    sb = page_sandbox("mysql-9.7", 16384)
    dblwr = tmp_path / "dblwr"
    profile = Profile(name="dblwr-dir", doublewrite="DETECT_ONLY", buffer_pool_size=CAP,
                      extra={"innodb_doublewrite_dir": str(dblwr)})
    v, log = boot(sb, profile)
    try:
        assert v["innodb_doublewrite"] == "DETECT_ONLY" and v["innodb_doublewrite_dir"] == str(dblwr)
        names = {p.name for p in dblwr.iterdir()}
        # DETECT_ONLY adds a batch file beside the two doublewrite files (seen on 9.7.4: #ib_16384_0.bdblwr)
        assert {"#ib_16384_0.dblwr", "#ib_16384_1.dblwr"} <= names
        assert all(re.fullmatch(r"#ib_16384_\d+\.b?dblwr", n) for n in names), names
        assert "[ERROR]" not in log
    finally:
        sb.stop()
        (sb.conf_d / "40-innotier-profile.cnf").unlink()
