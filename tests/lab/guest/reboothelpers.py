"""What the guest sides of the PZRAM reboot tests share (test_in_host_reboot, test_in_packaged_reboot): a state
file that outlives a power cut, the rows the tests commit and read back, the host's own innotier and backing disk,
and the DBA's unit that makes the zram tier again at every boot."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from labhelpers import sh


class StateFile:
    """What one boot leaves for the next, written durably (the next boot may follow a power cut)."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def save(self, **changes) -> dict:
        state = {**self.read(), **changes}
        with open(self.path, "w") as fh:
            json.dump(state, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        return state


def query(spec, sql: str, *args) -> list[tuple]:
    conn = spec.connect()
    try:
        cur = conn.cursor()
        cur.execute(sql, args)
        rows = cur.fetchall() if cur.with_rows else []
        conn.commit()
        return rows
    finally:
        conn.close()


def commit_rows(spec, phase: str, n: int) -> list[int]:
    """n rows of one phase in pz.commits, committed (autocommit off: one COMMIT); their ids."""
    conn = spec.connect()
    try:
        cur = conn.cursor()
        for i in range(n):
            cur.execute("INSERT INTO pz.commits (phase, seq, at) VALUES (%s, %s, %s)", (phase, i, time.time()))
        conn.commit()
        cur.execute("SELECT id FROM pz.commits WHERE phase = %s ORDER BY id", (phase,))
        return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def ids(spec) -> list[int]:
    return [r[0] for r in query(spec, "SELECT id FROM pz.commits ORDER BY id")]


class Rows:
    """The server a test talks to, found anew at every call (its socket may move with a restore)."""

    def __init__(self, spec_of):
        self.spec_of = spec_of

    def query(self, sql: str, *args) -> list[tuple]:
        return query(self.spec_of(), sql, *args)

    def commit(self, phase: str, n: int) -> list[int]:
        return commit_rows(self.spec_of(), phase, n)

    def ids(self) -> list[int]:
        return ids(self.spec_of())


def mount_source(path: str) -> str:
    return sh("findmnt", "-n", "-o", "SOURCE", "--target", path).stdout.strip()


def unit_time(unit: str, prop: str) -> int:
    return int(sh("systemctl", "show", "-p", prop, "--value", unit).stdout.strip() or 0)


def install_innotier_on_the_host(install_dir: str) -> None:
    """What a DBA's host has: innotier installed on its own disk (the units run it at boot, before the lab's
    share is mounted): the checkout's snapshot copied and put on the venv's path."""
    shutil.copytree("/mnt/src", install_dir, symlinks=True)
    site = next(Path("/opt/innotier/lib").glob("python3*/site-packages"))
    (site / "innotier-host.pth").write_text(install_dir + "\n")


def backing_disk(device: str, mountpoint: str) -> None:
    """The backing store on a disk of its own, mounted at every boot through fstab."""
    sh("mkfs.ext4", "-q", "-F", device)
    os.makedirs(mountpoint, exist_ok=True)
    with open("/etc/fstab", "a") as fh:
        fh.write(f"{device} {mountpoint} ext4 defaults 0 2\n")
    sh("systemctl", "daemon-reload")
    sh("mount", mountpoint)


def zram_tier_unit(tier: str, restore_unit: str, server_unit: str, note: str = "") -> str:
    """The DBA's unit that makes the tier again at every boot (zram is RAM: empty after a reboot or a power cut),
    before innotier's restore unit fills it and before the server starts."""
    return f"""[Unit]
Description=PZRAM tier: a 1 GiB zram device with ext4 at {tier} (empty at every boot; restored by innotier)
Before={restore_unit} {server_unit}
{note}ConditionPathIsMountPoint=!{tier}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec 'modprobe zram; d=$(zramctl --find --size 1G); mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$d"; mkdir -p {tier}; mount -o discard "$d" {tier}'

[Install]
RequiredBy={restore_unit}
"""
