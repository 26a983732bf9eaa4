"""The lab's packaged-server hosts: a Debian suite's own server package, booted as the DBA runs it.

Host mode (``datadir_mover.lab.host``) boots Debian 12's MariaDB under a profile the lab wrote, because
Debian 12 ships that profile empty.  A packaged host instead keeps everything the package installs:
its unit (``mysql.service``), its option files, and above all the AppArmor profile it ships
(``/etc/apparmor.d/usr.sbin.mysqld`` for sid's ``mysql-server``), enforced by ``apparmor.service`` at boot.
The lab adds only what a lab boot needs: its own unit that runs the command once the server is up, the
masked timers and gettys of host mode, and a small redo log (every move copies the datadir under emulation).
If the package stops shipping the profile, the build fails instead of writing one.

Trixie's ``mariadb-server`` (Debian 13, the current stable) ships ``usr.sbin.mariadbd`` as an empty stub, as
Debian 12's does: its host (``mariadb-trixie``, no ``profile_name``) keeps the stub and is the case where
nothing confines the server.  If the package starts shipping rules there, the build fails: that host would
then test something else.

Why an image of its own and not the bookworm one with sid's packages added: ``mysql-server`` 9.7 from sid
depends on sid's libc6 (and with it a newer libstdc++, OpenSSL and systemd); installing it into bookworm
upgrades the base system half-way, and the bookworm image's MariaDB, golden datadir and fast groups would
then run on a system that is neither Debian 12 nor sid.  The sid image is a separate cache entry, built only
when asked for (the opt-in lab group), and the standard image's key does not change.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from datadir_mover import apparmor
from datadir_mover.lab import host as host_mode
from tuner.core import system_server
from tuner.core.errors import LabError

# the guest's system around the server: the kernel with nvdimm drivers, ndctl for the DAX tier, systemd as
# PID 1, AppArmor's loader, Python for innotier (mdadm and fio are left out: this host tests no array)
BASE_PACKAGES = ("linux-image-amd64", "kmod", "udev", "ndctl", "daxctl", "e2fsprogs", "xfsprogs", "util-linux",
                 "procps", "python3", "python3-venv", "busybox", "iproute2", "apparmor", "systemd")


@dataclass(frozen=True)
class PackagedServer:
    name: str              # what `lab` code and tests call it: mysql-sid
    suite: str             # Debian suite the whole guest is bootstrapped from
    packages: tuple[str, ...]
    unit: str              # the package's systemd unit
    series: str            # the server's major.minor
    binary: str            # the server binary the profile attaches to
    profile: str           # the profile file the package ships (relative to the root)
    profile_name: str      # the name the kernel lists it under; "": the file is an empty stub, nothing confines
    local: str             # its site-rule include (dh_apparmor's postinst creates it empty); "" with a stub
    conf_dir: str          # where the lab's option file goes (a directory the package's my.cnf includes)
    options: str           # the lab's options ([mysqld] section)
    initialize: tuple[str, ...]   # initializes the package's datadir when its postinst did not

    @property
    def confined(self) -> bool:
        """The package's profile confines the server (else it ships an empty stub: the server runs unconfined)."""
        return bool(self.profile_name)


SERVERS = {s.name: s for s in (
    PackagedServer(
        name="mysql-sid", suite="sid", packages=("mysql-server", "mysql-client"), unit="mysql.service",
        series="9.7", binary="/usr/sbin/mysqld", profile="etc/apparmor.d/usr.sbin.mysqld",
        profile_name="/usr/sbin/mysqld", local="etc/apparmor.d/local/usr.sbin.mysqld",
        conf_dir="etc/mysql/mysql.conf.d",
        options="# innotier lab: a small redo log (datadir_mover/lab/packaged_host.py says why)\n"
                "[mysqld]\ninnodb_redo_log_capacity = 16M\n",
        initialize=("mysqld", "--initialize-insecure", "--user=mysql")),
    PackagedServer(
        name="mariadb-sid", suite="sid", packages=("mariadb-server", "mariadb-client"), unit="mariadb.service",
        series="11.8", binary="/usr/sbin/mariadbd", profile="etc/apparmor.d/mariadbd", profile_name="mariadbd",
        local="etc/apparmor.d/local/mariadbd", conf_dir="etc/mysql/mariadb.conf.d",
        options="# innotier lab: a small redo log (datadir_mover/lab/packaged_host.py says why)\n"
                "[mariadbd]\ninnodb_log_file_size = 16M\n",
        initialize=("mariadb-install-db", "--user=mysql", "--skip-test-db")),
    PackagedServer(
        name="mariadb-trixie", suite="trixie", packages=("mariadb-server", "mariadb-client"),
        unit="mariadb.service", series="11.8", binary="/usr/sbin/mariadbd", profile="etc/apparmor.d/usr.sbin.mariadbd",
        profile_name="", local="", conf_dir="etc/mysql/mariadb.conf.d",
        options="# innotier lab: a small redo log (datadir_mover/lab/packaged_host.py says why)\n"
                "[mariadbd]\ninnodb_log_file_size = 16M\n",
        initialize=("mariadb-install-db", "--user=mysql", "--skip-test-db")),
)}
# the hosts whose guest also moves the datadir under /home, through the unit's drop-in, with its negative control
# (tests/lab/guest/test_in_packaged_host.py): trixie's, whose negative control it is (nothing confines its server,
# so there is no AppArmor step to leave out); the sid hosts' passing runs predate these two tests
HOME_MOVES = frozenset({"mariadb-trixie"})
OPTIONS_FILE = "60-innotier-lab.cnf"


def get(name: str) -> PackagedServer:
    try:
        return SERVERS[name]
    except KeyError:
        raise LabError(f"no packaged lab host called {name!r}; use one of {', '.join(sorted(SERVERS))}") from None


def recipe(server: PackagedServer) -> dict:
    """What changes the image besides its packages (for ImageSpec.key)."""
    return {"server": asdict(server), "unit": lab_unit_text(server.unit), "masked": host_mode.MASKED,
            "cmdline": host_mode.CMDLINE}


def guest_requirements(requirements: tuple[str, ...]) -> tuple[str, ...]:
    """innotier's requirements for a sid guest: the connector pinned for Debian 12's OpenSSL 3.0 (setup.cfg says
    why) is let go, since sid has a newer OpenSSL and a newer Python the pinned release may have no wheel for."""
    return tuple("mysql-connector-python>=9.4" if r.replace(" ", "").startswith("mysql-connector-python") else r
                 for r in requirements)


def lab_unit_text(server_unit: str) -> str:
    """innotier-lab.service ordered after ``server_unit`` (host mode's unit, which names mariadb.service)."""
    return host_mode.UNIT_TEXT.replace("mariadb.service", server_unit)


def configure(rootfs: Path, server: PackagedServer) -> None:
    """Make the bootstrapped tree a packaged host: the package's profile, unit and files left as installed."""
    _require_shipped_profile(rootfs, server)
    if server.confined:
        local = rootfs / server.local
        if not local.exists():   # what the package's postinst does (dh_apparmor); a plain #include needs the file
            local.parent.mkdir(parents=True, exist_ok=True)
            local.touch(mode=0o644)
    (rootfs / "etc/fstab").write_text("/dev/vda / ext4 rw 0 0\n")   # mounted rw by the initramfs: no fsck
    (rootfs / server.conf_dir / OPTIONS_FILE).write_text(server.options)
    systemd = rootfs / "etc/systemd/system"
    (systemd / host_mode.UNIT).write_text(lab_unit_text(server.unit))
    wants = systemd / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    unit_file = next((f"/{d}/{server.unit}" for d in ("usr/lib/systemd/system", "lib/systemd/system")
                      if (rootfs / d / server.unit).is_file()), None)
    if unit_file is None:
        raise LabError(f"{server.packages[0]} installed no {server.unit}; the packaged lab host boots that unit")
    for unit, target in ((host_mode.UNIT, f"/etc/systemd/system/{host_mode.UNIT}"), (server.unit, unit_file)):
        link = wants / unit
        if not (link.is_symlink() or link.exists()):
            os.symlink(target, link)
    for unit in host_mode.MASKED:
        link = systemd / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink("/dev/null", link)


def _require_shipped_profile(rootfs: Path, server: PackagedServer) -> None:
    """The package still ships what its host tests: a profile attached to the server, or an empty stub."""
    profile = rootfs / server.profile
    text = profile.read_text(errors="replace") if profile.is_file() else None
    if server.confined and (text is None or server.binary not in text):
        raise LabError(f"{server.packages[0]} from {server.suite} no longer ships /{server.profile} attached to "
                       f"{server.binary}; the packaged lab host tests that profile and writes none of its own")
    if not server.confined and str(profile) not in apparmor.empty_stubs([server.binary], str(profile.parent)):
        raise LabError(f"{server.packages[0]} from {server.suite} "
                       + ("ships no " if text is None else "ships rules in ") + f"/{server.profile}; its lab host "
                       f"({server.name}) tests the empty stub (an unconfined server): give it a profile_name and a "
                       "local include to test that profile instead")


# where packages keep the datadir when no option file sets it (compiled in): sid's MariaDB, MySQL and older MariaDB
PACKAGE_DATADIRS = ("/var/lib/mariadb", "/var/lib/mysql")


def package_datadirs(rootfs: Path) -> tuple[str, ...]:
    """The datadir the package's option files set, else the ones packages compile in."""
    configured = system_server.option_files(str(rootfs)).options.get("datadir")
    return (configured,) if configured else PACKAGE_DATADIRS


def needs_initialize(rootfs: Path) -> bool:
    """No system schema in the package's datadir: its postinst did not initialize it."""
    return not any((rootfs / d.lstrip("/") / "mysql").is_dir() for d in package_datadirs(rootfs))
