"""Persistence for volatile tiers: consistent copies in generations, all-or-nothing restore, systemd units.

A datadir (or redo, undo, ibdata) on tmpfs or zram is gone after a power loss or a
reboot.  A plain rsync of the live files is not a consistent copy (pages and redo
change while they are read), so a sync is always one of:

- online: ``mariadb-backup --backup`` then ``--prepare`` (MariaDB), ``xtrabackup`` the same
  way, or MySQL's ``CLONE LOCAL DATA DIRECTORY`` (8.0.17+, no prepare needed).  mariadb-backup
  blocks commits from BACKUP STAGE BLOCK_COMMIT to the end, so the copy holds every
  transaction committed before the backup finished and none after.
- offline (``--offline``): the server is stopped cleanly, nothing writes, and the files of
  every InnoDB location are copied together (verified copies, see move/copy/).

Layout of the backing directory (on persistent storage)::

    persist.json              what is persisted: server, tier, locations, interval (written by install/sync)
    client.cnf                0600 [client] credentials for mariadb-backup (system servers; never argv)
    generations/<id>/data/    one consistent copy, prepared (a datadir mariadb-backup layout)
    generations/<id>/manifest.json, COMPLETE
    current.json              the pointer: which generation is the last complete one (atomic flip)

A sync writes ``generations/.tmp-<id>``, prepares it, fsyncs every file and directory,
writes its manifest and COMPLETE marker, renames it into place and only then flips
``current.json`` (write, fsync, rename): the previous generation stays until the new one is
complete, and is kept one more round.  A restore uses only ``current``'s generation: it
stages every destination (datadir, ibdata, redo, undo directories) beside itself in one read
of the generation, hashing the bytes as it copies them, checks those digests and the set of
files against the manifest, and only then swaps them in: data files and redo always come
from the same generation (MariaDB 10.8+ refuses to start without ib_logfile0, MDEV-27199; a
mix of generations would start and be silently corrupt).

Recovery point: a power loss loses what was committed after the last complete sync.  With
a timer every ``interval`` and syncs taking ``d`` seconds, the worst case is ``interval + d``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner.core.units import format_duration
from tuner.core.durable import fsync_dir, write_atomic, write_json_atomic
from tuner.core.errors import InnotierError, TierError, ToolMissing, UsageError
from tuner.core.server import ConnectionSpec, Flavor, ServerModel, inspect

from datadir_mover.move.copy import FileRecord, Manifest, copy_tree, digest_file, walk
from tuner.core.sandbox import Sandbox, SandboxState

# metadata files mariadb-backup / xtrabackup leave in a backup: never restored into a datadir
BACKUP_METADATA = re.compile(r"^(backup-my\.cnf|xtrabackup_.*|mariadb_backup_.*|ib_buffer_pool|aria_log_control\.tmp)$")
REDO_NAMES = re.compile(r"^(ib_logfile\d+|#innodb_redo)$")
UNDO_NAMES = re.compile(r"^(undo\d{3}|undo_\d{3}|.*\.ibu)$")
SQL_CLONE_LOCAL = "CLONE LOCAL DATA DIRECTORY = %s"  # MySQL 8.0.17+ (clone plugin), consistent, ready to start
INTERVAL_RE = re.compile(r"^\s*(\d+)\s*(s|sec|m|min|h)?\s*$")
STATE_FILE = "persist.json"
POINTER = "current.json"
OFFLINE_METHOD = "offline copy (server stopped cleanly)"   # a generation's method when the server was stopped


def parse_interval(text: str) -> int:
    """Seconds from ``30s``, ``5m``, ``1h`` or a bare number of seconds."""
    m = INTERVAL_RE.match(str(text))
    if not m:
        raise UsageError(f"--interval {text!r} is not a duration; write it like 30s, 5m or 1h")
    n = int(m.group(1)) * {"s": 1, "sec": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if n < 10:
        raise UsageError(f"--interval {text} is shorter than 10 s; a consistent copy takes longer than that")
    return n


# ---------------------------------------------------------------------------
# What is persisted


@dataclass
class Locations:
    """Where the server keeps InnoDB files (saved so restore works while the server is down)."""

    datadir: str
    ibdata_dir: str
    redo_dir: str
    undo_dir: str
    data_file_path: str
    flavor: str
    version: str
    page_size: int
    uid: int
    gid: int

    @classmethod
    def from_model(cls, model: ServerModel) -> "Locations":
        st = os.stat(model.datadir)
        return cls(model.datadir, model.innodb_data_home_dir, model.innodb_log_group_home_dir,
                   model.innodb_undo_directory, model.innodb_data_file_path, model.flavor.value,
                   str(model.version), model.page_size, st.st_uid, st.st_gid)

    def ibdata_names(self) -> set[str]:
        return {p.split(":")[0] for p in self.data_file_path.split(";") if p.strip()}

    def destination(self, name: str) -> str:
        """Which directory a top-level file of a prepared backup belongs in."""
        if name in self.ibdata_names():
            return self.ibdata_dir
        if REDO_NAMES.match(name):
            return self.redo_dir
        if UNDO_NAMES.match(name):
            return self.undo_dir
        return self.datadir

    def dirs(self) -> list[str]:
        return sorted({self.datadir, self.ibdata_dir, self.redo_dir, self.undo_dir})


@dataclass
class PersistConfig:
    tier: str
    backing: str
    interval_s: int
    server: dict[str, Any]  # sandbox name or socket/host/port, defaults file (never the password)
    server_unit: str | None
    locations: Locations
    method: str  # mariadb-backup, xtrabackup, clone
    created_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PersistConfig":
        d = dict(d)
        d["locations"] = Locations(**d["locations"])
        return cls(**d)

    def connection_spec(self) -> ConnectionSpec:
        s = self.server
        if s.get("sandbox"):
            return Sandbox.load(s["sandbox"]).connection_spec()
        creds = Path(self.backing, "client.cnf")
        return ConnectionSpec.from_options(socket=s.get("socket"), host=s.get("host"), port=s.get("port"),
                                           defaults_file=str(creds) if creds.exists() else s.get("defaults_file"))


def load_config(backing: str | os.PathLike) -> PersistConfig:
    p = Path(backing, STATE_FILE)
    if not p.is_file():
        raise UsageError(f"{backing} is not a persistence backing directory (no {STATE_FILE}); "
                         "set it up with `innotier persist install --tier PATH --backing DIR`")
    return PersistConfig.from_dict(json.loads(p.read_text()))


def backup_method(flavor: str) -> str:
    if flavor == Flavor.MARIADB.value:
        if shutil.which("mariadb-backup") or shutil.which("mariabackup"):
            return "mariadb-backup"
        raise ToolMissing("mariadb-backup not found; install it (apt-get install mariadb-backup)")
    return "xtrabackup" if shutil.which("xtrabackup") else "clone"


def _under(path: str, root: str) -> bool:
    p, r = os.path.realpath(path), os.path.realpath(root)
    return p == r or p.startswith(r.rstrip("/") + "/")


def configure(spec: ConnectionSpec, tier: str, backing: str, interval: str, server_unit: str | None) -> PersistConfig:
    """Validate and build the persistence config (nothing written)."""
    tier_p, backing_p = os.path.abspath(tier), os.path.abspath(backing)
    if not os.path.isdir(tier_p):
        raise TierError(f"tier {tier_p} is not a directory; mount the tier first (innotier tiers create ...)")
    # restore checks the same at boot, where it tells a tier whose mount did not come up
    require_tier_mounted(tier_p, "give the tier's mount point (the directory the RAM disk is mounted on), not a "
                                 "directory inside or beside it")
    if _under(backing_p, tier_p):
        raise UsageError(f"backing directory {backing_p} is on the tier {tier_p} itself; put it on persistent storage")
    model = inspect(spec)
    loc = Locations.from_model(model)
    on_tier = [d for d in loc.dirs() if _under(d, tier_p)]
    if not on_tier:
        raise UsageError(f"nothing of the server lives on {tier_p} (datadir {loc.datadir}); move it there first "
                         f"(`innotier move apply datadir --to {tier_p}/mysql`) or give the right --tier")
    parent = backing_p if os.path.isdir(backing_p) else os.path.dirname(backing_p)
    if not os.path.isdir(parent):
        raise UsageError(f"the backing directory's parent {parent} does not exist; create it on persistent storage")
    if os.stat(parent).st_dev == os.stat(tier_p).st_dev:
        raise UsageError(f"backing directory {backing_p} is on the same file system as the tier {tier_p}; "
                         "put it on persistent storage")
    server = {"sandbox": spec.sandbox, "socket": spec.socket, "host": spec.host, "port": spec.port,
              "defaults_file": spec.defaults_file}
    return PersistConfig(tier_p, backing_p, parse_interval(interval), server, server_unit, loc,
                         backup_method(loc.flavor))


def save_config(cfg: PersistConfig, spec: ConnectionSpec) -> None:
    root = Path(cfg.backing)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    (root / "generations").mkdir(exist_ok=True)
    if not cfg.server.get("sandbox") and spec.password:
        lines = ["[client]", f"user={spec.user}", f"password={spec.password}"]
        lines += [f"socket={spec.socket}"] if spec.socket else [f"host={spec.host}", f"port={spec.port or 3306}"]
        write_atomic(root / "client.cnf", "\n".join(lines) + "\n", mode=0o600)
    write_json_atomic(root / STATE_FILE, cfg.to_dict(), mode=0o600)


# ---------------------------------------------------------------------------
# Server state


def server_running(cfg: PersistConfig) -> bool:
    s = cfg.server
    if s.get("sandbox"):
        return Sandbox.load(s["sandbox"]).state() == SandboxState.RUNNING
    try:
        cfg.connection_spec().connect(connection_timeout=2).close()
        return True
    except InnotierError:
        return False


def server_stopped_cleanly(cfg: PersistConfig) -> bool:
    s = cfg.server
    if s.get("sandbox"):
        return Sandbox.load(s["sandbox"]).state() == SandboxState.STOPPED
    return not server_running(cfg)


# ---------------------------------------------------------------------------
# Generations


@dataclass
class Generation:
    id: str
    path: str
    method: str
    started_at: float
    finished_at: float  # the copy holds every commit before this moment (backup end / shutdown)
    duration_s: float
    bytes: int
    files: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def generations_dir(backing: str) -> Path:
    return Path(backing, "generations")


def current(backing: str) -> Generation | None:
    p = Path(backing, POINTER)
    if not p.exists():
        return None
    return Generation(**json.loads(p.read_text()))


def _lock(backing: str, what: str):
    fd = os.open(Path(backing, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise TierError(f"another persist sync or restore is running on {backing}; wait for it ({what} not started)")
    return fd


def _run(argv: list[str], what: str, timeout: float = 3600) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        tail = [ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip()][-3:]
        raise TierError(f"{what} failed (exit {r.returncode}): {' | '.join(tail)}; nothing was replaced")
    return r.stderr


def _backup_online(cfg: PersistConfig, spec: ConnectionSpec, dest: Path) -> None:
    loc = cfg.locations
    if cfg.method in ("mariadb-backup", "xtrabackup"):
        exe = shutil.which("mariadb-backup") or shutil.which("mariabackup") if cfg.method == "mariadb-backup" \
            else shutil.which("xtrabackup")
        with spec.client_option_file() as creds:  # credentials in a 0600 file, never in argv
            _run([exe, f"--defaults-file={creds}", "--backup", f"--target-dir={dest}", f"--datadir={loc.datadir}",
                  f"--innodb-data-home-dir={loc.ibdata_dir}", f"--innodb-data-file-path={loc.data_file_path}",
                  f"--innodb-log-group-home-dir={loc.redo_dir}", f"--innodb-undo-directory={loc.undo_dir}",
                  f"--innodb-page-size={loc.page_size}"], f"{cfg.method} --backup")
        _run([exe, "--prepare", f"--target-dir={dest}"], f"{cfg.method} --prepare")
        return
    conn = spec.connect()  # MySQL: CLONE LOCAL writes a consistent, ready-to-start datadir
    try:
        conn.cursor().execute(SQL_CLONE_LOCAL, (str(dest),))
    finally:
        conn.close()


def _copy_offline(cfg: PersistConfig, dest: Path) -> dict[str, FileRecord]:
    """The server is stopped cleanly: copy every InnoDB location's files together into one datadir layout; what
    the copies recorded (each file's digest, its copy read back and matched)."""
    loc = cfg.locations
    dest.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    copied: dict[str, FileRecord] = {}
    for d in loc.dirs():
        if not os.path.isdir(d):
            raise TierError(f"{d} is missing, so the server's files are not all there; an offline sync would be "
                            "incomplete: restore with `innotier persist restore` instead")
        names = [n for n in sorted(os.listdir(d)) if loc.destination(n) == d and n not in seen
                 and not re.match(r"^(ibtmp\d+|.*\.pid|.*\.sock.*)$", n)]
        seen.update(names)
        copied.update(copy_tree(d, dest, walk(d, names), verify=True)[0].records)
    return copied


def _seal(gen_dir: Path, copied: dict[str, FileRecord] | None = None) -> tuple[int, int]:
    """fsync every file and directory of a generation and write its manifest; (files, bytes).

    A file in ``copied`` whose copy was read back and matched, and is unchanged since, gets the digest its copy
    recorded; every other file (an online backup's) is read and hashed here."""
    data = gen_dir / "data"
    records = {}
    total = 0
    for rel, st in walk(data):
        p = data / rel
        if stat.S_ISREG(st.st_mode):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            records[rel] = {"size": st.st_size, "digest": _verified_digest((copied or {}).get(rel), st)
                            or digest_file(str(p), drop_cache=False)}
            total += st.st_size
        elif stat.S_ISDIR(st.st_mode):
            records[rel] = {"dir": True}
    for rel, meta in sorted(records.items(), key=lambda x: x[0].count("/"), reverse=True):
        if meta.get("dir"):
            fsync_dir(data / rel)
    fsync_dir(data)
    write_json_atomic(gen_dir / "manifest.json", records, mode=0o600)
    write_atomic(gen_dir / "COMPLETE", f"{time.time()}\n", mode=0o600)
    return sum(1 for m in records.values() if not m.get("dir")), total


def _verified_digest(rec: FileRecord | None, st: os.stat_result) -> str | None:
    """The digest a copy recorded, if its target (the file ``st`` describes) was read back and matched it and has
    not changed since (same size, inode, mtime and ctime as right after the read-back)."""
    if rec is None or rec.kind != "file" or not rec.verified or rec.digest is None:
        return None
    if (rec.size, rec.target_ino, rec.target_mtime_ns, rec.target_ctime_ns) != (
            st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns):
        return None
    return rec.digest


def sync(backing: str, offline: bool = False, echo: Callable[[str], None] = lambda s: None) -> Generation:
    """Take a consistent copy now into a new generation and flip ``current`` to it."""
    cfg = load_config(backing)
    fd = _lock(backing, "sync")
    try:
        running = server_running(cfg)
        if offline and running:
            raise TierError("the server is running; an offline sync needs it stopped (drop --offline for an online, "
                            "consistent backup)")
        if not offline and not running:
            raise TierError("the server is not running; start it, or use --offline for a stopped server")
        if offline and not server_stopped_cleanly(cfg):
            raise TierError("the server did not shut down cleanly (stale pid file); its files are not a clean copy: "
                            "start it (crash recovery), then sync")
        gdir = generations_dir(backing)
        gdir.mkdir(exist_ok=True)
        for stale in gdir.glob(".tmp-*"):  # a sync that crashed earlier: never complete, never pointed at
            shutil.rmtree(stale, ignore_errors=True)
        gen_id = time.strftime("%Y%m%dT%H%M%S") + f"-{int(time.time() * 1000) % 1000:03d}"
        tmp = gdir / f".tmp-{gen_id}"
        tmp.mkdir(mode=0o700)
        t0 = time.time()
        copied = None
        if offline:
            echo(f"copying the stopped server's files into generation {gen_id}")
            copied = _copy_offline(cfg, tmp / "data")
            method = OFFLINE_METHOD
        else:
            echo(f"{cfg.method} --backup and --prepare into generation {gen_id}")
            spec = cfg.connection_spec()
            _backup_online(cfg, spec, tmp / "data")
            method = cfg.method
        finished = time.time()
        files, nbytes = _seal(tmp, copied)
        final = gdir / gen_id
        os.rename(tmp, final)
        fsync_dir(gdir)
        gen = Generation(gen_id, str(final), method, t0, finished, round(time.time() - t0, 3), nbytes, files)
        write_json_atomic(Path(backing, POINTER), gen.to_dict(), mode=0o600)  # the flip
        _prune(backing, keep={gen_id, _previous_id(backing, gen_id)})
        return gen
    finally:
        os.close(fd)


def _previous_id(backing: str, newest: str) -> str | None:
    done = sorted(p.name for p in generations_dir(backing).iterdir()
                  if not p.name.startswith(".") and (p / "COMPLETE").exists() and p.name != newest)
    return done[-1] if done else None


def _prune(backing: str, keep: set[str | None]) -> None:
    for p in generations_dir(backing).iterdir():
        if not p.name.startswith(".") and p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)
    fsync_dir(generations_dir(backing))


# ---------------------------------------------------------------------------
# Restore


def restore_needed(cfg: PersistConfig) -> bool:
    """The tier lost the server's files (missing datadir, ibdata or redo) or a restore was interrupted."""
    loc = cfg.locations
    if Path(cfg.backing, "restore-state.json").exists():
        return True
    must = [os.path.join(loc.ibdata_dir, sorted(loc.ibdata_names())[0])]
    must.append(os.path.join(loc.redo_dir, "#innodb_redo" if os.path.isdir(os.path.join(loc.redo_dir, "#innodb_redo"))
                             else "ib_logfile0"))
    return not os.path.isdir(loc.datadir) or not all(os.path.exists(p) for p in must)


def _complete_manifest(gen: Generation) -> dict[str, dict[str, Any]]:
    """The generation's manifest, once its COMPLETE marker says the sync that wrote it finished."""
    g = Path(gen.path)
    if not (g / "COMPLETE").exists():
        raise TierError(f"generation {gen.id} is not complete; it cannot be restored (and `current` should never "
                        "name it): check the backing directory")
    return json.loads((g / "manifest.json").read_text())


def _damaged(gen: Generation, rel: str) -> TierError:
    return TierError(f"generation {gen.id} is damaged ({rel} does not match its manifest); nothing was "
                     "restored: restore the previous generation by hand or take a new copy")


def _check_file(gen: Generation, rel: str, meta: dict[str, Any]) -> None:
    p = Path(gen.path, "data", rel)
    if not p.exists() or p.stat().st_size != meta["size"] or digest_file(str(p), drop_cache=False) != meta["digest"]:
        raise _damaged(gen, rel)


def _check_staged(gen: Generation, manifest: dict[str, dict[str, Any]], staged: list[Manifest]) -> None:
    """What the staging copies read from the generation is exactly its manifest: the same files and directories,
    each file's size and digest (taken from the bytes read, which are the bytes written to the stage) equal to
    the manifest's.  The backup metadata a restore leaves out is read and checked here on its own."""
    read = {rel: rec for m in staged for rel, rec in m.records.items() if rec.kind in ("file", "dir")}
    expected = {}
    for rel, meta in manifest.items():
        if not BACKUP_METADATA.match(rel.split("/")[0]):
            expected[rel] = meta
        elif not meta.get("dir"):
            _check_file(gen, rel, meta)
    for rel in sorted(set(expected) ^ set(read)):   # missing from the generation, or not in its manifest
        raise _damaged(gen, rel)
    for rel, rec in sorted(read.items()):
        meta = expected[rel]
        if bool(meta.get("dir")) != (rec.kind == "dir") or (
                rec.kind == "file" and (rec.size, rec.digest) != (meta["size"], meta["digest"])):
            raise _damaged(gen, rel)


def require_tier_mounted(tier: str, fix: str = "mount the tier first, then restore") -> None:
    """At boot the tier's mount may not have come up: a restore would fill the directory on the root file
    system instead, and the server would run there, unpersisted."""
    if not os.path.ismount(tier):
        raise TierError(f"tier {tier} is not mounted (its directory is on its parent's file system, not a mount "
                        f"point); {fix}")


def restore(backing: str, echo: Callable[[str], None] = lambda s: None, if_needed: bool = False) -> dict[str, Any]:
    """Replace every InnoDB location with the current generation, all together; the server must be stopped."""
    cfg = load_config(backing)
    require_tier_mounted(cfg.tier)
    # --if-needed first: `persist install` starts the restore unit on a live server whose tier is intact
    if if_needed and not restore_needed(cfg):
        return {"restored": False, "reason": "the tier still holds the server's files"}
    if server_running(cfg):
        raise TierError("the server is running; a restore replaces its files: stop it first (a restore is for a "
                        "server whose tier was lost)")
    gen = current(backing)
    if gen is None:
        raise TierError(f"no consistent copy in {backing} yet; nothing to restore (take one with `innotier persist sync`)")
    fd = _lock(backing, "restore")
    try:
        manifest = _complete_manifest(gen)
        loc = cfg.locations
        src = Path(gen.path, "data")
        plan: dict[str, list[str]] = {d: [] for d in loc.dirs()}
        for name in sorted(os.listdir(src)):
            if BACKUP_METADATA.match(name):
                continue
            plan[loc.destination(name)].append(name)
        staged = _stage(gen, manifest, plan, loc, echo)
        # from here the server's directories change: an interrupted swap makes the next --if-needed restore
        state = {"generation": gen.id, "dirs": sorted(plan), "phase": "swapping"}
        write_json_atomic(Path(backing, "restore-state.json"), state, mode=0o600)
        kept = []
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for d, stage in staged.items():
            dp = Path(d)
            if os.path.ismount(dp):
                raise TierError(f"{d} is a mount point; keep the server's directories below the mount "
                                f"(e.g. {d}/mysql) so a restore can swap them")
            if dp.exists():
                if any(dp.iterdir()):
                    old = dp.parent / f".{dp.name}.innotier-pre-restore-{stamp}"
                    os.rename(dp, old)
                    kept.append(str(old))
                else:
                    dp.rmdir()
            os.rename(stage, dp)
            fsync_dir(dp.parent)
        Path(backing, "restore-state.json").unlink()
        fsync_dir(backing)
        return {"restored": True, "generation": gen.id, "finished_at": gen.finished_at, "dirs": sorted(staged),
                "kept_previous_contents": kept}
    finally:
        os.close(fd)


def _stage(gen: Generation, manifest: dict[str, dict[str, Any]], plan: dict[str, list[str]], loc: Locations,
           echo: Callable[[str], None]) -> dict[str, Path]:
    """Copy the generation into a staging directory beside each destination, in one read of the generation: the
    copies hash what they read, and that is checked against the manifest before anything else is touched.  On
    any failure the staging directories are removed; nothing outside them was written."""
    src = Path(gen.path, "data")
    staged: dict[str, Path] = {}
    try:
        read = []
        for d, names in plan.items():
            stage = Path(os.path.dirname(d.rstrip("/")), f".{os.path.basename(d.rstrip('/'))}.innotier-restore")
            if stage.exists():
                shutil.rmtree(stage)
            Path(stage.parent).mkdir(parents=True, exist_ok=True)
            stage.mkdir(mode=0o750)
            staged[d] = stage
            echo(f"staging {len(names)} entries of generation {gen.id} for {d}")
            read.append(copy_tree(src, stage, walk(src, names), verify=True)[0])
            _chown_tree(stage, loc.uid, loc.gid)
        _check_staged(gen, manifest, read)
    except BaseException:
        for stage in staged.values():
            shutil.rmtree(stage, ignore_errors=True)
        raise
    return staged


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)


# ---------------------------------------------------------------------------
# Status


def status(backing: str, now: float | None = None) -> dict[str, Any]:
    cfg = load_config(backing)
    now = now or time.time()
    gen = current(backing)
    out: dict[str, Any] = {"tier": cfg.tier, "backing": cfg.backing, "interval_s": cfg.interval_s,
                           "method": cfg.method, "restore_interrupted": Path(backing, "restore-state.json").exists()}
    if gen is None:
        out.update({"last_copy": None, "statement": f"no consistent copy yet: everything on {cfg.tier} is lost "
                    "on a power loss until the first sync completes (`innotier persist sync`)"})
        return out
    age = max(0.0, now - gen.finished_at)
    rpo = cfg.interval_s + gen.duration_s
    out.update({"last_copy": gen.to_dict(), "age_s": round(age, 1), "data_loss_window_s": round(age, 1),
                "rpo_s": round(rpo, 1),
                "statement": (f"last consistent copy: generation {gen.id}, finished "
                              f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(gen.finished_at))} "
                              f"({format_duration(age, compact=True)} ago) by {gen.method} in {gen.duration_s:.1f} s. "
                              f"A power loss now loses the transactions committed in the last {format_duration(age, compact=True)}. "
                              f"Recovery point objective: up to {format_duration(rpo, compact=True)} of commits can be lost "
                              f"(sync every {format_duration(cfg.interval_s, compact=True)} + {gen.duration_s:.0f} s per sync).")})
    return out


# ---------------------------------------------------------------------------
# systemd units


def unit_slug(tier: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", tier).strip("-") or "root"


def innotier_exe() -> str:
    cand = Path(sys.executable).parent / "innotier"
    return str(cand) if cand.exists() else (shutil.which("innotier") or str(cand))


def render_units(cfg: PersistConfig, exe: str | None = None) -> dict[str, str]:
    """The three units: restore-before-start (+ final sync after stop), the sync service and its timer."""
    exe = exe or innotier_exe()
    slug = unit_slug(cfg.tier)
    server = cfg.server_unit or "mariadb.service"
    b = cfg.backing
    head = "# Generated by innotier persist install; do not edit (re-run install instead).\n"
    guard = f"{slug}"
    units = {
        f"innotier-persist-{guard}.service": head + f"""[Unit]
Description=innotier: restore {cfg.tier} from {b} before {server} starts; final sync after it stops
Documentation=man:innotier(1)
Before={server}
RequiresMountsFor={cfg.tier} {b}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={exe} persist restore --backing {b} --if-needed --yes
ExecStop={exe} persist sync --backing {b} --offline --if-clean
TimeoutStartSec=1h
TimeoutStopSec=1h

[Install]
RequiredBy={server}
""",
        f"innotier-persist-sync-{guard}.service": head + f"""[Unit]
Description=innotier: consistent copy of {cfg.tier} into {b} ({cfg.method}; never a plain rsync of live files)
After={server}
Requisite={server}

[Service]
Type=oneshot
ExecStart={exe} persist sync --backing {b}
Nice=10
IOSchedulingClass=best-effort
IOSchedulingPriority=7
""",
        f"innotier-persist-sync-{guard}.timer": head + f"""[Unit]
Description=innotier: consistent copy of {cfg.tier} every {format_duration(cfg.interval_s, compact=True)}
# counts from the server's start, not from early boot: a sync started while the restore unit still fills the
# tier is refused (Requisite=), and OnUnitActiveSec= would then have no start of its unit to count from
After={server}

[Timer]
OnActiveSec={cfg.interval_s}s
OnUnitActiveSec={cfg.interval_s}s
AccuracySec=1s
Unit=innotier-persist-sync-{guard}.service

[Install]
WantedBy=timers.target
""",
    }
    return units


def verify_units(units: dict[str, str]) -> None:
    """``systemd-analyze verify`` on the rendered files (works without systemd running)."""
    import tempfile

    exe = shutil.which("systemd-analyze")
    if not exe:
        raise ToolMissing("systemd-analyze not found; install systemd (it verifies the units before they are written)")
    with tempfile.TemporaryDirectory(prefix="innotier-units-") as tmp:
        paths = []
        for name, text in units.items():
            p = Path(tmp, name)
            p.write_text(text)
            paths.append(str(p))
        r = subprocess.run([exe, "verify", "--man=no", *paths], capture_output=True, text=True, timeout=120)
        lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        ours = [ln for ln in lines if any(ln.startswith(n) or f"/{n}" in ln for n in units)]
        if r.returncode != 0 or ours:
            raise TierError(f"systemd-analyze verify rejected the units: {' | '.join((ours or lines)[:3]) or r.returncode}"
                            "; nothing was installed")


def install_units(units: dict[str, str], unit_dir: str) -> list[str]:
    d = Path(unit_dir)
    d.mkdir(parents=True, exist_ok=True)
    return [str(write_atomic(d / name, text, mode=0o644)) for name, text in sorted(units.items())]


def enable_commands(units: dict[str, str]) -> list[str]:
    restore_unit = next(n for n in units if n.startswith("innotier-persist-") and "-sync-" not in n)
    timer = next(n for n in units if n.endswith(".timer"))
    return ["systemctl daemon-reload", f"systemctl enable {restore_unit}", f"systemctl enable --now {timer}",
            f"systemctl start {restore_unit}"]
