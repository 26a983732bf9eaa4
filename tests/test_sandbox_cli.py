"""`innotier sandbox create / status` and `server inspect` through the real CLI, as a newcomer meets them on the
README's tour: the page size said one way, a stopped sandbox's status, human units beside bytes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str) -> subprocess.CompletedProcess:
    """The real CLI (module-scoped fixtures cannot use the function-scoped `cli`)."""
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def created(innotier_home):
    """Two stopped sandboxes: page size given in bytes, and taken from a profile; {name: (create output, form)}."""
    out = {}
    for name, args, expect in (("pg-flag", ["--page-size", "8192"], "8k"),
                               ("pg-profile", ["--profile", "dissertation-tuning"], "16k")):
        r = run("sandbox", "create", name, *args)
        assert r.returncode == 0, r.stderr
        out[name] = (r.stdout, expect)
    yield out
    for name in out:
        run("sandbox", "destroy", name, "--force")


def test_sandbox_create_says_the_page_size_one_way(cli, created):
    for name, (out, expect) in created.items():
        assert f"page size {expect}," in out, out
        status = cli("sandbox", "status", name, check=True).stdout
        assert re.search(rf"^page_size\s+{expect}$", status, re.M), status
        assert cli("sandbox", "list", "--json", check=True).stdout.count(f'"page_size": "{expect}"') >= 1


def test_sandbox_status_of_a_stopped_sandbox_has_no_pid_none(cli, created):
    name = "pg-flag"
    out = cli("sandbox", "status", name, check=True).stdout
    assert re.search(r"^state\s+stopped$", out, re.M)
    assert "None" not in out and not re.search(r"^pid\b", out, re.M), out
    assert json.loads(cli("sandbox", "status", name, "--json", check=True).stdout)["pid"] is None


def test_server_inspect_shows_human_units_beside_bytes(shared_sandbox, cli):
    out = cli("server", "inspect", "--sandbox", shared_sandbox.name, check=True).stdout
    assert re.search(r"^\s+innodb_buffer_pool_size\s+256M \(268435456 bytes\)$", out, re.M), out
    assert re.search(r"^\s+page size\s+16k \(16384 bytes\)$", out, re.M), out
    assert re.search(r"^\s+innodb_log_file_size\s+\S+ \(\d+ bytes\)$", out, re.M), out
    # the JSON keeps raw values for scripts
    model = json.loads(cli("server", "inspect", "--sandbox", shared_sandbox.name, "--json", check=True).stdout)
    assert model["variables"]["innodb_buffer_pool_size"] == "268435456"
