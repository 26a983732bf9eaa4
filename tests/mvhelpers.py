"""Helpers for the mover's and persistence tests: real tiers, one loaded golden datadir, cheap clones.

- ``mount_tmpfs`` / ``mount_zram_ext4``: real mounts (root), torn down by the caller's finalizer;
  zram devices are hot-added and hot-removed one by one (others may use zram on this host).
- ``golden_sandbox``: one MariaDB sandbox with a TPC-C schema of 1 warehouse, stopped cleanly; built once per session under
  the session's INNOTIER_HOME and reused by tests/move and tests/persist.
- ``clone_sandbox``: a new sandbox whose datadir is a ``cp -a`` of the golden one (seconds,
  instead of initializing and loading again).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from tuner.core.probe import read_mounts
from sqlhelpers import execute
from waiting import wait_for

GOLDEN = "golden-mv"
GOLDEN_OPTIONS = {"innodb_undo_tablespaces": "2", "innodb_log_file_size": "32M", "innodb_buffer_pool_size": "128M"}


def is_mounted(path: str) -> bool:
    return any(m.mountpoint == path for m in read_mounts())


def mount_tmpfs(path: str, size: str = "1G") -> str:
    os.makedirs(path, exist_ok=True)
    if not is_mounted(path):
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path], check=True)
    return path


def mount_zram_ext4(path: str, size: str = "1G") -> str:
    os.makedirs(path, exist_ok=True)
    if is_mounted(path):
        return path
    dev_id = Path("/sys/class/zram-control/hot_add").read_text().strip()
    dev = f"/dev/zram{dev_id}"
    wait_for(lambda: os.path.exists(dev), 30, f"udev to create {dev}")
    Path(f"/sys/block/zram{dev_id}/disksize").write_text(size)
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    subprocess.run(["mount", dev, path], check=True)
    return path


def unmount(path: str) -> None:
    """Unmount ``path``; for zram, reset and hot-remove the device that was mounted there."""
    entries = [m for m in read_mounts() if m.mountpoint == path]
    if not entries:
        return
    device = entries[-1].device
    for _ in range(25):  # a just-killed server may hold files open for a moment
        if subprocess.run(["umount", path], check=False, capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    else:
        subprocess.run(["umount", "-l", path], check=False, capture_output=True)
    m = re.match(r"^/dev/zram(\d+)$", device)
    if m and not any(e.device == device for e in read_mounts()):
        for attr, value in ((f"/sys/block/zram{m.group(1)}/reset", "1"),
                            ("/sys/class/zram-control/hot_remove", m.group(1))):
            for _ in range(20):
                try:
                    Path(attr).write_text(value)
                    break
                except OSError:
                    time.sleep(0.1)


def write_sparse(path, size: int, chunks: list[tuple[int, bytes]]) -> None:
    """A file of ``size`` bytes holding ``chunks`` (offset, data) and holes everywhere else."""
    with open(path, "wb") as fh:
        fh.truncate(size)
        for off, data in chunks:
            fh.seek(off)
            fh.write(data)


def golden_sandbox():
    """The session's golden sandbox (stopped, loaded); built on first use."""
    from tuner.core import sandbox as sbx

    try:
        sb = sbx.Sandbox.load(GOLDEN)
        if (Path(sb.dir) / "golden.ready").exists():
            return sb
        sb.destroy(force=True)
    except Exception:
        pass
    sb = sbx.create(GOLDEN, page_size="16k", options=dict(GOLDEN_OPTIONS))
    sb.start()
    from tuner.tpcc.loader import load

    load(sb.connection_spec(), warehouses=1, database="tpcc", drop=True, progress=False)
    sb.stop("clean")
    Path(sb.dir, "golden.ready").write_text("1\n")
    return sb


def clone_sandbox(name: str, datadir: str | None = None, start: bool = True):
    """A new sandbox with a copy of the golden datadir (same root password, its own port and socket)."""
    from tuner.core import sandbox as sbx

    golden = golden_sandbox()
    data = Path(datadir) if datadir else sbx.sandboxes_dir() / name / "data"
    data.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", golden.datadir, str(data)], check=True)
    sb = sbx.adopt(name, data, golden.client_cnf, golden.page_size, sbx.binaries_of(golden), options=golden.options)
    if start:
        sb.start()
    return sb


def checksums(spec) -> dict:
    """Our own table checksums (independent of the mover's code path, same SQL meaning)."""
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE ENGINE='InnoDB' "
                "AND TABLE_SCHEMA NOT IN ('mysql', 'sys', 'performance_schema', 'information_schema')")
    out = {}
    for s, t in cur.fetchall():
        cur.execute(f"CHECKSUM TABLE `{s}`.`{t}`")
        out[f"{s}.{t}"] = cur.fetchone()[1]
    conn.close()
    return out


def flush_settings(spec) -> dict:
    """The server's page-flush settings the mover's pre-flush changes (they must come back after every move)."""
    from datadir_mover.move import preflush

    conn = spec.with_database(None).connect()
    try:
        return preflush.read_settings(conn)
    finally:
        conn.close()


def data_consistent(spec) -> None:
    """The TPC-C consistency checks pass."""
    from tuner.tpcc.check import run_checks

    report = run_checks(spec.with_database("tpcc"), database="tpcc")
    assert report.ok, f"TPC-C checks failed: {report}"


def short_workload(spec, seconds: float = 3.0) -> int:
    """A short TPC-C run (the real driver); returns the number of committed transactions."""
    from tuner.tpcc.config import RunConfig
    from tuner.tpcc.driver import run

    result = run(spec.with_database("tpcc"), RunConfig(clients=2, warmup=0.0, duration=seconds, interval=seconds,
                                                      workers=1))
    assert result.complete, f"the TPC-C run did not complete: {result.failure}"
    return sum(per_op.get("commit", 0) for per_op in result.counts.values())


sql = execute  # the one SQL helper (tests/sqlhelpers.py)


class PendingCommit:
    """A client whose commit waits on the block (it runs in a thread; the stop may complete or kill it)."""

    def __init__(self, spec, statement: str):
        self.conn = spec.with_database(None).connect(autocommit=False)
        self.conn.cursor().execute(statement)
        self.outcome: list[str] = []
        self.thread = threading.Thread(target=self._commit, daemon=True)

    def _commit(self) -> None:
        try:
            self.conn.commit()
            self.outcome.append("committed")
        except Exception as exc:  # noqa: BLE001 - the shutdown closed it: rolled back
            self.outcome.append(f"failed: {exc}")

    def start_waiting(self, spec):
        """Commit in the thread; the commits waiting on the block (``waiting_commits.read``) once this one is among them."""
        from datadir_mover.move.server_check import waiting_commits
        from waiting import wait_for

        self.thread.start()
        watcher = spec.with_database(None).connect()
        try:
            return wait_for(lambda: (s := waiting_commits.read(watcher)).count >= 1 and s, 20, "the commit waits on the block")
        finally:
            watcher.close()


@contextlib.contextmanager
def system_user(name: str):
    """A real unprivileged system user (made for the test unless it exists, removed after): its pwd entry."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        raise RuntimeError("this test needs root and useradd (CI runs as root)")
    made = False
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        made = True
    try:
        yield pwd.getpwnam(name)
    finally:
        if made:
            subprocess.run(["userdel", name], check=False)
