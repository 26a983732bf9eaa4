"""`innotier fleet` plans and bad input: printed before any host is contacted, one-line errors naming the fix."""

from __future__ import annotations

import os
import tempfile

import pytest
import yaml

from nshosts import innotier_cli
from tuner.core.errors import FleetError
from tuner.fleet import wheelhouse
from tuner.fleet.inventory import load_inventory

INVENTORY = """\
[db]
dbhost1 ansible_host=192.0.2.51 innotier_tiers='{"fast": "/mnt/nvme/innotier"}'
dbhost2 ansible_host=192.0.2.52

[drivers]
client1 ansible_host=192.0.2.61
client2 ansible_host=192.0.2.62
"""


def _files(tmp_path, mode=0o600):
    inv = tmp_path / "hosts.ini"
    inv.write_text(INVENTORY)
    cnf = tmp_path / "client.cnf"
    cnf.write_text("[client]\nuser = u\npassword = not-shown\n")
    os.chmod(cnf, mode)
    return inv, cnf


def test_tpcc_dry_run_prints_the_shards(tmp_path):
    inv, cnf = _files(tmp_path)
    r = innotier_cli("fleet", "tpcc", "-i", str(inv), "--clients", "5", "--host", "db1", "--defaults-file", str(cnf),
                     "--dry-run", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "2 shards, 5 clients in total" in r.stderr
    assert "shard 0/2 on client1" in r.stderr and "shard 1/2 on client2" in r.stderr
    assert "not-shown" not in r.stderr + r.stdout


def test_world_readable_password_file_is_refused(tmp_path):
    inv, cnf = _files(tmp_path, 0o644)
    r = innotier_cli("fleet", "tpcc", "-i", str(inv), "--clients", "4", "--host", "db1", "--defaults-file", str(cnf),
                     "--dry-run", timeout=120)
    assert r.returncode == 2 and "chmod 600" in r.stderr and r.stderr.strip().count("\n") == 0


def test_too_few_clients_and_missing_group(tmp_path):
    inv, cnf = _files(tmp_path)
    r = innotier_cli("fleet", "tpcc", "-i", str(inv), "--clients", "1", "--host", "db1", "--defaults-file", str(cnf),
                     "--dry-run", timeout=120)
    assert r.returncode == 2 and "fewer than the 2 driver hosts" in r.stderr
    r = innotier_cli("fleet", "tpcc", "-i", str(inv), "--clients", "4", "--host", "db1", "--defaults-file", str(cnf),
                     "--group", "clients", "--dry-run", timeout=120)
    assert r.returncode == 11 and "no hosts in group 'clients'" in r.stderr


SPEC = """\
name: place-test
server: {flavor: mariadb}
workload: {driver: builtin, warehouses: 1, warmup: 1, duration: 5, interval: 5}
tiers:
  disk: {kind: home}
  fast: {kind: tmpfs, size: 512M}
fixed: {page_size: 16k, clients: 2, buffer_pool_size: 128M}
axes:
  placement: [disk, fast]
"""


def test_sweep_dry_run_places_each_hosts_tiers(tmp_path):
    inv, _ = _files(tmp_path)
    spec = tmp_path / "place-test.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    r = innotier_cli("fleet", "sweep", str(spec), "-i", str(inv), "--out", str(out), "--dry-run", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "dbhost1: fast -> /mnt/nvme/innotier" in r.stderr and "dbhost2: the spec's own tiers" in r.stderr
    d1 = yaml.safe_load((out / "specs" / "dbhost1.yaml").read_text())
    d2 = yaml.safe_load((out / "specs" / "dbhost2.yaml").read_text())
    assert d1["tiers"]["fast"] == {"kind": "path", "path": "/mnt/nvme/innotier"}
    assert d2["tiers"]["fast"] == {"kind": "tmpfs", "size": "512M"}  # no host variable: the spec's tier
    assert d1["axes"] == d2["axes"] == yaml.safe_load(SPEC)["axes"]
    r = innotier_cli("fleet", "sweep", "no-such-spec", "-i", str(inv), "--dry-run", timeout=120)
    assert r.returncode == 9 and "neither a file nor a shipped spec" in r.stderr


def _ansible_runner_dirs() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith((".ansible-runner-", "innotier-inventory-"))}


def test_reading_an_inventory_leaves_nothing_in_tmp(tmp_path):
    inv, _ = _files(tmp_path)
    before = _ansible_runner_dirs()
    inventory = load_inventory(inv)
    assert [h.name for h in inventory.group("db")] == ["dbhost1", "dbhost2"]
    assert _ansible_runner_dirs() <= before


def test_a_failed_wheel_build_names_its_cause_not_see_above(tmp_path):
    """pip's last words on a failed build are "See above for details": the error carries the build's own."""
    pkg = tmp_path / "broken"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                        'build-backend = "setuptools.build_meta"\n')
    (pkg / "setup.py").write_text('raise SystemExit("the build needs something this test leaves out")\n')
    with pytest.raises(FleetError) as err:
        wheelhouse._pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "out"), str(pkg),
                        what="building the wheel")
    message = str(err.value)
    assert "the build needs something this test leaves out" in message and "See above" not in message
    assert message.count("\n") == 0 and "give --wheel" in message
