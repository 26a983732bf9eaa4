"""Which server binaries a sandbox runs: the host's, a --basedir installation, or an installed tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from tuner.core.errors import ToolMissing
from tuner.core.server import Flavor, Version, flavor_from_version
from tuner.core.servers import tree as server_trees


@dataclass(frozen=True)
class ServerBinaries:
    mysqld: str
    install_db: str | None  # mariadb-install-db, or None for MySQL (mysqld --initialize-insecure)
    flavor: Flavor
    version: Version
    version_string: str
    basedir: str | None = None
    server: str | None = None  # an installed server distribution (`innotier server install`), e.g. mysql-9.7

    @property
    def series(self) -> str:
        return f"{self.flavor.value}-{self.version.series}"


def binaries_for_server(name: str) -> ServerBinaries:
    """The binaries of an installed server distribution, verified against its manifest."""
    srv = server_trees.installed(name)
    install_db = None
    if srv.flavor == Flavor.MARIADB and srv.dist.kind == "host":
        install_db = _which(("mariadb-install-db", "mysql_install_db"), ["/usr/bin"])
    return ServerBinaries(mysqld=srv.binary, install_db=install_db, flavor=srv.flavor, version=srv.version,
                          version_string=srv.manifest.version_string, server=srv.dist.name)


def _which_only(names: tuple[str, ...], dirs: list[str]) -> str | None:
    for d in dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


def _which(names: tuple[str, ...], dirs: list[str]) -> str | None:
    """The first executable in ``dirs``, else on PATH."""
    found = _which_only(names, dirs)
    if found:
        return found
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def find_binaries(basedir: str | None = None) -> ServerBinaries:
    """Find the server binary (mariadbd or mysqld) on --basedir, PATH or the usual sbin directories."""
    if basedir:
        if not os.path.isdir(basedir):
            raise ToolMissing(f"--basedir {basedir} is not a directory; point it at a server installation (with bin/ or sbin/)")
        dirs = [os.path.join(basedir, "bin"), os.path.join(basedir, "sbin"), basedir]
        mysqld = _which_only(("mariadbd", "mysqld"), dirs)
    else:
        mysqld = _which(("mariadbd", "mysqld"), ["/usr/sbin", "/usr/local/mysql/bin", "/usr/local/sbin"])
    if not mysqld:
        where = f"under {basedir}" if basedir else "on PATH or in /usr/sbin"
        raise ToolMissing(f"no server binary (mariadbd or mysqld) found {where}; "
                          "install one (apt-get install mariadb-server) or pass --basedir")
    out = subprocess.run([mysqld, "--version"], capture_output=True, text=True, timeout=30)
    text = (out.stdout or out.stderr).strip()
    flavor = flavor_from_version(text)
    version = Version.parse(text.split("Ver", 1)[-1])
    install_db = None
    if flavor == Flavor.MARIADB:
        bin_dirs = ([os.path.join(basedir, "scripts"), os.path.join(basedir, "bin")] if basedir
                    else ["/usr/bin", "/usr/local/mysql/bin"])
        install_db = _which(("mariadb-install-db", "mysql_install_db"), bin_dirs)
        if not install_db:
            raise ToolMissing("mariadb-install-db not found; install mariadb-server (it ships the script) or pass --basedir")
    return ServerBinaries(mysqld=mysqld, install_db=install_db, flavor=flavor, version=version,
                          version_string=text, basedir=basedir)
