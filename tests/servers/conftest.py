"""Real MySQL 9.7 and MariaDB 11.8 servers for the tests: each tree is built once per machine.

``installed_server(name)`` returns the installed distribution from ``innotier_cache()/servers`` (shared by every
test session of this machine), building it first when it is missing: CI's first run pays about two minutes
per tree, later runs take it from the cache.  ``server_sandbox(name)`` is one running sandbox per server and
test module (16k pages, 256M buffer pool), killed and destroyed at the end of the module.
"""

from __future__ import annotations

import sys

import pytest

from tuner.core import sandbox as sbx
from tuner.core.errors import UsageError
from tuner.core.servers import build, tree

TREE_SERVERS = ("mysql-9.7", "mariadb-11.8")


def ensure_installed(name: str) -> tree.InstalledServer:
    try:
        return tree.installed(name)
    except UsageError:
        pass  # not installed on this machine yet: build it (once per machine)
    return build.install(build.plan_install(name), progress=lambda m: print(f"[{name}] {m}", file=sys.stderr))


@pytest.fixture(scope="session")
def installed_server():
    cache: dict[str, tree.InstalledServer] = {}

    def get(name: str) -> tree.InstalledServer:
        if name not in cache:
            cache[name] = ensure_installed(name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def mysql_9_7(installed_server):
    return installed_server("mysql-9.7")


@pytest.fixture(scope="session")
def mariadb_11_8(installed_server):
    return installed_server("mariadb-11.8")


@pytest.fixture(scope="module")
def server_sandbox(installed_server, request):
    """One running sandbox per server for the test module: server_sandbox('mysql-9.7')."""
    made: dict[str, sbx.Sandbox] = {}
    module = request.module.__name__.rsplit(".", 1)[-1].replace("test_", "")[:20]

    def get(name: str) -> sbx.Sandbox:
        if name not in made:
            installed_server(name)
            sb = sbx.create(f"{module}-{name}", page_size="16k", server=name,
                            options={"innodb_buffer_pool_size": "256M"})
            made[name] = sb
            sb.start()
        return made[name]

    yield get
    for sb in made.values():
        try:
            sb.destroy(force=True)
        except Exception:
            pass
