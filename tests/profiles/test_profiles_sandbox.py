"""Every shipped profile for MariaDB starts a real MariaDB 10.11 sandbox and the running variables match it.

One sandbox per page size is reused: stop, write the profile drop-in, start, compare.  Buffer pools
are capped at 64M to keep memory and time down (the rendering of the real size is covered by the
golden files); one profile runs at its full size.
"""

from __future__ import annotations

import pytest

from profilehelpers import boot_with_profile
from profiles.apply import PROFILE_DROP_IN, apply_profile_to_sandbox, load_profile_for_sandbox
from profiles.model import list_profiles, load_profile
from tuner.core.errors import ProfileError
from tuner.core.units import PAGE_SIZES

CAP = 64 << 20
MARIADB_PROFILES = [p.name for p in list_profiles() if not p.flavor or p.flavor.startswith("mariadb")]
LOG_PROBLEMS = ("unknown variable", "was removed", "ignoring option", "[ERROR]", "Failed to set O_DIRECT")


def _run(sb, profile):
    return boot_with_profile(sb, profile)


@pytest.mark.root
@pytest.mark.parametrize("name", MARIADB_PROFILES)
def test_shipped_profile_runs_on_mariadb_10_11(name, page_sandboxes):
    profile = load_profile(name)
    sb = page_sandboxes(PAGE_SIZES[profile.page_size or 16384])
    small = profile.with_buffer_pool(min(profile.buffer_pool_size or CAP, CAP))
    path, v, log = _run(sb, small)
    assert path.name == PROFILE_DROP_IN and path.parent == sb.conf_d
    assert int(v["innodb_page_size"]) == (profile.page_size or 16384)
    assert v["innodb_flush_method"] == (profile.flush_method or "O_DIRECT")
    assert v["innodb_doublewrite"] == (profile.doublewrite or "ON")
    assert int(v["innodb_buffer_pool_size"]) == small.buffer_pool_size
    if profile.redo_capacity:
        assert int(v["innodb_log_file_size"]) == profile.redo_capacity
    for word in LOG_PROBLEMS:
        assert word not in log, f"{name}: the server logged {word!r}:\n{log}"


@pytest.mark.root
def test_dissertation_tuning_at_full_size(page_sandboxes):
    """The dissertation's 2G buffer pool with 8 instances: the pool is 2G and MariaDB did not warn about instances."""
    profile = load_profile("dissertation-tuning")
    _, v, log = _run(page_sandboxes("16k"), profile)
    assert int(v["innodb_buffer_pool_size"]) == 2 << 30
    assert "innodb-buffer-pool-instances" not in log and "innodb_buffer_pool_instances" not in v
    assert v["innodb_file_per_table"] == "ON"


def test_profile_with_other_page_size_is_refused_for_sandbox(page_sandboxes):
    sb = page_sandboxes("8k")
    before = (sb.conf_d / PROFILE_DROP_IN).read_text() if (sb.conf_d / PROFILE_DROP_IN).exists() else None
    with pytest.raises(ProfileError, match="sandbox create NAME --page-size 16k"):
        load_profile_for_sandbox("dcpmm-16k-dwb-on-o-direct", page_size=sb.page_size, explicit_page_size=True)
    with pytest.raises(ProfileError, match="fixed at initialization"):
        apply_profile_to_sandbox(sb, load_profile("dcpmm-16k-dwb-on-o-direct"))
    after = (sb.conf_d / PROFILE_DROP_IN).read_text() if (sb.conf_d / PROFILE_DROP_IN).exists() else None
    assert before == after


def test_sandbox_cli_refuses_mismatch_and_creates_with_profile_page_size(cli, page_sandboxes, innotier_home):
    page_sandboxes("8k")
    proc = cli("sandbox", "reconfigure", "prof-8k", "--profile", "dcpmm-4k-dwb-on-o-direct")
    assert proc.returncode == ProfileError.exit_code and "--page-size 4k" in proc.stderr
    proc = cli("sandbox", "create", "prof-bad", "--page-size", "8k", "--profile", "dax-pmem")
    assert proc.returncode == ProfileError.exit_code and "fixed when the datadir is initialized" in proc.stderr
    assert not (innotier_home / "sandboxes" / "prof-bad").exists()
    proc = cli("sandbox", "create", "prof-dax", "--profile", "dax-pmem")  # page size taken from the profile
    assert proc.returncode == 0, proc.stderr
    from tuner.core import sandbox as sbx

    sb = sbx.Sandbox.load("prof-dax")
    try:
        assert sb.page_size == 4096
        assert "innodb_page_size = 4096" in (sb.conf_d / PROFILE_DROP_IN).read_text()
    finally:
        sb.destroy(force=True)
