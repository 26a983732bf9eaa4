"""Opt-in: Debian's own server packages booted as packaged, under the AppArmor profile each ships.

mysql-sid: sid's mysql-server 9.7 as mysql.service under /etc/apparmor.d/usr.sbin.mysqld; mariadb-sid: sid's
mariadb-server 11.8 as mariadb.service under /etc/apparmor.d/mariadbd; mariadb-trixie: Debian 13's
mariadb-server 11.8 as mariadb.service with the empty usr.sbin.mariadbd stub it ships (nothing confines the
server; its guest also moves the datadir under /home through the unit's drop-in, with a negative control)
(datadir_mover/lab/packaged_host.py).  Not run by default (the CI lab budget): INNOTIER_LAB_PACKAGED=1 runs
all three, INNOTIER_LAB_PACKAGED=mariadb-trixie one (a comma list several; INNOTIER_LAB_SID, its older name,
still works); each builds its image once per machine (cached like the standard image) and boots it once with
systemd as PID 1 to run tests/lab/guest/test_in_packaged_host.py.  mysql-sid's PZRAM reboot (CLONE under its
profile) is tests/lab/test_lab_packaged_reboot.py, selected by the same variable.  docs/production-server.md has
what the runs showed and what CI would pay.

    INNOTIER_LAB_PACKAGED=mariadb-trixie .venv/bin/python -m pytest -q -rs tests/lab/test_lab_packaged.py
"""

from __future__ import annotations

import os
import shutil
import time
import xml.etree.ElementTree as ET

import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import packaged_host
from datadir_mover.lab import vm
from labvm import REPO, group_seconds, load_average, record
from tuner.core.errors import LabError

WANTED = os.environ.get("INNOTIER_LAB_PACKAGED") or os.environ.get("INNOTIER_LAB_SID", "")
SKIP_REASON = ("opt-in: set INNOTIER_LAB_PACKAGED=1 (or =mysql-sid, =mariadb-sid, =mariadb-trixie) to build that "
               "Debian image (once per machine) and boot it to move the suite's server package under the AppArmor "
               "profile it ships (docs/production-server.md: what CI would pay)")
GUEST = "tests/lab/guest/test_in_packaged_host.py"
GUEST_TESTS = 6
RECORDED = REPO / "out" / "lab-packaged"


def skip_unless_wanted(name: str) -> None:
    """Skip unless INNOTIER_LAB_PACKAGED asks for this host and the lab image can be built here."""
    if WANTED != "1" and name not in WANTED.split(","):
        pytest.skip(SKIP_REASON)
    blockers = lab_image.host_blockers()
    if blockers:
        pytest.skip("the lab image cannot be built here: " + "; ".join(blockers))


def expected_skips(server: packaged_host.PackagedServer) -> int:
    """The guest tests that do not apply to a host: the AppArmor negative control where nothing confines the
    server; the move under /home and its control on the hosts not in packaged_host.HOME_MOVES."""
    return (not server.confined) + 2 * (server.name not in packaged_host.HOME_MOVES)


def test_the_sid_image_recipe_keeps_the_package_profile_and_the_standard_images_key(tmp_path):
    """Without booting: the sid image is an image of its own (another key), the standard key is untouched, the
    lab unit waits for mysql.service, and a tree whose package ships no profile is refused, not given one."""
    sid = lab_image.packaged_spec(REPO, "mysql-sid")
    standard = lab_image.default_spec(REPO, host=True)
    assert sid.key() != standard.key() and sid.suite == "sid" and "mysql-server" in sid.packages
    assert lab_image.default_spec(REPO, host=True).key() == standard.key()
    assert "mariadb-server" not in sid.packages and "lab.init=systemd" in sid.initramfs_init()
    assert any(r.startswith("mysql-connector-python>=") for r in sid.requirements)
    server = packaged_host.get("mysql-sid")
    root = tmp_path / "rootfs"
    for d in ("etc/apparmor.d", "etc/systemd/system", "etc/mysql/mysql.conf.d", "usr/lib/systemd/system"):
        (root / d).mkdir(parents=True)
    (root / "usr/lib/systemd/system/mysql.service").write_text("[Service]\n")
    with pytest.raises(LabError, match="no longer ships /etc/apparmor.d/usr.sbin.mysqld"):
        packaged_host.configure(root, server)
    assert not (root / "etc/apparmor.d/usr.sbin.mysqld").exists()
    shipped = "/usr/sbin/mysqld {\n  #include <local/usr.sbin.mysqld>\n}\n"
    (root / "etc/apparmor.d/usr.sbin.mysqld").write_text(shipped)
    packaged_host.configure(root, server)
    assert (root / "etc/apparmor.d/usr.sbin.mysqld").read_text() == shipped
    assert (root / "etc/apparmor.d/local/usr.sbin.mysqld").read_text() == ""
    unit = (root / "etc/systemd/system/innotier-lab.service").read_text()
    assert "After=mysql.service" in unit and "mariadb" not in unit
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert os.readlink(wants / "mysql.service") == "/usr/lib/systemd/system/mysql.service"
    assert "innodb_redo_log_capacity" in (root / "etc/mysql/mysql.conf.d/60-innotier-lab.cnf").read_text()


def test_the_trixie_image_keeps_the_empty_stub_and_refuses_a_stub_with_rules(tmp_path, fixtures_dir):
    """Without booting: trixie's host is an image of its own whose package profile is the empty stub Debian ships
    (the recorded file); the build keeps it as it is and makes no local include, and a stub that gained rules
    is refused (that host would no longer test an unconfined server)."""
    trixie = lab_image.packaged_spec(REPO, "mariadb-trixie")
    assert trixie.suite == "trixie" and trixie.key() not in {lab_image.packaged_spec(REPO, n).key()
                                                             for n in ("mysql-sid", "mariadb-sid")}
    server = packaged_host.get("mariadb-trixie")
    assert not server.confined and packaged_host.get("mariadb-sid").confined
    root = tmp_path / "rootfs"
    for d in ("etc/apparmor.d", "etc/systemd/system", "etc/mysql/mariadb.conf.d", "usr/lib/systemd/system"):
        (root / d).mkdir(parents=True)
    (root / "usr/lib/systemd/system/mariadb.service").write_text("[Service]\n")
    stub = (fixtures_dir / "distro-packages" / "trixie-mariadb-server-11.8.9+ds-0+deb13u1.usr.sbin.mariadbd").read_text()
    profile = root / "etc/apparmor.d/usr.sbin.mariadbd"
    with pytest.raises(LabError, match="ships no /etc/apparmor.d/usr.sbin.mariadbd"):
        packaged_host.configure(root, server)
    profile.write_text(stub + "/usr/sbin/mariadbd {\n  /var/lib/mysql/** rwk,\n}\n")
    with pytest.raises(LabError, match="ships rules in /etc/apparmor.d/usr.sbin.mariadbd"):
        packaged_host.configure(root, server)
    profile.write_text(stub)
    packaged_host.configure(root, server)
    assert profile.read_text() == stub and not (root / "etc/apparmor.d/local").exists()
    assert "After=mariadb.service" in (root / "etc/systemd/system/innotier-lab.service").read_text()
    assert "innodb_log_file_size = 16M" in (root / "etc/mysql/mariadb.conf.d/60-innotier-lab.cnf").read_text()
    assert expected_skips(server) == 1 and expected_skips(packaged_host.get("mysql-sid")) == 2


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("name", sorted(packaged_host.SERVERS))
def test_the_package_moves_onto_dax_under_its_shipped_profile_and_back(name, tmp_path):
    skip_unless_wanted(name)
    t0 = time.monotonic()
    server = packaged_host.get(name)
    img = lab_image.build(lab_image.packaged_spec(REPO, name), REPO,
                          progress=lambda m: print(f"lab build ({name}): {m}", flush=True))
    package = server.packages[0]
    record(f"lab {name} image: {time.monotonic() - t0:.0f} s here (built in {img.build_seconds} s when made; "
           f"{img.kernel_release}, {package} {img.packages.get(package)}); load average {load_average()}")
    command = ("/opt/innotier/bin/python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfEs", "--timeout=1200",
               "--durations=0", "--junitxml=/mnt/lab/out/junit.xml", GUEST)
    spec = vm.VmSpec(command=command, pmem=(1 << 30,), disks=(), memory=2 << 30, cpus=2, timeout=3600, source=REPO,
                     init="systemd", env=(("LAB_PACKAGED", name),))
    run_dir = tmp_path / "lab"
    try:
        result = vm.run(spec, img, run_dir, echo=lambda line: print(line, flush=True),
                        progress=lambda m: print(m, flush=True))
    finally:
        vm.cleanup(run_dir)
    out = run_dir / "share" / "out"
    if (out / "recorded").is_dir():   # the guest's records, kept in out/ of the checkout
        shutil.copytree(out / "recorded", RECORDED, dirs_exist_ok=True)
    assert not result.timed_out, "time limit hit; console tail:\n" + "\n".join(result.console_tail)
    junit = out / "junit.xml"
    assert junit.exists(), f"no JUnit XML (exit {result.exit_code}); console tail:\n" + "\n".join(result.console_tail)
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    record(f"lab {name} VM ({result.accelerator}, systemd): boot {result.boot_seconds} s, total {result.total_seconds} s; "
           + ", ".join(f"{g} {s:.0f} s" for g, s in group_seconds(suite).items())
           + f"; load average {load_average()}")
    assert result.exit_code == 0, f"in-guest pytest failed (exit {result.exit_code}):\n{result.output[-6000:]}"
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": GUEST_TESTS, "failures": 0, "errors": 0, "skipped": expected_skips(server)}, counts
