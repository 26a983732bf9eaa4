"""Which server a profile or option file is for: a flavor and a version (``mariadb-10.11``, ``mysql-8.0.30``).

A series without a patch level (``mysql-8.0``) means the newest release of that series, so
version-dependent choices take the newest behaviour (8.0 -> innodb_redo_log_capacity, which
arrived in 8.0.30).  Give the patch level to target an older release (``mysql-8.0.25``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.core.errors import ProfileError
from tuner.core.server import Flavor, Version

NEWEST_PATCH = 9999  # "newest release of the series"

# The series the catalog covers (from the first version, below the second).
COVERED = {
    "mariadb": (Version(10, 6, 0), Version(12, 0, 0)),
    "mysql": (Version(5, 7, 0), Version(10, 0, 0)),
}
REFERENCE_SERIES = {  # the series the catalog was written and tested for
    "mariadb": ("10.6", "10.11", "11.4", "11.8"),
    "mysql": ("5.7", "8.0", "8.4", "9.7"),
}

_TARGET_RE = re.compile(r"^(mariadb|mysql|percona)[-_ ]?(\d+)\.(\d+)(?:\.(\d+))?$", re.IGNORECASE)


def family(flavor: Flavor) -> str:
    """Catalog family: Percona Server follows the MySQL rows."""
    return "mariadb" if flavor == Flavor.MARIADB else "mysql"


@dataclass(frozen=True)
class Target:
    flavor: Flavor
    version: Version
    label: str  # as the user wrote it, normalized: mariadb-10.11, mysql-8.0.25

    @property
    def family(self) -> str:
        return family(self.flavor)

    def describe(self) -> str:
        if self.version.patch == NEWEST_PATCH:
            return f"{self.label} (newest {self.version.series} release)"
        return self.label


def parse_target(text: str) -> Target:
    """``mariadb-10.11`` / ``mysql-8.0.30`` / ``percona-8.0`` -> Target; anything else is a ProfileError."""
    m = _TARGET_RE.match((text or "").strip())
    if not m:
        raise ProfileError(f"unknown flavor {text!r}; write it as FLAVOR-VERSION, e.g. mariadb-10.11, mysql-8.0 "
                           "or mysql-8.0.25 (flavors: mariadb, mysql, percona)")
    flavor = Flavor(m.group(1).lower())
    patch = int(m.group(4)) if m.group(4) is not None else NEWEST_PATCH
    version = Version(int(m.group(2)), int(m.group(3)), patch)
    make_target(flavor, version)  # refuses versions the catalog does not cover
    return Target(flavor, version, f"{flavor.value}-{m.group(2)}.{m.group(3)}"
                  + (f".{m.group(4)}" if m.group(4) is not None else ""))


def make_target(flavor: Flavor, version: Version) -> Target:
    """A target for a known flavor/version (e.g. a live server or sandbox); refuses versions the catalog does not cover."""
    lo, hi = COVERED[family(flavor)]
    if not (lo <= version < hi):
        raise ProfileError(f"{flavor.value} {version.series} is not covered by the option catalog; "
                           "use mariadb 10.6 to 11.x or mysql/percona 5.7 to 9.x "
                           "(reference series: mariadb 10.6, 10.11, 11.4, 11.8; mysql 5.7, 8.0, 8.4, 9.7)")
    label = f"{flavor.value}-{version.series}" + ("" if version.patch == NEWEST_PATCH else f".{version.patch}")
    return Target(flavor, version, label)
