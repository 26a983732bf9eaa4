"""Fleet fixtures: two namespace hosts with their own sshd (nshosts.py), innotier installed on them through
the install playbook, and a MariaDB sandbox the hosts reach at the controller's bridge address."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

import nshosts
from nshosts import innotier_cli

HOSTS = 2


@pytest.fixture(scope="session")
def ns_fleet():
    if os.geteuid() != 0:
        pytest.fail("the fleet tests need root (network namespaces, tmpfs mounts); CI runs them as root")
    missing = nshosts.missing_tools()
    if missing:
        pytest.fail(f"missing {', '.join(missing)}; scripts/bootstrap.sh installs openssh-server and iproute2")
    root = Path(tempfile.mkdtemp(prefix="itf-", dir="/tmp"))
    fleet = nshosts.create_fleet(root, HOSTS)
    try:
        yield fleet
    finally:
        nshosts.destroy_fleet(fleet)
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="session")
def installed_fleet(ns_fleet):
    """innotier installed on every host by `innotier fleet install` (wheelhouse, per-host venv), and the
    inventory: groups db and drivers hold both hosts; each host has its own INNOTIER_HOME and tmpfs tier."""
    inv = ns_fleet.write_inventory(ns_fleet.root / "inventory.yml", {"db": [0, 1], "drivers": [0, 1]},
                                   extra={"innotier_install_packages": False})  # the hosts share this machine's
    r = innotier_cli("fleet", "install", "-i", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr
    for h in ns_fleet.hosts:
        assert (h.venv / "bin" / "innotier").exists()
    return ns_fleet, inv
