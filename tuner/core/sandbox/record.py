"""What a sandbox is: the record kept in ``sandbox.json`` and the paths of its files."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.durable import write_json_atomic
from tuner.core.errors import SandboxError, UsageError
from tuner.core.paths import sandboxes_dir
from tuner.core.server import Flavor
from tuner.core.servers import tree as server_trees

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def validate_name(name: str) -> None:
    if not NAME_RE.match(name or ""):
        raise UsageError(f"sandbox name {name!r} is not valid; use letters, digits, '.', '_' or '-' (no '/'), "
                         "at most 63 characters")


def sandbox_names() -> list[str]:
    """Names of the sandboxes that have a record, sorted."""
    root = sandboxes_dir()
    if not root.is_dir():
        return []
    return [p.name for p in sorted(root.iterdir()) if (p / "sandbox.json").is_file()]


@dataclass
class SandboxRecord:
    name: str
    dir: str
    datadir: str
    port: int
    socket: str
    mysqld: str
    install_db: str | None
    flavor: Flavor
    version: str
    version_string: str
    page_size: int
    options: dict[str, str] = field(default_factory=dict)  # extra [mysqld] options given at create
    basedir: str | None = None
    created_at: float = 0.0
    needs_bootstrap: bool = True  # root password not set yet (first start sets it)
    server: str | None = None  # installed server distribution it runs (None: the host's binaries / --basedir)

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def cnf(self) -> Path:
        return self.path / "my.cnf"

    @property
    def conf_d(self) -> Path:
        return self.path / "conf.d"

    @property
    def client_cnf(self) -> Path:
        return self.path / "client.cnf"

    @property
    def pid_file(self) -> Path:
        return self.path / "mysqld.pid"

    @property
    def error_log(self) -> Path:
        return self.path / "error.log"

    @property
    def tmpdir(self) -> Path:
        return self.path / "tmp"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["flavor"] = self.flavor.value
        return d

    def save(self) -> None:
        write_json_atomic(self.path / "sandbox.json", self.to_dict(), mode=0o644)

    @classmethod
    def load(cls, name: str):
        validate_name(name)
        p = sandboxes_dir() / name / "sandbox.json"
        if not p.is_file():
            known = ", ".join(sandbox_names()) or "none"
            raise SandboxError(f"no sandbox named {name!r} (known: {known}); create it with `innotier sandbox create {name}`")
        d = json.loads(p.read_text())
        d["flavor"] = Flavor(d["flavor"])
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})

    def installed_server(self, verify: bool = False) -> "server_trees.InstalledServer":
        return server_trees.installed(self.server, verify=verify)

    def launcher(self, verify: bool = False) -> list[str]:
        """The command prefix that runs the server binary (a tree's loader; empty for host binaries)."""
        return self.installed_server(verify).launcher() if self.server else []

    def timings(self) -> dict[str, float]:
        """How long this server's last start and clean/slow stops took (``start_s``, ``stop_clean_s``, ...)."""
        try:
            return json.loads((self.path / "timings.json").read_text())
        except (OSError, ValueError):
            return {}

    def note_timing(self, key: str, seconds: float) -> None:
        """Kept for estimates (a move's downtime): what this server took, not a typical figure."""
        write_json_atomic(self.path / "timings.json", {**self.timings(), key: round(seconds, 3)})
