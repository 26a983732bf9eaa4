"""Real MySQL 9.7 and MariaDB 11.8 servers for the tests (``installed_server`` is in tests/conftest.py).

``server_sandbox(name)`` is one running sandbox per server and
test module (16k pages, 256M buffer pool), killed and destroyed at the end of the module.
"""

from __future__ import annotations

import pytest

from tuner.core import sandbox as sbx


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
