"""The lab's host mode (``--init systemd``): the image boots like the DBA's real server.

systemd is PID 1, AppArmor is enabled (systemd mounts securityfs, ``apparmor.service`` loads the profiles),
Debian's ``mariadb-server`` runs as ``mariadb.service`` on /var/lib/mysql, and ``mariadbd`` is confined by a
real profile in enforce mode.  Debian ships ``/etc/apparmor.d/usr.sbin.mariadbd`` intentionally empty (the
server unconfined); a DBA who wants confinement maintains a profile like Ubuntu's ``usr.sbin.mysqld``, and
that is what the host image carries (CONFINED_PROFILE; the Debian file is kept beside it as
``usr.sbin.mariadbd.debian`` so a test can put the unconfined case back).

The run's command runs as ``innotier-lab.service`` after ``mariadb.service`` is up (Type=notify: ready, not
merely started); its output goes to the serial console and the share exactly as under the fast init, then
the VM powers off through systemd (the server stops cleanly).

The same image boots with the fast init too (the existing groups): the initramfs picks systemd only when
the kernel command line says ``lab.init=systemd``, and nothing here runs under the fast init.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tuner.core.errors import LabError

INITS = ("lab", "systemd")
CMDLINE = "lab.init=systemd apparmor=1"
PROFILE = "usr.sbin.mariadbd"
UNIT = "innotier-lab.service"

# Modelled on Ubuntu's usr.sbin.mysqld (mysql-server 8.0): configuration, datadir, socket and pid, logs,
# plugins, error messages and charsets, /tmp (user-tmp); paths are MariaDB's on Debian 12.
CONFINED_PROFILE = """# innotier lab: a confining profile for Debian's MariaDB, of the kind a DBA maintains
# (Debian ships this file empty: the server unconfined).  Modelled on Ubuntu's usr.sbin.mysqld.
#include <tunables/global>

/usr/sbin/mariadbd flags=(attach_disconnected) {
  #include <abstractions/base>
  #include <abstractions/mysql>
  #include <abstractions/nameservice>
  #include <abstractions/openssl>
  #include <abstractions/user-tmp>

  # system resources
  /sys/devices/system/cpu/ r,
  /sys/devices/system/cpu/** r,
  /sys/devices/system/node/ r,
  /sys/devices/system/node/** r,
  /sys/kernel/mm/transparent_hugepage/* r,
  # block devices (InnoDB maps its files' device through /sys/block/*/dev and sizes O_DIRECT I/O to the
  # device's physical block size); the lab's host-mode boots showed these as DENIED without them
  /sys/block/ r,
  /sys/devices/**/block/*/dev r,
  /sys/devices/**/queue/* r,
  @{PROC}/@{pid}/** r,
  @{PROC}/sys/** r,
  capability sys_resource,
  capability dac_override,
  capability dac_read_search,
  capability setuid,
  capability setgid,
  capability sys_nice,
  capability ipc_lock,

  network tcp,
  network unix,

  /etc/hosts.allow r,
  /etc/hosts.deny r,

  # configuration
  /etc/mysql/ r,
  /etc/mysql/** r,

  # pid, socket, socket lock
  /run/mysqld/ r,
  /run/mysqld/* rw,
  /var/run/mysqld/* rw,

  # systemd notify
  /{,var/}run/systemd/notify w,

  # the server binary and its plugins
  /usr/sbin/mariadbd mr,
  /usr/lib/mysql/plugin/ r,
  /usr/lib/mysql/plugin/*.so* mr,

  # error messages and charsets
  /usr/share/mariadb/ r,
  /usr/share/mariadb/** r,
  /usr/share/mysql/ r,
  /usr/share/mysql/** r,

  # the data directory
  /var/lib/mysql/ r,
  /var/lib/mysql/** rwk,

  # logs
  /var/log/mysql/ r,
  /var/log/mysql/** rw,

  # site-specific additions (innotier's moves write theirs here)
  #include <local/usr.sbin.mariadbd>
}
"""

UNIT_TEXT = """[Unit]
Description=innotier lab: the run's command, once the server is up
After=mariadb.service apparmor.service local-fs.target
Wants=mariadb.service

[Service]
Type=oneshot
TimeoutStartSec=infinity
ExecStart=/bin/sh /mnt/lab/init
StandardInput=null
StandardOutput=tty
StandardError=inherit
TTYPath=/dev/ttyS0
TTYReset=no
TTYVHangup=no

[Install]
WantedBy=multi-user.target
"""

# The lab's server options, a drop-in beside Debian's own (as a DBA's site options are; innotier's placement
# drop-in, 99-, sorts after it).  A 16 MiB redo log instead of the default 96 MiB: every move, sync and restore
# in the lab copies the datadir under emulation, where the redo log was 45% of the W=1 datadir's bytes; its
# size is not what the lab tests.  The server resizes the existing log at its first start.
LAB_OPTIONS_FILE = "etc/mysql/mariadb.conf.d/60-innotier-lab.cnf"
LAB_OPTIONS = """# innotier lab: a small redo log (datadir_mover/lab/host.py says why)
[mariadbd]
innodb_log_file_size = 16M
"""

# not wanted in a lab boot: gettys would share the serial console, timers and maintenance jobs take the CPU
MASKED = ("serial-getty@ttyS0.service", "getty@tty1.service", "apt-daily.timer", "apt-daily-upgrade.timer",
          "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer", "man-db.timer", "dpkg-db-backup.timer",
          "systemd-timesyncd.service", "mdmonitor.service", "mdcheck_start.timer", "mdcheck_continue.timer",
          "mdmonitor-oneshot.timer", "ndctl-monitor.service", "systemd-networkd-wait-online.service")

SELECT_INIT = """init=/mnt/lab/init
grep -qw lab.init=systemd /proc/cmdline && init=/lib/systemd/systemd
umount /proc /sys
exec switch_root /newroot "$init"
"""


def initramfs_init(base: str) -> str:
    """The host image's initramfs: the base script, handing over to systemd when the command line asks."""
    tail = "umount /proc /sys\nexec switch_root /newroot /mnt/lab/init\n"
    if not base.endswith(tail):
        raise LabError("the lab initramfs script no longer ends with its hand-over; update host.SELECT_INIT with it")
    return base[: -len(tail)] + SELECT_INIT


def configure(rootfs: Path) -> None:
    """Turn the bootstrapped tree into the host image (before mkfs)."""
    (rootfs / "etc/fstab").write_text("/dev/vda / ext4 rw 0 0\n")   # mounted rw by the initramfs: no fsck
    aa = rootfs / "etc/apparmor.d"
    debian = aa / PROFILE
    if debian.exists():
        shutil.copy2(debian, aa / f"{PROFILE}.debian")
    debian.write_text(CONFINED_PROFILE)
    (aa / "local").mkdir(exist_ok=True)
    (aa / "local" / PROFILE).touch()
    (rootfs / LAB_OPTIONS_FILE).write_text(LAB_OPTIONS)
    systemd = rootfs / "etc/systemd/system"
    (systemd / UNIT).write_text(UNIT_TEXT)
    wants = systemd / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit, target in ((UNIT, f"/etc/systemd/system/{UNIT}"), ("mariadb.service", "/lib/systemd/system/mariadb.service")):
        link = wants / unit
        if not link.is_symlink():
            os.symlink(target, link)
    for unit in MASKED:
        link = systemd / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink("/dev/null", link)
