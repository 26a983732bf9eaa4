"""Opt-in: Debian sid's own server packages booted as packaged, each confined by the AppArmor profile it ships.

mysql-sid: sid's mysql-server 9.7 as mysql.service under /etc/apparmor.d/usr.sbin.mysqld; mariadb-sid: sid's
mariadb-server 11.8 as mariadb.service under /etc/apparmor.d/mariadbd (datadir_mover/lab/packaged_host.py).
Not run by default (the CI lab budget): INNOTIER_LAB_SID=1 runs both, INNOTIER_LAB_SID=mysql-sid one; each
builds its sid image once per machine (cached like the standard image) and boots it once with systemd as
PID 1 to run tests/lab/guest/test_in_packaged_host.py.  docs/production-server.md has what a run showed and
what CI would pay.

    INNOTIER_LAB_SID=mysql-sid .venv/bin/python -m pytest -q -rs tests/lab/test_lab_sid.py
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

WANTED = os.environ.get("INNOTIER_LAB_SID", "")
SKIP_REASON = ("opt-in: set INNOTIER_LAB_SID=1 (or =mysql-sid, =mariadb-sid) to build a Debian sid image (once per "
               "machine) and boot it to move sid's server package under its shipped AppArmor profile "
               "(docs/production-server.md: what CI would pay)")
GUEST = "tests/lab/guest/test_in_packaged_host.py"
GUEST_TESTS = 4
RECORDED = REPO / "out" / "lab-sid"


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


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("name", sorted(packaged_host.SERVERS))
def test_the_sid_package_moves_onto_dax_under_its_shipped_profile_and_back(name, tmp_path):
    if WANTED != "1" and name not in WANTED.split(","):
        pytest.skip(SKIP_REASON)
    blockers = lab_image.host_blockers()
    if blockers:
        pytest.skip("the lab image cannot be built here: " + "; ".join(blockers))
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
    assert counts == {"tests": GUEST_TESTS, "failures": 0, "errors": 0, "skipped": 0}, counts
