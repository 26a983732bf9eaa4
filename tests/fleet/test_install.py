"""The install playbook through `innotier fleet install`: a per-host virtualenv from the controller's wheel."""

from __future__ import annotations

import subprocess

import tuner
from conftest import innotier_cli


def test_install_puts_this_version_on_every_host(installed_fleet):
    fleet, inv = installed_fleet
    for h in fleet.hosts:
        # the host's own innotier answers inside its namespace, from its own venv
        r = h.exec(str(h.venv / "bin" / "innotier"), "--version")
        assert r.stdout.strip() == f"innotier {tuner.__version__}"
        # it is an installed copy, not this checkout
        r = h.exec(str(h.venv / "bin" / "python"), "-c", "import tuner; print(tuner.__file__)")
        assert r.stdout.startswith(str(h.venv))
        # and it has the playbooks as package data
        r = h.exec(str(h.venv / "bin" / "innotier"), "fleet", "playbooks")
        assert "tpcc_shards.yml" in r.stdout and "install.yml" in r.stdout


def test_ping_and_an_unreachable_host(installed_fleet, tmp_path):
    fleet, inv = installed_fleet
    r = innotier_cli("fleet", "ping", "-i", str(inv))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" ok") == len(fleet.hosts)
    # a host whose address answers nothing is reported by name, the others still ok
    bad = tmp_path / "inv.yml"
    text = inv.read_text().replace(fleet.hosts[1].addr, "10.213.0.99")
    bad.write_text(text)
    r = innotier_cli("fleet", "ping", "-i", str(bad))
    assert r.returncode == 11
    assert "h2" in r.stdout and "UNREACHABLE" in r.stdout and "h1" in r.stdout


def test_bad_inventory_is_one_line(tmp_path):
    r = innotier_cli("fleet", "ping", "-i", str(tmp_path / "missing.yml"))
    assert r.returncode == 11 and r.stderr.strip().count("\n") == 0 and "does not exist" in r.stderr
