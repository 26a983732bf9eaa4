"""The install playbook through `innotier fleet install`: a per-host virtualenv from the controller's wheel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tuner
import tuner.fleet.runner
from nshosts import innotier_cli


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


def test_playbooks_run_with_ansible_playbook_directly(installed_fleet, tmp_path):
    """The shipped playbooks are plain Ansible: ping and cleanup through ansible-playbook itself."""
    fleet, inv = installed_fleet
    playbooks = Path(tuner.fleet.runner.PLAYBOOKS)
    env = {**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path / "cp"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")}
    exe = str(Path(sys.executable).parent / "ansible-playbook")
    for h in fleet.hosts:
        assert (h.root / "stage").is_dir()  # the unpacked wheelhouse install.yml left
    for book in ("ping.yml", "cleanup.yml"):
        r = subprocess.run([exe, "-i", str(inv), str(playbooks / book)], capture_output=True, text=True,
                           timeout=600, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert "unreachable=0" in r.stdout and "failed=0" in r.stdout
    for h in fleet.hosts:
        assert not (h.root / "stage").exists()  # cleaned up
        assert (h.venv / "bin" / "innotier").exists()  # the virtualenv is kept unless asked
