"""Installed server distributions: the manifest, integrity checks, and how to run a tree's server.

Layout under ``innotier_cache()/servers`` (per machine, shared by every INNOTIER_HOME)::

    <name>/manifest.json   what was installed: suite, package versions, sha256 of the server binary, ...
    <name>/tree/           the minimal Debian tree (absent for a host distribution)

A tree's server runs from the host without chroot and without root: through the tree's own dynamic
loader with the tree's libraries (``TREE/lib64/ld-linux-x86-64.so.2 --library-path ... TREE/usr/sbin/mysqld``),
with basedir, messages, charsets and plugins pointed into the tree.  A tree whose binary no longer matches
the sha256 in its manifest is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.durable import write_json_atomic
from tuner.core.errors import SandboxError, ServerError, UsageError
from tuner.core.paths import innotier_cache
from tuner.core.server import Flavor, Version
from tuner.core.servers.distributions import Distribution, get, known_names

LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
LOADER = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
MANIFEST = "manifest.json"
# the binary's stat (device, inode, size, mtime, ctime) when its sha256 last matched the manifest: starts skip
# hashing a 70 MB mysqld (about 1 s on a busy 2-core machine) while the file is untouched
VERIFIED = ".verified"


def servers_dir() -> Path:
    return innotier_cache() / "servers"


def tree_launcher(root: Path) -> list[str]:
    """Run a binary of the tree at ``root`` with the tree's own loader and libraries (no chroot, no root)."""
    return [str(root / LOADER), "--library-path", ":".join(str(root / d) for d in LIB_DIRS)]


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Manifest:
    name: str
    flavor: str
    series: str
    kind: str
    suite: str | None
    mirror: str | None
    packages: dict[str, str]  # package -> installed version
    binary: str  # relative to root
    binary_sha256: str
    version_string: str  # what `mysqld --version` printed
    version: str  # x.y.z
    build_date: str  # ISO 8601 UTC
    innotier_version: str
    build_seconds: float | None = None
    tree_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Manifest":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class InstalledServer:
    """One installed distribution: its manifest and where its root is."""

    dist: Distribution
    path: Path  # servers/<name>
    manifest: Manifest

    @property
    def root(self) -> Path:
        return Path("/") if self.dist.kind == "host" else self.path / "tree"

    @property
    def binary(self) -> str:
        return str(self.root / self.manifest.binary)

    @property
    def flavor(self) -> Flavor:
        return Flavor(self.manifest.flavor)

    @property
    def version(self) -> Version:
        return Version.parse(self.manifest.version)

    def launcher(self) -> list[str]:
        """The command prefix that runs a binary of this tree from the host (empty for the host's server)."""
        return [] if self.dist.kind == "host" else tree_launcher(self.root)

    def server_options(self) -> dict[str, str]:
        """[mysqld] options that point the server at the tree's own files (nothing for the host's server)."""
        if self.dist.kind == "host":
            return {}
        share = self.root / self.dist.share_dir
        opts = {
            "basedir": str(self.root / "usr"),
            "lc_messages_dir": str(share),
            "character_sets_dir": str(share / "charsets"),
        }
        plugin = self.root / self.dist.plugin_dir
        if plugin.is_dir():
            opts["plugin_dir"] = str(plugin)
        return opts

    def verify(self) -> None:
        """Refuse a tree whose server binary is missing or differs from the manifest's sha256."""
        if not os.path.isfile(self.binary):
            raise SandboxError(f"server {self.dist.name}: binary {self.binary} is missing; "
                               f"reinstall it with `innotier server remove {self.dist.name}` and "
                               f"`innotier server install {self.dist.name}`")
        if self._verified_stamp() == self._stamp_text():
            return  # hashed before and not changed since (a replaced or rewritten file gets a new ctime)
        actual = sha256_file(self.binary)
        if actual != self.manifest.binary_sha256:
            raise SandboxError(f"server {self.dist.name}: binary {self.binary} does not match its manifest "
                               f"(sha256 {actual[:12]}... vs {self.manifest.binary_sha256[:12]}...); it was replaced "
                               f"or damaged: reinstall with `innotier server remove {self.dist.name}` and "
                               f"`innotier server install {self.dist.name}`")
        if self.dist.kind == "tree" and not os.path.isfile(self.root / LOADER):
            raise SandboxError(f"server {self.dist.name}: the tree's loader {self.root / LOADER} is missing; "
                               f"reinstall the server")
        try:
            (self.path / VERIFIED).write_text(self._stamp_text())
        except OSError:
            pass  # a read-only cache (another user's): hash again next time

    def _stamp_text(self) -> str:
        st = os.stat(self.binary)
        return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{self.manifest.binary_sha256}\n"

    def _verified_stamp(self) -> str | None:
        try:
            return (self.path / VERIFIED).read_text()
        except OSError:
            return None

    def run(self, args: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """Run a binary of this tree (path relative to the root, or absolute) through the tree's loader."""
        prog = args[0] if os.path.isabs(args[0]) else str(self.root / args[0])
        return subprocess.run(self.launcher() + [prog] + list(args[1:]), capture_output=True, text=True,
                              timeout=timeout, **kw)

    def summary(self) -> dict[str, Any]:
        m = self.manifest
        return {"name": self.dist.name, "kind": m.kind, "version": m.version, "suite": m.suite or "host",
                "package": f"{self.dist.main_package} {m.packages.get(self.dist.main_package, '?')}",
                "built": m.build_date, "root": str(self.root), "size_mb": round((m.tree_bytes or 0) / 2**20)}


def read_manifest(path: Path) -> Manifest:
    try:
        return Manifest.from_dict(json.loads((path / MANIFEST).read_text()))
    except FileNotFoundError:
        raise ServerError(f"{path} has no {MANIFEST}; remove it with `innotier server remove {path.name}` "
                          "and install it again") from None
    except (ValueError, TypeError) as exc:
        raise ServerError(f"{path / MANIFEST} cannot be read ({exc}); remove and reinstall the server") from None


def write_manifest(path: Path, manifest: Manifest) -> None:
    write_json_atomic(path / MANIFEST, manifest.to_dict(), mode=0o644)


def installed(name: str, verify: bool = True) -> InstalledServer:
    """The installed distribution ``name`` (verified against its manifest); a clear error if it is not installed."""
    dist = get(name)
    path = servers_dir() / dist.name
    if not (path / MANIFEST).is_file():
        have = ", ".join(s.dist.name for s in list_installed()) or "none"
        raise UsageError(f"server {dist.name} is not installed (installed: {have}); "
                         f"run `innotier server install {dist.name}`")
    srv = InstalledServer(dist=dist, path=path, manifest=read_manifest(path))
    if verify:
        srv.verify()
    return srv


def list_installed() -> list[InstalledServer]:
    root = servers_dir()
    out = []
    for name in known_names():
        path = root / name
        if (path / MANIFEST).is_file():
            try:
                out.append(InstalledServer(dist=get(name), path=path, manifest=read_manifest(path)))
            except ServerError:
                continue
    return out


def remove(name: str) -> Path:
    dist = get(name)
    path = servers_dir() / dist.name
    if not path.exists():
        raise UsageError(f"server {dist.name} is not installed; nothing to remove")
    shutil.rmtree(path)
    return path


def tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total
