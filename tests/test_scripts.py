"""The set-up scripts as a newcomer meets them: root without sudo, a user with sudo, clean packaging output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def world_readable_dir():
    """A directory an unprivileged user can read (pytest's tmp_path is 0700 root)."""
    d = Path(tempfile.mkdtemp(prefix="innotier-scripts-"))
    d.chmod(0o755)
    shutil.copy(REPO / "scripts" / "lib.sh", d / "lib.sh")
    (d / "lib.sh").chmod(0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_user(user: str, script: str, path: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", f"PATH={path}", "bash", "-c", script],
                          capture_output=True, text=True, timeout=60)


def test_as_root_runs_directly_when_root():
    if os.geteuid() != 0:
        pytest.skip("checks the root path; CI runs as root")
    r = subprocess.run(["bash", "-c", f"source {REPO}/scripts/lib.sh; as_root id -u"], capture_output=True,
                       text=True, check=True)
    assert r.stdout.strip() == "0"


def test_as_root_without_sudo_is_one_line_error(world_readable_dir):
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to act as an unprivileged user")
    r = as_user("nobody", f"source {world_readable_dir}/lib.sh; "
                "as_root env DEBIAN_FRONTEND=noninteractive apt-get install x; echo reached", "/usr/bin:/bin")
    assert r.returncode == 1
    assert "reached" not in r.stdout
    assert r.stderr.count("\n") == 1, r.stderr
    assert "'apt-get' needs root and sudo is not installed; fix: run this command as root" in r.stderr


def test_as_root_uses_sudo_when_not_root(world_readable_dir):
    """sudo is not installed on this machine: a recording stand-in on PATH shows what the script asks of it."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to act as an unprivileged user")
    bindir = world_readable_dir / "bin"
    bindir.mkdir()
    (bindir / "sudo").write_text('#!/bin/sh\necho "sudo $*"\n')
    (bindir / "sudo").chmod(0o755)
    r = as_user("nobody", f"source {world_readable_dir}/lib.sh; as_root apt-get install -y fio",
                f"{bindir}:/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "sudo apt-get install -y fio"
    r = as_user("nobody", f"source {world_readable_dir}/lib.sh; require_root 'installing fio'; echo allowed",
                f"{bindir}:/usr/bin:/bin")
    assert r.stdout.strip() == "allowed"


def test_bootstrap_when_nothing_is_missing_says_so_in_one_line():
    """Run twice: the first run may refresh an edited setup.cfg; the second has nothing to do."""
    subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=REPO, capture_output=True, timeout=600, check=True)
    r = subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bootstrap: nothing was missing ("), r.stdout
    assert r.stderr == ""


def test_readme_commands_need_no_sudo_and_say_root_or_sudo():
    text = (REPO / "README.md").read_text()
    block = text[text.index("## The two commands"):text.index("## A tour")]
    commands = [line for line in block.splitlines() if line.startswith("./scripts/")]
    assert [c.split()[0] for c in commands] == ["./scripts/innotier-demo", "./scripts/innotier-test"]
    assert "as root, or as a user with sudo" in block
    assert "sudo ./" not in text
    for c in commands:
        assert os.access(REPO / c.split()[0], os.X_OK), c


def test_wheel_declares_its_data_folders_without_warnings(tmp_path):
    """setup.cfg declares the data folders (catalog, shipped profiles, sweep specs, report templates)."""
    src = tmp_path / "innotier"  # built from a copy: a build writes build/ and *.egg-info into its source
    subprocess.run(["bash", str(REPO / "scripts" / "copy-checkout"), str(src)], check=True, capture_output=True)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp_path / "wheels"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    names = zipfile.ZipFile(next((tmp_path / "wheels").glob("innotier-*.whl"))).namelist()
    for data in ("profiles/catalog/options.yaml", "profiles/catalog/recorded/mariadb-10.11-option-names.txt",
                 "profiles/shipped/ssd-default.yaml", "tuner/sweep/specs/demo.yaml",
                 "tuner/sweep/templates/report.md.j2", "tuner/fleet/playbooks/install.yml"):
        assert data in names, data
    assert not [n for n in names if "__pycache__" in n]
