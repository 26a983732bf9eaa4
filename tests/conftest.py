"""Shared fixtures: a private INNOTIER_HOME per test session, one shared MariaDB sandbox, the CLI.

Tests talk to real things: the sandbox is a real mariadbd started here.  Area
tests that need more (a loaded TPC-C schema, tmpfs/zram mounts, Prometheus)
build on these fixtures in their own conftest or test module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# mysql-connector's C extension dlopens libstdc++, which needs glibc's static TLS; once matplotlib.image is loaded
# (tests/sweep/test_sweep_e2e.py reads its PNGs) that space is gone and the extension fails with "cannot allocate
# memory in static TLS block", reported as "C Extension not available" by every later connection.  Loading it first
# in every test process keeps the outcome independent of which tests run and in what order.
import _mysql_connector  # noqa: F401,E402

REPO = Path(__file__).resolve().parent.parent
# recorded real output for what this machine lacks (md RAID, pmem, NVMe, peer tools); each group's README
# gives the provenance of every file
FIXTURES = REPO / "tests" / "fixtures" / "recorded"


@pytest.fixture(scope="session", autouse=True)
def innotier_home():
    """Every test session gets its own INNOTIER_HOME (sandboxes, journals, results)."""
    home = Path(tempfile.mkdtemp(prefix="ih-", dir="/tmp"))  # short: unix socket paths are limited to 108 bytes
    old = os.environ.get("INNOTIER_HOME")
    os.environ["INNOTIER_HOME"] = str(home)
    yield home
    # stop anything a test left running, then remove the home
    from tuner.core.sandbox import SandboxState, list_sandboxes

    for sb in list_sandboxes():
        if sb.state() == SandboxState.RUNNING:
            try:
                sb.stop("kill")
            except Exception:
                pass
    subprocess.run(["rm", "-rf", str(home)], check=False)
    if old is None:
        os.environ.pop("INNOTIER_HOME", None)
    else:
        os.environ["INNOTIER_HOME"] = old


@pytest.fixture(scope="session")
def shared_sandbox(innotier_home):
    """One running MariaDB sandbox (16k pages, 256M buffer pool) shared by the session's tests.

    Tests that use it must leave it running and must not change its settings;
    schemas they create should be dropped or named for the test.
    """
    from tuner.core import sandbox as sbx

    sb = sbx.create("shared", page_size="16k", options={"innodb_buffer_pool_size": "256M"})
    sb.start()
    yield sb
    if sb.state() == sbx.SandboxState.RUNNING:
        sb.stop("kill")


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """tests/fixtures/recorded: one folder per group (hardware, local-tiers, peer-output), each with a README."""
    if not FIXTURES.is_dir():
        pytest.fail(f"recorded fixtures not found at {FIXTURES}; fix: restore tests/fixtures/recorded from git")
    return FIXTURES


def run_cli(*args: str, check: bool = False, input: str | None = None, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real `innotier` command line in a subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True,
                          input=input, env=full_env, timeout=timeout, cwd=str(REPO))
    if check and proc.returncode != 0:
        raise AssertionError(f"innotier {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def tpcc_w1(shared_sandbox):
    """The shared sandbox with a TPC-C schema of 1 warehouse loaded in database `tpcc` (loaded once a session).

    Returns a ConnectionSpec with database='tpcc'.  Runs may change the data;
    consistency checks must pass before and after every run.
    """
    from tuner.tpcc.loader import load

    spec = shared_sandbox.connection_spec()
    load(spec, warehouses=1, database="tpcc", drop=True, progress=False)
    return spec.with_database("tpcc")


# ---------------------------------------------------------------------------
# Relocation and persistence (tests/move, tests/persist): real tmpfs and zram-ext4 tiers, a golden loaded
# datadir and clones of it.  Defined here, once, so both folders share one session instance.

@pytest.fixture(scope="session")
def mv_tiers(innotier_home):
    """{'tmpfs': path, 'zram': path}: a real tmpfs and a real zram-backed ext4, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.fail("the mover's tests need root (mounts, zram); CI runs them as root")
    base = Path(innotier_home) / "tiers"
    paths = {"tmpfs": str(base / "tmpfs"), "zram": str(base / "zram")}
    _mv().mount_tmpfs(paths["tmpfs"], "1G")
    try:
        _mv().mount_zram_ext4(paths["zram"], "1G")
        yield paths
    finally:
        for p in paths.values():
            _mv().unmount(p)


@pytest.fixture(scope="session")
def golden(innotier_home):
    return _mv().golden_sandbox()


@pytest.fixture
def clone(golden, request):
    """A running clone of the golden sandbox, named for the test; killed and destroyed afterwards."""
    made = []

    def make(name: str, datadir: str | None = None, start: bool = True):
        sb = _mv().clone_sandbox(name, datadir=datadir, start=start)
        made.append(sb.name)
        return sb

    yield make
    from tuner.core.sandbox import Sandbox

    for name in made:
        try:
            Sandbox.load(name).destroy(force=True)
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Real server distributions (tests/servers, sweeps with a server axis): built once per machine.

def ensure_installed(name: str):
    """The installed distribution from innotier_cache()/servers (shared by every session of this machine),
    built first when it is missing: CI's first run pays about two minutes per tree, later runs take the cache."""
    from tuner.core.errors import UsageError
    from tuner.core.servers import build, tree

    try:
        return tree.installed(name)
    except UsageError:
        pass  # not installed on this machine yet: build (or register) it once
    return build.install(build.plan_install(name), progress=lambda m: print(f"[{name}] {m}", file=sys.stderr))


@pytest.fixture(scope="session")
def installed_server():
    """installed_server('mysql-9.7') -> the verified InstalledServer, built on first use."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = ensure_installed(name)
        return cache[name]

    return get


def _mv():
    import mvhelpers  # tests/mvhelpers.py; tests/ is on sys.path (rootdir conftest)

    return mvhelpers
