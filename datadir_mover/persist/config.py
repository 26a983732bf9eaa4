"""What is persisted: the backing directory's ``persist.json`` (tier, backing, interval, how to reach the server,
its last known locations), validated at ``persist install`` and read by every sync, restore and status."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.durable import write_atomic, write_json_atomic
from tuner.core.errors import TierError, ToolMissing, UsageError
from tuner.core.server import ConnectionSpec, Flavor, inspect
from tuner.core.sandbox import Sandbox

from datadir_mover.persist import server_process
from datadir_mover.persist.locations import Locations

STATE_FILE = "persist.json"
DEFAULT_SERVER_UNIT = "mariadb.service"
INTERVAL_RE = re.compile(r"^\s*(\d+)\s*(s|sec|m|min|h)?\s*$")


def parse_interval(text: str) -> int:
    """Seconds from ``30s``, ``5m``, ``1h`` or a bare number of seconds."""
    m = INTERVAL_RE.match(str(text))
    if not m:
        raise UsageError(f"--interval {text!r} is not a duration; write it like 30s, 5m or 1h")
    n = int(m.group(1)) * {"s": 1, "sec": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if n < 10:
        raise UsageError(f"--interval {text} is shorter than 10 s; a consistent copy takes longer than that")
    return n


@dataclass
class PersistConfig:
    tier: str
    backing: str
    interval_s: int
    # sandbox name or socket/host/port, defaults file (never the password); for a system server also its
    # pid_file and the command line it ran with at install (server_argv: how its option files are re-read)
    server: dict[str, Any]
    server_unit: str | None
    locations: Locations  # as last seen (install, then every sync); restore re-reads the server's config
    method: str  # mariadb-backup, xtrabackup, clone
    created_at: float = field(default_factory=time.time)
    # the AppArmor change install made for a CLONE (persist.confinement; AppArmorChange.to_dict), which
    # uninstall removes; None: none made (older configs too)
    apparmor: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PersistConfig":
        d = dict(d)
        d["locations"] = Locations(**d["locations"])
        return cls(**d)

    def unit(self) -> str:
        """The server's systemd unit, as the persist units name it."""
        return self.server_unit or DEFAULT_SERVER_UNIT

    def watched_unit(self) -> str | None:
        """The unit whose MainPID tells whether the server runs: the one given or found at install; for a config
        from before pid files were recorded, the one the units name."""
        return self.server_unit or (None if self.server.get("pid_file") else DEFAULT_SERVER_UNIT)

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


def under(path: str, root: str) -> bool:
    p, r = os.path.realpath(path), os.path.realpath(root)
    return p == r or p.startswith(r.rstrip("/") + "/")


def require_tier_mounted(tier: str, fix: str = "mount the tier first, then restore") -> None:
    """At boot the tier's mount may not have come up: a restore would fill the directory on the root file
    system instead, and the server would run there, unpersisted."""
    if not os.path.ismount(tier):
        raise TierError(f"tier {tier} is not mounted (its directory is on its parent's file system, not a mount "
                        f"point); {fix}")


def configure(spec: ConnectionSpec, tier: str, backing: str, interval: str, server_unit: str | None) -> PersistConfig:
    """Validate and build the persistence config (nothing written)."""
    tier_p, backing_p = os.path.abspath(tier), os.path.abspath(backing)
    if not os.path.isdir(tier_p):
        raise TierError(f"tier {tier_p} is not a directory; mount the tier first (innotier tiers create ...)")
    # restore checks the same at boot, where it tells a tier whose mount did not come up
    require_tier_mounted(tier_p, "give the tier's mount point (the directory the RAM disk is mounted on), not a "
                                 "directory inside or beside it")
    if under(backing_p, tier_p):
        raise UsageError(f"backing directory {backing_p} is on the tier {tier_p} itself; put it on persistent storage")
    model = inspect(spec)
    loc = Locations.from_model(model)
    on_tier = [d for d in loc.dirs() if under(d, tier_p)]
    if not on_tier:
        raise UsageError(f"nothing of the server lives on {tier_p} (datadir {loc.datadir}); move it there first "
                         f"(`innotier move apply datadir --to {tier_p}/mysql`) or give the right --tier")
    parent = backing_p if os.path.isdir(backing_p) else os.path.dirname(backing_p)
    if not os.path.isdir(parent):
        raise UsageError(f"the backing directory's parent {parent} does not exist; create it on persistent storage")
    if os.stat(parent).st_dev == os.stat(tier_p).st_dev:
        raise UsageError(f"backing directory {backing_p} is on the same file system as the tier {tier_p}; "
                         "put it on persistent storage")
    server: dict[str, Any] = {"sandbox": spec.sandbox, "socket": spec.socket, "host": spec.host, "port": spec.port,
                              "defaults_file": spec.defaults_file}
    if not spec.sandbox:
        server.update(server_process.identify(model))
        server_unit = server_unit or server.get("unit")
    return PersistConfig(tier_p, backing_p, parse_interval(interval), server, server_unit, loc,
                         backup_method(loc.flavor))


def save_config(cfg: PersistConfig, spec: ConnectionSpec) -> None:
    """Write the backing directory's config (and a 0600 client.cnf for a system server).  A backing directory
    the DBA made is left with the owner and mode they gave it; one made here is 0700 (0711 for a CLONE, which
    the server's user writes into the backing's clone-staging directory: persist.clone_staging)."""
    root = Path(cfg.backing)
    if not root.is_dir():
        # ours, just made: the umask must not widen it (0711: search only, for the server's user; nothing listed)
        mode = 0o711 if cfg.method == "clone" else 0o700
        root.mkdir(parents=True, mode=mode)
        os.chmod(root, mode)
    (root / "generations").mkdir(mode=0o700, exist_ok=True)
    if not cfg.server.get("sandbox") and spec.password:
        lines = ["[client]", f"user={spec.user}", f"password={spec.password}"]
        lines += [f"socket={spec.socket}"] if spec.socket else [f"host={spec.host}", f"port={spec.port or 3306}"]
        write_atomic(root / "client.cnf", "\n".join(lines) + "\n", mode=0o600)
    write_config(cfg)


def write_config(cfg: PersistConfig) -> None:
    write_json_atomic(Path(cfg.backing, STATE_FILE), cfg.to_dict(), mode=0o600)
