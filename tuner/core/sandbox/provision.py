"""New sandboxes: ``create`` (validate everything, then initialize a datadir with its page size) and
``adopt`` (a sandbox around an already-initialized datadir, such as a verified clone of a golden copy)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tuner.core.durable import write_atomic
from tuner.core.errors import SandboxError, UsageError
from tuner.core.paths import sandboxes_dir
from tuner.core.sandbox import bootstrap, process
from tuner.core.sandbox.binaries import ServerBinaries, binaries_for_server, find_binaries
from tuner.core.sandbox.lifecycle import Sandbox, list_sandboxes
from tuner.core.sandbox.record import validate_name
from tuner.core.server import Version
from tuner.core.units import parse_page_size

SOCKET_PATH_MAX = 107


def free_port() -> int:
    """A port nothing listens on now and no other sandbox has claimed."""
    claimed = {sb.port for sb in list_sandboxes()}
    for _ in range(200):
        port = process.unused_port()
        if port not in claimed and port > 1024:
            return port
    raise SandboxError("no free TCP port found on 127.0.0.1; pass --port N")


def _socket_path(sandbox_dir: Path, name: str) -> str:
    p = str(sandbox_dir / "mysqld.sock")
    if len(p) <= SOCKET_PATH_MAX:
        return p
    # unix socket paths are limited to 108 bytes: fall back to a short, private path
    short = Path("/tmp") / f"innotier-{abs(hash(str(sandbox_dir))) % 10**10}-{name[:20]}.sock"
    return str(short)


def _new_sandbox_dir(name: str) -> Path:
    validate_name(name)
    sb_dir = sandboxes_dir() / name
    if (sb_dir / "sandbox.json").exists():
        raise SandboxError(f"sandbox {name} already exists; destroy it first or pick another name")
    return sb_dir


def _check_port(port: int) -> None:
    if not (1 <= port <= 65535):
        raise UsageError(f"port {port} is out of range; give 1-65535")
    if process.port_in_use(port) or any(sb.port == port for sb in list_sandboxes()):
        raise SandboxError(f"port {port} is in use; pick another --port or leave it out to get a free one")


def _check_datadir(data: Path) -> None:
    for other in list_sandboxes():
        if Path(other.datadir).resolve() == data:
            raise SandboxError(f"datadir {data} belongs to sandbox {other.name}; give another --datadir")
    if data.exists() and any(data.iterdir()):
        raise SandboxError(f"datadir {data} is not empty; give an empty or new directory")


def _record(name: str, sb_dir: Path, datadir: Path | str, port: int, bins: ServerBinaries, page: int,
            options: dict[str, str] | None, basedir: str | None, needs_bootstrap: bool) -> Sandbox:
    return Sandbox(name=name, dir=str(sb_dir), datadir=str(datadir), port=port, socket=_socket_path(sb_dir, name),
                   mysqld=bins.mysqld, install_db=bins.install_db, flavor=bins.flavor, version=str(bins.version),
                   version_string=bins.version_string, page_size=page, options=dict(options or {}),
                   basedir=basedir, created_at=time.time(), needs_bootstrap=needs_bootstrap, server=bins.server)


def create(name: str, page_size: str | int = "16k", datadir: str | None = None, port: int | None = None,
           options: dict[str, str] | None = None, basedir: str | None = None,
           binaries: ServerBinaries | None = None, server: str | None = None) -> Sandbox:
    """Validate everything first, then initialize a new datadir with the page size fixed at init."""
    sb_dir = _new_sandbox_dir(name)
    page = parse_page_size(page_size)
    if port is not None:
        _check_port(port)
    data = Path(datadir).resolve() if datadir else sb_dir / "data"
    _check_datadir(data)
    if server and basedir:
        raise UsageError("give either --server or --basedir, not both")
    bins = binaries or (binaries_for_server(server) if server else find_binaries(basedir))
    port = port or free_port()
    sb_dir.mkdir(parents=True, exist_ok=True)
    try:
        sb = _record(name, sb_dir, data, port, bins, page, options, basedir, needs_bootstrap=True)
        sb.write_cnf()
        sb.tmpdir.mkdir(exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        bootstrap.initialize(sb, bins)
        sb.save()
    except BaseException:
        shutil.rmtree(sb_dir, ignore_errors=True)
        if datadir and data.exists() and not any(data.iterdir()):
            data.rmdir()
        elif datadir and data.exists():
            shutil.rmtree(data, ignore_errors=True)
        raise
    return sb


def binaries_of(sb: Sandbox) -> ServerBinaries:
    """The server binaries a sandbox was created with."""
    return ServerBinaries(mysqld=sb.mysqld, install_db=sb.install_db, flavor=sb.flavor,
                          version=Version.parse(sb.version), version_string=sb.version_string, basedir=sb.basedir,
                          server=sb.server)


def adopt(name: str, datadir: str | os.PathLike, credentials_from: str | os.PathLike, page_size: str | int,
          binaries: ServerBinaries, options: dict[str, str] | None = None, port: int | None = None) -> Sandbox:
    """A sandbox around an already-initialized datadir (a verified clone of a golden copy): no initialization.

    The datadir's mysql.user already holds the root password of the sandbox it was cloned from, so the
    0600 client.cnf is copied from ``credentials_from`` with this sandbox's socket.
    """
    sb_dir = _new_sandbox_dir(name)
    sb_dir.mkdir(parents=True, exist_ok=True)
    sb = _record(name, sb_dir, datadir, port or free_port(), binaries, parse_page_size(page_size), options,
                 binaries.basedir, needs_bootstrap=False)
    sb.write_cnf()
    sb.tmpdir.mkdir(exist_ok=True)
    creds = [ln for ln in Path(credentials_from).read_text().splitlines() if not ln.startswith("socket")]
    write_atomic(sb.client_cnf, "\n".join(creds + [f"socket={sb.socket}"]) + "\n", mode=0o600)
    sb.save()
    return sb
