"""Helpers for the mover's and persistence tests: real tiers, one loaded golden datadir, cheap clones.

- ``mount_tmpfs`` / ``mount_zram_ext4``: real mounts (root), torn down by the caller's finalizer;
  zram devices are hot-added and hot-removed one by one (others may use zram on this host).
- ``golden_sandbox``: one MariaDB sandbox with a TPC-C schema of 1 warehouse (or, until the
  TPC-C loader exists, a schema of our own), stopped cleanly; built once per session under
  the session's INNOTIER_HOME and reused by tests/move and tests/persist.
- ``clone_sandbox``: a new sandbox whose datadir is a ``cp -a`` of the golden one (seconds,
  instead of initializing and loading again).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import subprocess
import time
from pathlib import Path

from datadir_mover.probe import read_mounts

GOLDEN = "golden-mv"
GOLDEN_OPTIONS = {"innodb_undo_tablespaces": "2", "innodb_log_file_size": "32M", "innodb_buffer_pool_size": "128M"}
OWN_SCHEMA = "mvdata"


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
    for _ in range(50):
        if os.path.exists(dev):
            break
        time.sleep(0.05)
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


def tpcc_available() -> bool:
    try:
        importlib.import_module("tuner.tpcc.loader")
        importlib.import_module("tuner.tpcc.check")
        return True
    except ModuleNotFoundError:
        return False


def load_own_schema(spec) -> None:
    """A small schema of our own (orders with lines), used only while the TPC-C loader is not there."""
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {OWN_SCHEMA}")
    cur.execute(f"CREATE TABLE {OWN_SCHEMA}.orders (id INT PRIMARY KEY AUTO_INCREMENT, c INT, total BIGINT,"
                " note VARCHAR(200), KEY(c)) ENGINE=InnoDB")
    cur.execute(f"CREATE TABLE {OWN_SCHEMA}.olines (o INT, n INT, amount INT, PRIMARY KEY(o, n)) ENGINE=InnoDB")
    for batch in range(20):
        cur.execute("START TRANSACTION")
        for i in range(500):
            cur.execute(f"INSERT INTO {OWN_SCHEMA}.orders (c, total, note) VALUES (%s, 0, REPEAT('x', 150))",
                        (i % 97,))
            oid = cur.lastrowid
            cur.executemany(f"INSERT INTO {OWN_SCHEMA}.olines VALUES (%s, %s, %s)",
                            [(oid, n, (oid * 7 + n) % 1000) for n in range(5)])
            cur.execute(f"UPDATE {OWN_SCHEMA}.orders SET total = (SELECT SUM(amount) FROM {OWN_SCHEMA}.olines "
                        "WHERE o = %s) WHERE id = %s", (oid, oid))
        cur.execute("COMMIT")
    conn.close()


def own_schema_consistent(spec) -> bool:
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute(f"SELECT COUNT(*) FROM {OWN_SCHEMA}.orders o WHERE o.total <> "
                f"(SELECT COALESCE(SUM(amount), 0) FROM {OWN_SCHEMA}.olines l WHERE l.o = o.id)")
    bad = cur.fetchone()[0]
    conn.close()
    return bad == 0


def golden_sandbox():
    """The session's golden sandbox (stopped, loaded); built on first use."""
    from tuner import sandbox as sbx

    try:
        sb = sbx.Sandbox.load(GOLDEN)
        if (Path(sb.dir) / "golden.ready").exists():
            return sb
        sb.destroy(force=True)
    except Exception:
        pass
    sb = sbx.create(GOLDEN, page_size="16k", options=dict(GOLDEN_OPTIONS))
    sb.start()
    spec = sb.connection_spec()
    if tpcc_available():
        from tuner.tpcc.loader import load

        load(spec, warehouses=1, database="tpcc", drop=True, progress=False)
    else:
        load_own_schema(spec)
    sb.stop("clean")
    Path(sb.dir, "golden.ready").write_text("1\n")
    return sb


def clone_sandbox(name: str, datadir: str | None = None, start: bool = True):
    """A new sandbox with a copy of the golden datadir (same root password, its own port and socket)."""
    from tuner import sandbox as sbx

    golden = golden_sandbox()
    sb_dir = sbx.sandboxes_dir() / name
    sb_dir.mkdir(parents=True)
    data = Path(datadir) if datadir else sb_dir / "data"
    subprocess.run(["cp", "-a", golden.datadir, str(data)], check=True)
    sb = dataclasses.replace(golden, name=name, dir=str(sb_dir), datadir=str(data), port=sbx.free_port(),
                             socket=sbx._socket_path(sb_dir, name), needs_bootstrap=False, created_at=time.time())
    sb.conf_d.mkdir(parents=True, exist_ok=True)
    sb.tmpdir.mkdir(parents=True, exist_ok=True)
    client = golden.client_cnf.read_text()
    client = re.sub(r"(?m)^socket=.*$", f"socket={sb.socket}", client)
    from tuner.durable import write_atomic

    write_atomic(sb.client_cnf, client, mode=0o600)
    sb.write_cnf()
    sb.save()
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


def data_consistent(spec) -> None:
    """TPC-C consistency checks when the schema is TPC-C, else our own schema's invariant."""
    if tpcc_available():
        from tuner.tpcc.check import run_checks

        report = run_checks(spec.with_database("tpcc"), database="tpcc")
        assert report.ok, f"TPC-C checks failed: {report}"
    else:
        assert own_schema_consistent(spec), "orders.total no longer equals the sum of its lines"


def short_workload(spec, seconds: float = 3.0) -> int:
    """A short write workload: the TPC-C driver when the schema is TPC-C, else transactions of our own.

    Returns the number of committed transactions.
    """
    if tpcc_available():
        from tuner.tpcc.config import RunConfig
        from tuner.tpcc.driver import run

        result = run(spec.with_database("tpcc"), RunConfig(clients=2, warmup=0.0, duration=seconds, interval=seconds,
                                                          workers=1))
        assert result.complete, f"the TPC-C run did not complete: {result.failure}"
        return sum(per_op.get("commit", 0) for per_op in result.counts.values())
    conn = spec.with_database(OWN_SCHEMA).connect()
    cur = conn.cursor()
    n = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        cur.execute("START TRANSACTION")
        cur.execute("INSERT INTO orders (c, total, note) VALUES (1, 0, 'w')")
        oid = cur.lastrowid
        cur.executemany("INSERT INTO olines VALUES (%s, %s, %s)", [(oid, k, k + 1) for k in range(3)])
        cur.execute("UPDATE orders SET total = 6 WHERE id = %s", (oid,))
        cur.execute("COMMIT")
        n += 1
    conn.close()
    return n
