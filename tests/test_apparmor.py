"""AppArmor rules for a moved datadir (validated with apparmor_parser, applied, removed) and the SELinux commands."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from datadir_mover import apparmor
from tuner.core.errors import MoveError

MYSQLD_PROFILE = """#include <tunables/global>

/usr/sbin/mysqld {
  #include <abstractions/base>
  #include <abstractions/nameservice>
  #include <abstractions/mysql>

  capability dac_override,
  capability setgid,
  capability setuid,
  network tcp,

  /etc/mysql/** r,
  /usr/sbin/mysqld mr,
  /var/lib/mysql/ r,
  /var/lib/mysql/** rwk,
  /run/mysqld/mysqld.pid rw,
  /run/mysqld/mysqld.sock rw,

  #include <local/usr.sbin.mysqld>
}
"""


@pytest.fixture
def aa_root(tmp_path):
    root = tmp_path / "apparmor.d"
    shutil.copytree("/etc/apparmor.d", root, symlinks=True, ignore=shutil.ignore_patterns("cache"))
    for name in ("usr.sbin.mariadbd", "usr.sbin.mysqld"):
        (root / name).unlink(missing_ok=True)
    (root / "local").mkdir(exist_ok=True)
    return root


def test_apparmor_mysqld_profile_rules_validated_applied_removed(aa_root, tmp_path):
    (aa_root / "usr.sbin.mysqld").write_text(MYSQLD_PROFILE)
    (aa_root / "local" / "usr.sbin.mysqld").write_text("# site rules\n  /srv/backup/ r,\n")
    no_aa = tmp_path / "sys"  # a kernel without AppArmor
    no_aa.mkdir()
    change = apparmor.plan_change(["/mnt/zram/mysql", "/mnt/my data"], "mysql", "m-1", str(aa_root), str(no_aa))
    assert change.action == "write" and change.profile.endswith("usr.sbin.mysqld")
    assert '  "/mnt/my data/**" rwk,' in change.rules and "  /mnt/zram/mysql/ r," in change.rules
    apparmor.validate(change, str(aa_root))
    apparmor.apply(change)
    local = (aa_root / "local" / "usr.sbin.mysqld").read_text()
    assert local.startswith("# site rules") and "# BEGIN innotier m-1" in local
    apparmor.apply(change)  # idempotent
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == local
    # the whole profile with the include parses (no kernel load)
    r = subprocess.run(["apparmor_parser", "-Q", "-K", "--base", str(aa_root), "-I", str(aa_root),
                        str(aa_root / "usr.sbin.mysqld")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    apparmor.remove(change)
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == "# site rules\n  /srv/backup/ r,\n"


def test_apparmor_rejects_bad_rules_and_explains_empty_profile(aa_root, tmp_path):
    (aa_root / "usr.sbin.mariadbd").write_text("# This file is intentionally empty to disable apparmor by default\n")
    change = apparmor.plan_change(["/mnt/x"], "mariadb", "m-2", str(aa_root), str(tmp_path))
    assert change.action == "none" and "intentionally empty" in change.reason
    apparmor.validate(change, str(aa_root))  # rules still proven in a minimal profile
    change.rules = change.rules.replace("rwk", "rwzz")
    with pytest.raises(MoveError, match="apparmor_parser rejected"):
        apparmor.validate(change, str(aa_root))
    (aa_root / "usr.sbin.mariadbd").unlink()
    assert apparmor.plan_change(["/mnt/x"], "mariadb", "m-3", str(aa_root), str(tmp_path)).action == "none"


def test_selinux_commands():
    from datadir_mover import selinux

    cmds = selinux.commands("datadir", "/mnt/pm em/mysql", "tmpfs")
    assert cmds[0] == "semanage fcontext -a -t mysqld_db_t '/mnt/pm em/mysql(/.*)?'"
    assert cmds[1] == "restorecon -Rv '/mnt/pm em/mysql'"
    assert "context=system_u:object_r:mysqld_db_t:s0" in cmds[2]
    assert selinux.commands("tmpdir", "/x")[0].startswith("semanage fcontext -a -t mysqld_tmp_t")


def _sys_tree(root, enabled: str | None, securityfs: bool, loaded: str = ""):
    """A /sys as the kernel lays it out: the module parameter, and AppArmor's files where securityfs is mounted
    (an unmounted securityfs leaves /sys/kernel/security an empty directory)."""
    (root / "kernel" / "security").mkdir(parents=True)
    if enabled is not None:
        (root / "module" / "apparmor" / "parameters").mkdir(parents=True)
        (root / "module" / "apparmor" / "parameters" / "enabled").write_text(enabled + "\n")
    if securityfs:
        aa = root / "kernel" / "security" / "apparmor"
        aa.mkdir()
        for name in (".load", ".replace", ".remove"):
            (aa / name).write_text("")
        (aa / "profiles").write_text(loaded)  # the kernel's list: one "NAME (MODE)" line per loaded profile
    return root


@pytest.mark.parametrize("enabled, securityfs, state", [("Y", True, "usable"), ("Y", False, "unmounted"),
                                                        ("N", False, "off"), (None, False, "off")])
def test_apparmor_kernel_state_from_the_sys_layout(tmp_path, enabled, securityfs, state):
    sys_root = _sys_tree(tmp_path / "sys", enabled, securityfs)
    assert apparmor.kernel_state(str(sys_root)) == state
    assert apparmor.active(str(sys_root)) is (state == "usable")


def test_apparmor_enabled_but_securityfs_unmounted_refuses_in_one_line_and_changes_nothing(aa_root, tmp_path):
    (aa_root / "usr.sbin.mysqld").write_text(MYSQLD_PROFILE)
    (aa_root / "local" / "usr.sbin.mysqld").write_text("# site rules\n")
    sys_root = _sys_tree(tmp_path / "sys", "Y", securityfs=False)
    with pytest.raises(MoveError) as refused:
        apparmor.plan_change(["/mnt/pmem/mysql"], "mysql", "m-4", str(aa_root), str(sys_root))
    line = str(refused.value)
    assert "\n" not in line and "securityfs is not mounted" in line
    assert "mount -t securityfs securityfs /sys/kernel/security" in line
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == "# site rules\n"
    # mounted: the same move plans the rule and its reload
    mounted = _sys_tree(tmp_path / "sys2", "Y", securityfs=True, loaded="/usr/sbin/mysqld (enforce)\n")
    change = apparmor.plan_change(["/mnt/pmem/mysql"], "mysql", "m-4", str(aa_root), str(mounted))
    assert change.action == "apply" and change.mode == "enforce" and "the profile is reloaded" in change.reason
    # mounted, but the profile is not in the kernel's list: it confines nothing, so it is written and not loaded
    unloaded = _sys_tree(tmp_path / "sys3", "Y", securityfs=True, loaded="/usr/bin/man (enforce)\n")
    change = apparmor.plan_change(["/mnt/pmem/mysql"], "mysql", "m-4", str(aa_root), str(unloaded))
    assert change.action == "write" and change.mode == "not loaded" and "written, not loaded" in change.reason
    # an unconfined server needs no reload: securityfs does not matter then
    (aa_root / "usr.sbin.mysqld").write_text("# intentionally empty\n")
    assert apparmor.plan_change(["/mnt/x"], "mysql", "m-5", str(aa_root), str(sys_root)).action == "none"


def test_a_move_back_home_retires_the_earlier_block_and_its_rollback_puts_it_back(aa_root, tmp_path):
    (aa_root / "usr.sbin.mysqld").write_text(MYSQLD_PROFILE)
    (aa_root / "local" / "usr.sbin.mysqld").write_text("# site rules\n")
    sys_root = tmp_path / "sys"
    sys_root.mkdir()
    out = apparmor.plan_change(["/mnt/pmem/mysql"], "mysql", "m-out", str(aa_root), str(sys_root))
    apparmor.apply(out)
    with_out = (aa_root / "local" / "usr.sbin.mysqld").read_text()
    home = apparmor.plan_change(["/var/lib/mysql"], "mysql", "m-home", str(aa_root), str(sys_root), retire="m-out")
    assert home.retires == "m-out" and home.rules == "" and "/mnt/pmem/mysql/** rwk," in home.retired_rules
    apparmor.validate(home, str(aa_root))
    apparmor.apply(home)
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == "# site rules\n"   # as before the move out
    apparmor.remove(home)                                                            # the move home rolled back
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == with_out
    # a block the DBA already removed by hand: nothing to retire, the move home plans its rules like any move
    (aa_root / "local" / "usr.sbin.mysqld").write_text("# site rules\n")
    again = apparmor.plan_change(["/var/lib/mysql"], "mysql", "m-h2", str(aa_root), str(sys_root), retire="m-out")
    assert again.retires is None and "/var/lib/mysql/** rwk," in again.rules


def test_a_child_profiles_local_include_is_not_the_servers(aa_root, tmp_path):
    """MariaDB's profile holds a child profile for its shell helpers: only the outer profile's include counts."""
    child = "  profile helper {\n    #include <local/helper>\n  }\n"
    (aa_root / "usr.sbin.mysqld").write_text(MYSQLD_PROFILE.replace("  #include <local/usr.sbin.mysqld>\n", child))
    with pytest.raises(MoveError, match=r"has no include for site rules.*`include if exists <local/usr.sbin.mysqld>`"):
        apparmor.plan_change(["/srv/db"], "mysql", "m-child", str(aa_root), str(tmp_path))
    (aa_root / "usr.sbin.mysqld").write_text(MYSQLD_PROFILE.replace("  #include <local/usr.sbin.mysqld>\n",
                                                                    child + "  #include <local/usr.sbin.mysqld>\n"))
    change = apparmor.plan_change(["/srv/db"], "mysql", "m-child", str(aa_root), str(tmp_path))
    assert change.local_path == str(aa_root / "local" / "usr.sbin.mysqld")
