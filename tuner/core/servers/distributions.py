"""The server distributions innotier knows how to obtain: what each one is and where it comes from.

A distribution is data: a name users type (``mysql-9.7``), the flavor and series it must report, and
either a Debian suite plus the packages that make a minimal server tree (built with debootstrap), or the
host's own installed package (``mariadb-10.11`` on Debian 12).  Building and running them lives in
``tuner.core.servers.build`` and ``tuner.core.servers.tree``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.core.errors import UsageError
from tuner.core.server import Flavor

DEBIAN_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class Distribution:
    name: str  # what users type: mysql-9.7
    flavor: Flavor
    series: str  # the server must report this major.minor
    kind: str  # "tree": a debootstrapped Debian tree; "host": the host's own package
    suite: str | None  # Debian suite of a tree (sid, trixie)
    packages: tuple[str, ...]  # packages installed into the tree (or the host package that provides it)
    binary: str  # the server binary, relative to the tree root ("/" for the host)
    share_dir: str  # error messages and charsets, relative to the root
    plugin_dir: str  # server plugins, relative to the root
    note: str = ""

    @property
    def main_package(self) -> str:
        return self.packages[0]

    def describe(self) -> str:
        where = (f"Debian {self.suite} packages {', '.join(self.packages)}" if self.kind == "tree"
                 else f"the host's package {self.main_package}")
        return f"{self.flavor.value} {self.series} from {where}"


DISTRIBUTIONS: dict[str, Distribution] = {d.name: d for d in (
    Distribution(
        name="mysql-9.7", flavor=Flavor.MYSQL, series="9.7", kind="tree", suite="sid",
        packages=("mysql-server-core", "mysql-client-core"), binary="usr/sbin/mysqld",
        share_dir="usr/share/mysql", plugin_dir="usr/lib/mysql/plugin",
        note="Debian sid follows MySQL's innovation releases; a newer series there means this one is gone"),
    Distribution(
        name="mariadb-11.8", flavor=Flavor.MARIADB, series="11.8", kind="tree", suite="trixie",
        packages=("mariadb-server-core", "mariadb-client-core"), binary="usr/sbin/mariadbd",
        share_dir="usr/share/mariadb", plugin_dir="usr/lib/mysql/plugin"),
    Distribution(
        name="mariadb-10.11", flavor=Flavor.MARIADB, series="10.11", kind="host", suite=None,
        packages=("mariadb-server",), binary="usr/sbin/mariadbd",
        share_dir="usr/share/mariadb", plugin_dir="usr/lib/mysql/plugin",
        note="Debian 12's own package: registered, not built"),
)}


def known_names() -> list[str]:
    return sorted(DISTRIBUTIONS)


def get(name: str) -> Distribution:
    """The distribution called ``name``; an unknown name is a UsageError that lists the known ones."""
    d = DISTRIBUTIONS.get((name or "").strip().lower())
    if d is None:
        raise UsageError(f"unknown server {name!r}; use one of {', '.join(known_names())}")
    return d
