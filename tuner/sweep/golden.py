"""Golden copies: a loaded, checked, cleanly stopped TPC-C datadir kept once and cloned into every cell.

Loading TPC-C data for every cell would dominate a sweep.  A golden copy is made once per
``GoldenKey`` -- flavor, server version, page size, warehouses, the options fixed when a datadir is
initialized (INIT_OPTIONS) and a digest of the loader's code -- and lives in
``$INNOTIER_HOME/golden/<id>/``::

    golden.json     the key, sizes, timings; written last: its presence marks the copy complete
    manifest.json   every file of data/ with size and xxh3-128 digest (datadir_mover.move.copy)
    client.cnf      0600 [client] credentials of the root account inside the copy
    data/           the datadir

Building one: a private sandbox is initialized with the page size and init options, the loader fills
it, the TPC-C consistency checks must pass, then the server is stopped with a *slow* shutdown
(innodb_fast_shutdown=0: purge and change-buffer merge done, so every clone starts with no pending
background work -- MariaDB KB / MySQL manual, innodb_fast_shutdown).  The stopped datadir is copied with
the mover's verified, durable ``copy_tree`` into ``<id>.partial/`` and renamed into place.

Cloning one into a cell: ``cp -a --reflink=auto`` (a reflink where the file system shares extents --
xfs, btrfs -- else an in-kernel copy), then every file is read back and compared with the manifest
(``verify_tree``), and the clone is adopted as a sandbox without re-initializing anything.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tuner.core.durable import fsync_dir, write_atomic, write_json_atomic
from tuner.core.errors import InnotierError, SweepError
from tuner.core.paths import innotier_home
from tuner.core.sandbox import Sandbox, SandboxState, ServerBinaries
from tuner.tpcc.loader import LOADER_VERSION, load
from datadir_mover.move.copy import Manifest, copy_tree, verify_tree, walk
from tuner.core import sandbox as sbx
from tuner.sweep.spec import TABLE_DATABASE

# Options fixed when the datadir is initialized (beyond innodb_page_size, which is its own axis):
# a golden copy is made per distinct value.  innodb_data_file_path (files can only be appended),
# innodb_checksum_algorithm (page format), lower_case_table_names (MySQL 8.0: initialize only),
# innodb_undo_tablespaces (fixed at initialize in older servers), default character set (the schema's).
# Sources: MySQL 8.0 Reference Manual, "InnoDB Startup Options and System Variables" (innodb_data_file_path:
# only appended to; innodb_undo_tablespaces) and "lower_case_table_names" (set only at --initialize);
# MariaDB KB "InnoDB System Variables" (innodb_checksum_algorithm, innodb_undo_tablespaces).
INIT_OPTIONS = ("innodb_undo_tablespaces", "innodb_data_file_path", "innodb_checksum_algorithm",
                "lower_case_table_names", "character_set_server", "collation_server")

TPCC_DATABASE = TABLE_DATABASE  # a placement names its tables in it (spec.is_table_key)
# options used only while loading the golden copy (a slow shutdown follows, so the datadir is
# consistent whatever they are): a larger buffer pool and no per-commit flush make the load faster
LOAD_OPTIONS = {"innodb_flush_log_at_trx_commit": "0", "innodb_doublewrite": "0"}
DEFAULT_LOAD_BUFFER_POOL = "512M"
SKIP_NAMES = {"ibtmp1"}  # recreated at every start (the temporary tablespace)

Progress = Callable[[str], None]


def golden_root() -> Path:
    return innotier_home() / "golden"


def _loader_digest() -> str:
    """What decides the content of a loaded datadir on the loader's side: its declared version.

    ``tuner.tpcc.loader.LOADER_VERSION`` is the loader's promise that data loaded by two versions with
    the same number is interchangeable; a new number makes every golden copy stale (a new key).
    """
    return f"loader-{LOADER_VERSION}"


@dataclass(frozen=True, order=True)
class GoldenKey:
    flavor: str
    version: str
    page_size: str
    warehouses: int
    init_options: tuple[tuple[str, str], ...] = ()
    loader: str = ""

    @property
    def id(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return f"{self.flavor}-{self.version}-{self.page_size}-w{self.warehouses}-{hashlib.sha256(blob).hexdigest()[:8]}"

    @property
    def dir(self) -> Path:
        return golden_root() / self.id

    def to_dict(self) -> dict[str, Any]:
        return {"flavor": self.flavor, "version": self.version, "page_size": self.page_size,
                "warehouses": self.warehouses, "init_options": dict(self.init_options), "loader": self.loader}


def key_for(spec, cell, bins: ServerBinaries) -> GoldenKey:
    opts = cell.settings.get("options") or {}
    return key_of(bins, cell.settings["page_size"], spec.workload.warehouses, opts)


def key_of(bins: ServerBinaries, page_size: str, warehouses: int, options: dict[str, Any] | None = None) -> GoldenKey:
    """The golden copy a datadir of these binaries, page size, warehouses and (init) options is cloned from."""
    init = tuple(sorted((k, str(v)) for k, v in (options or {}).items() if k in INIT_OPTIONS))
    return GoldenKey(flavor=bins.flavor.value, version=str(bins.version), page_size=page_size,
                     warehouses=warehouses, init_options=init, loader=_loader_digest())


def is_present(key: GoldenKey) -> bool:
    return (key.dir / "golden.json").is_file() and (key.dir / "manifest.json").is_file()


def info(key: GoldenKey) -> dict[str, Any]:
    return json.loads((key.dir / "golden.json").read_text())


# ---------------------------------------------------------------------------
# Building


class _Lock:
    """An exclusive POSIX record lock (lockf) on ``<golden>/<id>.lock`` so two sweeps never build the same
    copy at once; unlike flock it is not held on by forked children after the builder dies."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def __enter__(self) -> "_Lock":
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def ensure(key: GoldenKey, bins: ServerBinaries, load_buffer_pool: str | None = None,
           progress: Progress | None = None, load_options: dict[str, str] | None = None) -> dict[str, Any]:
    """The golden copy for ``key``, built now if it is missing; returns its golden.json.

    ``load_options``: more options for the loading server only, never the key's init options.  The lab's image
    loads with a 16 MiB redo log, which the copy keeps (a clone's server resizes it to its own setting at its
    first start: the redo log of a slow shutdown holds nothing to recover)."""
    clash = sorted(set(load_options or {}) & set(INIT_OPTIONS))
    if clash:
        raise SweepError(f"{', '.join(clash)} fixed at initialization: part of the golden copy's key, "
                         "not a load option; put it in the key's options")
    with _Lock(golden_root() / f"{key.id}.lock"):
        if is_present(key):
            return info(key)
        return build(key, bins, load_buffer_pool or DEFAULT_LOAD_BUFFER_POOL, progress, load_options)


def _sandbox_name(key: GoldenKey) -> str:
    return f"golden-{hashlib.sha256(key.id.encode()).hexdigest()[:12]}"


def build(key: GoldenKey, bins: ServerBinaries, load_buffer_pool: str, progress: Progress | None,
          load_options: dict[str, str] | None = None) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    timings: dict[str, float] = {}
    name = _sandbox_name(key)
    _discard_sandbox(name)  # a build killed half way left it behind
    t0 = time.monotonic()
    options = {**dict(key.init_options), **LOAD_OPTIONS, "innodb_buffer_pool_size": load_buffer_pool,
               **(load_options or {})}
    say(f"golden copy {key.id}: initializing a {key.page_size} datadir")
    sb = sbx.create(name, page_size=key.page_size, options=options, binaries=bins)
    try:
        sb.start()
        timings["init"] = time.monotonic() - t0
        t1 = time.monotonic()
        say(f"golden copy {key.id}: loading {key.warehouses} warehouse(s)")
        spec = sb.connection_spec()
        loaded = load(spec, key.warehouses, database=TPCC_DATABASE, drop=True, progress=False)
        timings["load"] = time.monotonic() - t1
        # the loader verifies row counts and runs the initial-state consistency checks itself
        # (tuner.tpcc.check.run_checks(initial=True)); a golden copy is only made from a verified load
        report = getattr(loaded, "checks", None)
        if not getattr(loaded, "verified", False) or report is None or not report.ok:
            raise SweepError(f"the freshly loaded golden copy {key.id} fails the TPC-C consistency checks; "
                             "this is a loader bug: report it with `innotier tpcc check --json` output")
        t3 = time.monotonic()
        say(f"golden copy {key.id}: slow shutdown")
        sb.stop("slow")
        timings["stop"] = time.monotonic() - t3
        t4 = time.monotonic()
        say(f"golden copy {key.id}: verified copy")
        partial = golden_root() / f"{key.id}.partial"
        if partial.exists():
            shutil.rmtree(partial)
        (partial / "data").mkdir(parents=True)
        src = Path(sb.datadir)
        entries = walk(src, exclude=lambda rel, st: rel in SKIP_NAMES)
        manifest, stats = copy_tree(src, partial / "data", entries, verify=True)
        timings["copy"] = time.monotonic() - t4
        manifest = Manifest(source=".", target=".", records=manifest.records)
        write_json_atomic(partial / "manifest.json", manifest.to_dict(), mode=0o600)
        write_atomic(partial / "client.cnf", sb.client_cnf.read_text(), mode=0o600)
        meta = {"id": key.id, "key": key.to_dict(), "created_at": time.time(), "bytes": manifest.bytes,
                "files": sum(1 for r in manifest.records.values() if r.kind == "file"),
                "timings": {k: round(v, 3) for k, v in timings.items()}, "server": bins.version_string,
                "load": {"row_counts": loaded.row_counts, "jobs": loaded.jobs, "checks_ok": report.ok},
                "load_options": options}
        write_json_atomic(partial / "golden.json", meta, mode=0o644)
        if key.dir.exists():
            shutil.rmtree(key.dir)  # an incomplete copy without golden.json
        os.rename(partial, key.dir)
        fsync_dir(golden_root())
    finally:
        _discard_sandbox(name)
    return info(key)


def _discard_sandbox(name: str) -> None:
    """Remove a scratch sandbox (loading or cell): it holds nothing a verified copy does not."""
    if not (sbx.sandboxes_dir() / name / "sandbox.json").is_file():
        leftover = sbx.sandboxes_dir() / name
        if leftover.exists():
            shutil.rmtree(leftover)
        return
    sb = Sandbox.load(name)
    if sb.state() == SandboxState.RUNNING:
        sb.stop("kill")
    sb.pid_file.unlink(missing_ok=True)
    sb.destroy(force=True)


# ---------------------------------------------------------------------------
# Cloning


def load_manifest(key: GoldenKey):
    return Manifest.from_dict(json.loads((key.dir / "manifest.json").read_text()))


def clone(key: GoldenKey, target: Path) -> dict[str, Any]:
    """Copy the golden datadir to ``target`` (must not exist) and verify every file against the manifest."""
    if not is_present(key):
        raise SweepError(f"golden copy {key.id} is missing; `innotier sweep run` builds it")
    if target.exists() and any(target.iterdir()):
        raise SweepError(f"clone target {target} is not empty; remove the cell's leftovers first")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rmdir()
    t0 = time.monotonic()
    src = key.dir / "data"
    proc = subprocess.run(["cp", "-a", "--reflink=auto", str(src), str(target)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SweepError(f"cloning golden copy {key.id} to {target} failed: {proc.stderr.strip()}; "
                         "check free space on the tier")
    copied = time.monotonic() - t0
    t1 = time.monotonic()
    golden = load_manifest(key)
    check = Manifest(source=str(src), target=str(target), records={})
    for rel, rec in golden.records.items():
        rec.verified = rec.kind != "file"
        check.records[rel] = rec
    present = set()
    for dirpath, dirnames, filenames in os.walk(target):
        for n in filenames:
            present.add(os.path.relpath(os.path.join(dirpath, n), target))
    expected = {r for r, rec in golden.records.items() if rec.kind == "file"}
    if present != expected:
        extra = sorted(present - expected)[:3]
        missing = sorted(expected - present)[:3]
        raise SweepError(f"clone of golden copy {key.id} at {target} has different files (missing {missing}, "
                         f"extra {extra}); delete {key.dir} so it is rebuilt")
    try:
        verify_tree(check)
    except InnotierError as exc:
        raise SweepError(f"clone of golden copy {key.id} does not match its manifest ({exc}); "
                         f"delete {key.dir} so it is rebuilt, and check the target storage") from None
    return {"golden": key.id, "bytes": golden.bytes, "copy_seconds": round(copied, 3),
            "verify_seconds": round(time.monotonic() - t1, 3), "method": "cp --reflink=auto + xxh3 verify"}


def adopt_sandbox(name: str, key: GoldenKey, datadir: Path, bins: ServerBinaries, port: int | None = None) -> Sandbox:
    """Make a sandbox around a cloned datadir: no initialization, the golden copy's credentials."""
    if (sbx.sandboxes_dir() / name / "sandbox.json").exists():
        raise SweepError(f"sandbox {name} already exists; the runner removes a cell's leftovers before cloning")
    return sbx.adopt(name, datadir, key.dir / "client.cnf", key.page_size, bins, port=port)


def discard_cell_sandbox(name: str) -> None:
    _discard_sandbox(name)
