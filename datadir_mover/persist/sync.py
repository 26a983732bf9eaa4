"""A sync: one consistent copy of every InnoDB location into a new generation, then the flip.

Online (the server runs): ``mariadb-backup``/``xtrabackup`` ``--backup`` then ``--prepare``, or MySQL's
``CLONE LOCAL DATA DIRECTORY``.  mariadb-backup blocks commits from BACKUP STAGE BLOCK_COMMIT to its end, so
the copy holds every commit made before that stage: the moment its log says the stage holds is the
generation's ``finished_at`` (else the end of ``--backup``), and the loss window is counted from there, never
from the end of ``--prepare``.  CLONE copies InnoDB only: a sync refuses, naming them, while MyISAM, Aria, CSV
or ARCHIVE tables exist (they would come back empty), and refuses when the clone plugin is not active.

Offline (``--offline``): no server process (see ``server_process``), so nothing writes; the files of every
location are copied together with verified copies (move/copy/).

The locations are read again at every sync (the running server's variables, or the stopped server's option
files), so a move made after ``persist install`` is what the next generation copies.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import mysql.connector

from tuner.core.errors import InnotierError, TierError
from tuner.core.server import ConnectionSpec

from datadir_mover.move.copy import FileRecord, copy_tree, walk
from datadir_mover.move.copy import safe_fs
from datadir_mover.persist import clone_staging, locations, missed_sync, server_process
from datadir_mover.persist.config import PersistConfig, load_config, write_config
from datadir_mover.persist.generations import (OFFLINE_METHOD, Generation, current, flip, generations_dir, lock,
                                               new_id, seal, start)
from datadir_mover.persist.locations import Locations
from datadir_mover.persist.server_process import ServerState

SQL_CLONE_LOCAL = "CLONE LOCAL DATA DIRECTORY = %s"  # MySQL 8.0.17+ (clone plugin), consistent, ready to start
SQL_CLONE_PLUGIN = "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone'"
# tables CLONE would bring back empty: every base table whose engine keeps data outside InnoDB (MEMORY and
# BLACKHOLE hold nothing across a restart anyway; the mysql schema's CSV log tables are recreated)
SQL_NOT_INNODB = ("SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM information_schema.TABLES "
                  "WHERE TABLE_TYPE = 'BASE TABLE' AND ENGINE NOT IN ('InnoDB', 'MEMORY', 'BLACKHOLE', "
                  "'PERFORMANCE_SCHEMA', 'TempTable') AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', "
                  "'performance_schema', 'sys') ORDER BY TABLE_SCHEMA, TABLE_NAME")
# mariadb-backup's log line once BACKUP STAGE BLOCK_COMMIT holds: no commit completes from here to its end
COMMITS_BLOCKED = re.compile(r"Acquired locks for BACKUP STAGE BLOCK_COMMIT")
NOT_COPIED_OFFLINE = re.compile(r"^(ibtmp\d+|.*\.pid|.*\.sock.*)$")


def _run(argv: list[str], what: str, timeout: float = 3600, moment: re.Pattern | None = None) -> float | None:
    """Run a backup tool; when a line of its log matches ``moment``, the time that line was read (else None)."""
    tail: list[str] = []
    seen_at = None
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        deadline = threading.Timer(timeout, proc.kill)
        deadline.start()
        try:
            for line in proc.stderr:
                if seen_at is None and moment is not None and moment.search(line):
                    seen_at = time.time()
                if line.strip():
                    tail = (tail + [line.strip()])[-3:]
        finally:
            deadline.cancel()
        rc = proc.wait()
    if rc != 0:
        raise TierError(f"{what} failed (exit {rc}): {' | '.join(tail)}; nothing was replaced")
    return seen_at


def _backup_tool(method: str, loc: Locations, spec: ConnectionSpec, dest: Path) -> float:
    """mariadb-backup or xtrabackup --backup then --prepare; returns the moment the copy holds."""
    exe = (shutil.which("mariadb-backup") or shutil.which("mariabackup")) if method == "mariadb-backup" \
        else shutil.which("xtrabackup")
    with spec.client_option_file() as creds:  # credentials in a 0600 file, never in argv
        blocked = _run([exe, f"--defaults-file={creds}", "--backup", f"--target-dir={dest}", f"--datadir={loc.datadir}",
              f"--innodb-data-home-dir={loc.ibdata_dir}", f"--innodb-data-file-path={loc.data_file_path}",
              f"--innodb-log-group-home-dir={loc.redo_dir}", f"--innodb-undo-directory={loc.undo_dir}",
              f"--innodb-page-size={loc.page_size}"], f"{method} --backup", moment=COMMITS_BLOCKED)
    # the copy holds what was committed before commits were blocked (they stay blocked until its end); without
    # that line, the end of --backup (a little later).  --prepare only applies the copied redo
    finished = blocked or time.time()
    _run([exe, "--prepare", f"--target-dir={dest}"], f"{method} --prepare")
    return finished


def _clone(conn, dest: Path) -> float:
    """MySQL's CLONE LOCAL, after checking it can copy everything; returns the end of the clone."""
    cur = conn.cursor()
    cur.execute(SQL_CLONE_PLUGIN)
    row = cur.fetchone()
    if not row or str(row[0]).upper() != "ACTIVE":
        raise TierError("the clone plugin is not active, so CLONE LOCAL cannot take a consistent copy; load it "
                        "(`INSTALL PLUGIN clone SONAME 'mysql_clone.so'`) or install xtrabackup; nothing was copied")
    cur.execute(SQL_NOT_INNODB)
    tables = [f"{s}.{t} ({e})" for s, t, e in cur.fetchall()]
    if tables:
        raise TierError(f"CLONE copies InnoDB tables only and these would come back empty: {', '.join(tables)}; "
                        "convert them (ALTER TABLE ... ENGINE=InnoDB) or install xtrabackup; nothing was copied")
    try:
        cur.execute(SQL_CLONE_LOCAL, (str(dest),))
    except mysql.connector.Error as exc:
        why = " ".join(str(exc.msg or exc).split()).rstrip(".")
        fix = ("the server may not write there: its AppArmor profile needs the rule `persist install` adds, or the "
               "directory's permissions" if "errno: 13" in why else "room on the backing file system?")
        raise TierError(f"CLONE LOCAL into {dest} failed: {why}; the partial clone is removed and the current "
                        f"generation stands (nothing was replaced): fix the cause ({fix}) and sync again") from None
    return time.time()


def _clone_staged(cfg: PersistConfig, loc: Locations, spec: ConnectionSpec, gen_id: str, dest: Path) -> float:
    """CLONE as the server's user into the staging directory, then root takes the clone over as ``dest``
    (clone_staging); a failed clone is removed by the caller (``clone_staging.discard``)."""
    uid, gid = clone_staging.server_owner(loc.datadir)
    clone_staging.prepare(cfg.backing, uid, gid)
    conn = spec.connect()
    try:
        finished = _clone(conn, clone_staging.clone_dir(cfg.backing, gen_id))
    finally:
        conn.close()
    try:
        clone_staging.take_over(cfg.backing, gen_id, dest)
    except safe_fs.UnsafePath as exc:
        raise TierError(f"{exc}; nothing was replaced") from None
    return finished


def _backup_online(cfg: PersistConfig, loc: Locations, spec: ConnectionSpec, gen_id: str, dest: Path) -> float:
    if cfg.method in ("mariadb-backup", "xtrabackup"):
        return _backup_tool(cfg.method, loc, spec, dest)
    return _clone_staged(cfg, loc, spec, gen_id, dest)


def _copy_offline(loc: Locations, dest: Path) -> dict[str, FileRecord]:
    """No server process: copy every InnoDB location's files together into one datadir layout; what the copies
    recorded (each file's digest, its copy read back and matched).  MyISAM, Aria and every other file of the
    datadir come along: nothing writes them while the server is down."""
    dest.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    copied: dict[str, FileRecord] = {}
    for d in loc.dirs():
        if not os.path.isdir(d):
            raise TierError(f"{d} is missing, so the server's files are not all there; an offline sync would be "
                            "incomplete: restore with `innotier persist restore` instead")
        names = [n for n in sorted(os.listdir(d)) if loc.destination(n) == d and n not in seen
                 and not NOT_COPIED_OFFLINE.match(n)]
        seen.update(names)
        copied.update(copy_tree(d, dest, walk(d, names), verify=True)[0].records)
    return copied


def _require_state(cfg: PersistConfig, offline: bool) -> None:
    st = server_process.state(cfg.server, cfg.watched_unit())
    if offline and st == ServerState.RUNNING:
        raise TierError("the server is running (its process is there, whether or not it takes connections); an "
                        "offline sync needs it stopped (drop --offline for an online, consistent backup)")
    if offline and st == ServerState.CRASHED:
        raise TierError("the server did not shut down cleanly (stale pid file); its files are not a clean copy: "
                        "start it (crash recovery), then sync")
    if not offline and st != ServerState.RUNNING:
        raise TierError("the server is not running; start it, or use --offline for a stopped server")


def sync(backing: str, offline: bool = False, echo: Callable[[str], None] = lambda s: None) -> Generation:
    """Take a consistent copy now into a new generation and flip ``current`` to it."""
    cfg = load_config(backing)
    fd = lock(backing, "sync")
    try:
        _require_state(cfg, offline)
        spec = None if offline else cfg.connection_spec()
        loc = locations.current(cfg.server, cfg.locations, spec)
        gen = _take(cfg, loc, spec, echo)
        if loc != cfg.locations:
            echo(f"the server's files are now under {', '.join(loc.dirs())}; persist.json updated")
            write_config(dataclasses.replace(cfg, locations=loc))
        missed_sync.clear(backing)
        return gen
    finally:
        os.close(fd)


def _take(cfg: PersistConfig, loc: Locations, spec: ConnectionSpec | None, echo: Callable[[str], None]) -> Generation:
    gen_id = new_id()
    try:
        tmp = start(cfg.backing, gen_id)
    except OSError as exc:
        raise TierError(f"cannot start generation {gen_id} in {cfg.backing}: {exc.strerror}; nothing was replaced "
                        "(make room on, or remount read-write, the backing file system)") from None
    try:
        t0 = time.time()
        copied = None
        if spec is None:
            echo(f"copying the stopped server's files into generation {gen_id}")
            copied = _copy_offline(loc, tmp / "data")
            finished, method = time.time(), OFFLINE_METHOD
        else:
            echo(f"CLONE LOCAL into {clone_staging.clone_dir(cfg.backing, gen_id)}, as the server's user, for generation "
                 f"{gen_id}" if cfg.method == "clone" else f"{cfg.method} --backup and --prepare into generation {gen_id}")
            finished, method = _backup_online(cfg, loc, spec, gen_id, tmp / "data"), cfg.method
        files, nbytes = seal(tmp, copied)
        gen = Generation(gen_id, str(generations_dir(cfg.backing) / gen_id), method, t0, finished,
                         round(time.time() - t0, 3), nbytes, files)   # the whole sync: what the RPO adds
        flip(cfg.backing, tmp, gen)
        return gen
    except OSError as exc:
        raise TierError(f"the copy into generation {gen_id} failed: {exc.strerror} ({exc.filename}); nothing was "
                        "replaced (make room on, or remount read-write, the backing file system)") from None
    finally:
        if tmp.exists():    # failed: what it wrote is no copy; its space goes back to the backing
            shutil.rmtree(tmp, ignore_errors=True)
        if spec is not None and cfg.method == "clone":   # a failed CLONE's partial directory, the server user's
            clone_staging.discard(cfg.backing, gen_id)


def sync_at_shutdown(backing: str, echo: Callable[[str], None] = lambda s: None) -> Generation | None:
    """The restore unit's ExecStop: an offline sync after the server stopped.  When it cannot be taken (the server
    did not stop cleanly) or fails, that is recorded (``missed_sync``) so the next boot's restore does not bring
    back an older generation without a word; None when no copy was taken."""
    cfg = load_config(backing)
    last = current(backing)
    st = server_process.state(cfg.server, cfg.watched_unit())
    if st != ServerState.STOPPED:
        why = "did not stop cleanly (its pid file is left behind)" if st == ServerState.CRASHED else "still runs"
        missed_sync.record(backing, f"no sync at shutdown: the server {why}", last.id if last else None)
        return None
    try:
        return sync(backing, offline=True, echo=echo)
    except InnotierError as exc:
        missed_sync.record(backing, f"the sync at shutdown failed: {exc}", last.id if last else None)
        raise
