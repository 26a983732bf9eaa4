"""A newcomer's first hour, in CI: clone the repository, set it up as the README says, and take the tour's first
steps through the installed `innotier` console script, with a private INNOTIER_HOME.

Set-up is the README's own `scripts/bootstrap.sh` in the clone: a fresh .venv with innotier and every Python
dependency installed from the per-machine wheel cache (a full install, not --no-deps; the first set-up on a
machine fills the cache).  The clone sits alone in a temporary directory, so nothing beside it can help.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    where = tmp_path_factory.mktemp("newcomer") / "innotier"
    subprocess.run(["git", "clone", "-q", str(REPO), str(where)], check=True, capture_output=True)
    return where


@pytest.fixture(scope="module")
def home():
    h = Path(tempfile.mkdtemp(prefix="nc-", dir="/tmp"))  # short: unix socket paths are limited to 108 bytes
    yield h
    shutil.rmtree(h, ignore_errors=True)


def test_clone_sets_up_and_takes_the_tour(clone, home):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                          check=True).stdout.strip() == head
    assert sorted(os.listdir(clone.parent)) == ["innotier"]

    boot = subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=clone, capture_output=True, text=True, timeout=900)
    assert boot.returncode == 0, boot.stdout + boot.stderr
    summary = boot.stdout.strip().splitlines()[-1]
    assert re.match(r"bootstrap: installed a virtualenv in \.venv, innotier \S+ and \d+ other Python packages "
                    r"in \d+ s; full log: .*/out/bootstrap\.log$", summary), boot.stdout
    log = (clone / "out" / "bootstrap.log").read_text()
    # the data folders are declared (setuptools' only remaining note is its generic "Editable installation" one)
    assert "is absent from the `packages` configuration" not in log
    assert [ln for ln in log.splitlines() if "BuildBackendWarning" in ln and "Editable installation" not in ln] == []

    innotier = str(clone / ".venv" / "bin" / "innotier")
    env = {**os.environ, "INNOTIER_HOME": str(home)}
    env.pop("COLUMNS", None)

    def run(*args: str, timeout: float = 600) -> str:
        r = subprocess.run([innotier, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"innotier {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r.stdout

    # the console script runs the clone's code, not this checkout's
    where = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c", "import tuner; print(tuner.__file__)"],
                           cwd="/", capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(clone / "tuner" / "__init__.py")

    assert "sandbox" in run("--help") and "tpcc" in run("--help")
    try:
        out = run("sandbox", "create", "nb", "--start")
        assert "created sandbox nb" in out and "page size 16k" in out and "started sandbox nb" in out
        out = run("tpcc", "load", "--sandbox", "nb", "-w", "1")
        assert "loaded and verified" in out
        result = json.loads(run("tpcc", "run", "--sandbox", "nb", "--clients", "2", "--warmup", "2",
                                "--duration", "10", "--json"))
        assert result["tpmc"] > 0 and result["errors"] == 0, result
        assert "all checks passed" in run("tpcc", "check", "--sandbox", "nb")
    finally:
        subprocess.run([innotier, "sandbox", "destroy", "nb", "--force"], cwd=clone, env=env, capture_output=True,
                       timeout=120)
    assert not (home / "sandboxes" / "nb").exists()
