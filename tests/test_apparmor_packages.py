"""The AppArmor profiles Debian's packages ship, found and extended as they are (tests/fixtures/recorded/distro-packages).

Each profile is installed under the file name its package gives it into a copy of this host's /etc/apparmor.d,
with the local file its postinst creates (dh_apparmor: an empty ``local/NAME``), and parsed by the real
``apparmor_parser`` with the rules innotier writes.  The kernel here has no AppArmor, so the profiles are parsed
(``-Q -K``), never loaded; the kernel's profile list comes from a /sys tree laid out as securityfs shows it.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from datadir_mover import apparmor
from tuner.core.errors import MoveError

MYSQL = ("sid-mysql-server-9.7.4-2.usr.sbin.mysqld", "usr.sbin.mysqld")
MARIADB = ("sid-mariadb-server-11.8.9+ds-4.mariadbd", "mariadbd")
TRIXIE_STUB = ("trixie-mariadb-server-11.8.9+ds-0+deb13u1.usr.sbin.mariadbd", "usr.sbin.mariadbd")


@pytest.fixture
def packages(fixtures_dir):
    return fixtures_dir / "distro-packages"


def _install(root, packages, recorded: str, name: str, local: bool = True):
    """The package's profile in an apparmor.d (as dpkg unpacks it), and the empty local file its postinst makes."""
    shutil.copy(packages / recorded, root / name)
    if local:
        (root / "local" / name).touch()


@pytest.fixture
def aa_root(tmp_path):
    root = tmp_path / "apparmor.d"
    shutil.copytree("/etc/apparmor.d", root, symlinks=True, ignore=shutil.ignore_patterns("cache"))
    for name in ("usr.sbin.mariadbd", "usr.sbin.mysqld", "mariadbd"):
        (root / name).unlink(missing_ok=True)
    (root / "local").mkdir(exist_ok=True)
    return root


def _sys(tmp_path, loaded: str):
    aa = tmp_path / "sys" / "kernel" / "security" / "apparmor"
    aa.mkdir(parents=True)
    for name in (".load", ".replace", ".remove"):
        (aa / name).write_text("")
    (aa / "profiles").write_text(loaded)
    return tmp_path / "sys"


def _parse(root, profile: str) -> subprocess.CompletedProcess:
    return subprocess.run(["apparmor_parser", "-Q", "-K", "--base", str(root), "-I", str(root), str(root / profile)],
                          capture_output=True, text=True)


def _preprocessed(root, profile: str) -> str:
    """The profile with its includes expanded (apparmor_parser -p): where the rules really land."""
    return subprocess.run(["apparmor_parser", "-p", "--base", str(root), "-I", str(root), str(root / profile)],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("package, flavor, profile_name, include", [
    (MYSQL, "mysql", "/usr/sbin/mysqld", "#include <local/usr.sbin.mysqld>"),
    (MARIADB, "mariadb", "mariadbd", "include if exists <local/mariadbd>"),
])
def test_the_shipped_profile_is_found_extended_parsed_and_restored(aa_root, packages, tmp_path, package, flavor,
                                                                     profile_name, include):
    recorded, name = package
    _install(aa_root, packages, recorded, name)
    target = "/mnt/pmem/mysql"
    change = apparmor.plan_change([target], flavor, "m-pkg", str(aa_root), str(_sys(tmp_path, "")))
    # found by its attachment, whatever the file and profile are called; the kernel does not list it here
    assert (change.profile, change.profile_name, change.include_line) == (str(aa_root / name), profile_name, include)
    assert change.local_path == str(aa_root / "local" / name)
    assert change.action == "write" and change.mode == "not loaded"
    assert f"profile {profile_name} ({aa_root / name}, not loaded)" in change.reason and include in change.reason
    enforced = apparmor.plan_change([target], flavor, "m-pkg", str(aa_root),
                                    str(_sys(tmp_path / "e", f"{profile_name} (enforce)\n")))
    assert enforced.action == "apply" and enforced.mode == "enforce"
    apparmor.validate(change, str(aa_root))   # the real parser compiles the profile with the new local file
    apparmor.apply(change)
    expanded = _preprocessed(aa_root, name)
    assert f"{target}/** rwk," in expanded and expanded.index(f"{target}/** rwk,") < expanded.rindex("}")
    apparmor.remove(change)
    assert (aa_root / "local" / name).read_text() == ""   # emptied, not deleted
    assert _parse(aa_root, name).returncode == 0


def test_mysql_profile_does_not_parse_without_its_local_file_so_rollback_keeps_it(aa_root, packages):
    # the fault rollback avoids: deleting the local file breaks the profile (a plain #include, not "if exists")
    _install(aa_root, packages, *MYSQL, local=False)
    r = _parse(aa_root, "usr.sbin.mysqld")
    assert r.returncode != 0 and "local/usr.sbin.mysqld" in r.stderr
    change = apparmor.plan_change(["/srv/db"], "mysql", "m-new", str(aa_root), str(aa_root / "nosys"))
    apparmor.validate(change, str(aa_root))   # the staged copy holds the file the move writes
    apparmor.apply(change)
    apparmor.remove(change)
    assert (aa_root / "local" / "usr.sbin.mysqld").exists() and _parse(aa_root, "usr.sbin.mysqld").returncode == 0


def test_the_profile_is_found_under_any_file_name(aa_root, packages, tmp_path):
    _install(aa_root, packages, MYSQL[0], "zz-site-mysql", local=False)
    change = apparmor.plan_change(["/srv/db"], "mysql", "m-any", str(aa_root), str(tmp_path))
    # the local file is the one the profile includes, not one named after the profile's file
    assert change.profile == str(aa_root / "zz-site-mysql")
    assert change.local_path == str(aa_root / "local" / "usr.sbin.mysqld")
    # MariaDB's server binary is not what the MySQL profile attaches to: nothing confines it
    assert apparmor.plan_change(["/srv/db"], "mariadb", "m-any", str(aa_root), str(tmp_path),
                                binary="/usr/sbin/mariadbd").action == "none"


def test_trixies_empty_stub_confines_nothing(aa_root, packages, tmp_path):
    _install(aa_root, packages, *TRIXIE_STUB, local=False)
    change = apparmor.plan_change(["/srv/db"], "mariadb", "m-stub", str(aa_root), str(tmp_path))
    assert change.action == "none" and "intentionally empty" in change.reason
    assert change.profile == str(aa_root / "usr.sbin.mariadbd")


@pytest.mark.parametrize("package, flavor, include", [(MYSQL, "mysql", "include if exists <local/usr.sbin.mysqld>"),
                                                      (MARIADB, "mariadb", "include if exists <local/mariadbd>")])
def test_a_profile_without_its_local_include_is_refused_in_one_line(aa_root, packages, tmp_path, package, flavor,
                                                                    include):
    recorded, name = package
    text = (packages / recorded).read_text()
    (aa_root / name).write_text("\n".join(ln for ln in text.splitlines() if "<local/" not in ln) + "\n")
    before = sorted(p.name for p in (aa_root / "local").iterdir())
    with pytest.raises(MoveError) as refused:
        apparmor.plan_change(["/srv/db"], flavor, "m-noinc", str(aa_root), str(tmp_path))
    line = str(refused.value)
    assert "\n" not in line and f"`{include}`" in line and "/srv/db/** rwk," in line and "nothing was changed" in line
    assert sorted(p.name for p in (aa_root / "local").iterdir()) == before
