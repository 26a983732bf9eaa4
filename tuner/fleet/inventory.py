"""The user's Ansible inventory, as innotier reads it: groups ``db`` and ``drivers``, host variables.

Parsed by Ansible itself (``ansible-inventory --list`` through ansible-runner), so every inventory format
and plugin a DBA already uses works, INI or YAML.  innotier reads these host variables:

    innotier_home     INNOTIER_HOME on the host (default ~/.local/share/innotier of the SSH user)
    innotier_venv     where the install playbook puts innotier's virtualenv (default /opt/innotier/venv)
    innotier_tiers    tier name -> directory on that host; a sweep's tier of that name is placed there
    innotier_metrics_listen   HOST:PORT a driver shard serves its metrics on (default: no endpoint)
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.core.errors import FleetError
from tuner.fleet.runner import check_ansible

DEFAULT_VENV = "/opt/innotier/venv"


@dataclass
class Host:
    name: str
    groups: list[str]
    vars: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return str(self.vars.get("ansible_host") or self.name)

    @property
    def venv(self) -> str:
        return str(self.vars.get("innotier_venv") or DEFAULT_VENV)

    @property
    def tiers(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.vars.get("innotier_tiers") or {}).items()}


@dataclass
class Inventory:
    path: Path
    hosts: dict[str, Host]

    def group(self, name: str) -> list[Host]:
        return [h for h in self.hosts.values() if name in h.groups]

    def require_group(self, name: str) -> list[Host]:
        hosts = self.group(name)
        if not hosts:
            raise FleetError(f"inventory {self.path} has no hosts in group {name!r}; add a [{name}] group "
                             f"(see docs/fleet.md for an example inventory)")
        return hosts


def load_inventory(path: str | Path) -> Inventory:
    p = Path(path)
    if not p.exists():
        raise FleetError(f"inventory {p} does not exist; give -i PATH of an Ansible inventory (INI or YAML)")
    check_ansible()
    from ansible_runner.interface import get_inventory  # deferred: ~0.3 s of start-up (see runner.run_playbook)

    # a private data directory of our own, removed afterwards: without one ansible-runner makes
    # /tmp/.ansible-runner-* for every call and leaves it behind
    with tempfile.TemporaryDirectory(prefix="innotier-inventory-") as scratch:
        out, err = get_inventory("list", [str(p.resolve())], response_format="json", quiet=True,
                                 private_data_dir=scratch)
    if not out:
        raise FleetError(f"Ansible could not read inventory {p}: {(err or '').strip()[:300]}; fix the file")
    data = out if isinstance(out, dict) else json.loads(out)
    hostvars = (data.get("_meta") or {}).get("hostvars") or {}
    groups: dict[str, list[str]] = {}

    def walk(group: str, seen: tuple[str, ...] = ()) -> list[str]:
        g = data.get(group) or {}
        members = list(g.get("hosts") or [])
        for child in g.get("children") or []:
            if child not in seen:
                members += walk(child, seen + (child,))
        return members

    for gname in data:
        if gname != "_meta":
            for h in walk(gname, (gname,)):
                groups.setdefault(h, [])
                if gname not in groups[h]:
                    groups[h].append(gname)
    hosts = {h: Host(h, sorted(gs), dict(hostvars.get(h) or {})) for h, gs in groups.items()}
    if not hosts:
        raise FleetError(f"inventory {p} lists no hosts; add hosts under groups db and/or drivers")
    return Inventory(path=p, hosts=hosts)
