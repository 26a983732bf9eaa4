"""Sandboxes of the real MySQL 9.7 and MariaDB 11.8 trees: every page size, stop/start, crash, bad input."""

from __future__ import annotations

import pytest

from tuner.core import sandbox as sbx
from tuner.core.errors import SandboxError
from tuner.core.server import Flavor, fetch_variables, inspect
from tuner.core.units import PAGE_SIZES


def _variables(sb) -> dict[str, str]:
    conn = sb.connection_spec().connect()
    try:
        return {k.lower(): v for k, v in fetch_variables(conn).items()}
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("page", ["4k", "8k", "16k", "32k", "64k"])
def test_mysql_9_7_every_page_size(page, mysql_9_7, cli):
    name = f"my97-{page}"
    proc = cli("sandbox", "create", name, "--server", "mysql-9.7", "--page-size", page, "--start",
               "--option", "innodb_buffer_pool_size=64M")
    assert proc.returncode == 0, proc.stderr
    sb = sbx.Sandbox.load(name)
    try:
        assert sb.server == "mysql-9.7" and sb.flavor == Flavor.MYSQL and sb.state() == sbx.SandboxState.RUNNING
        model = inspect(sb.connection_spec())
        assert model.version.series == "9.7" and model.page_size == sbx.parse_page_size(page)
        assert model.redo_dir.endswith("#innodb_redo") and model.has_doublewrite_files
        v = _variables(sb)
        assert "mysqlx_port" not in v or v.get("mysqlx") in (None, "OFF")
        assert v["basedir"].startswith(str(mysql_9_7.root))
        proc = cli("sandbox", "stop", name)
        assert proc.returncode == 0 and sb.state() == sbx.SandboxState.STOPPED, proc.stderr
        assert "Shutdown complete" in sb.error_log.read_text()  # SQL SHUTDOWN: a clean shutdown
        assert cli("sandbox", "start", name).returncode == 0  # the page size is passed again at this start
        assert int(_variables(sb)["innodb_page_size"]) == sbx.parse_page_size(page)
    finally:
        proc = cli("sandbox", "destroy", name, "--force")
    assert proc.returncode == 0 and not sb.path.exists()


def test_page_size_other_than_the_datadirs_is_refused_at_start(server_sandbox):
    sb = server_sandbox("mysql-9.7")
    sb.stop()
    try:
        with pytest.raises(SandboxError, match="initialized with 16k pages.*innodb_page_size=8k"):
            sb.start(extra_args=["--innodb-page-size=8k"])
        assert sb.state() == sbx.SandboxState.STOPPED
    finally:
        sb.start()
    assert int(_variables(sb)["innodb_page_size"]) == 16384


@pytest.mark.parametrize("name", ["mysql-9.7", "mariadb-11.8"])
def test_killed_tree_server_is_crashed_and_recovers(name, server_sandbox):
    sb = server_sandbox(name)
    assert sb.state() == sbx.SandboxState.RUNNING  # the pid is recognized through the tree's loader
    sb.stop("kill")
    assert sb.state() == sbx.SandboxState.CRASHED
    with pytest.raises(SandboxError, match="--recover"):
        sb.start()
    sb.start(recover=True)
    assert sb.state() == sbx.SandboxState.RUNNING


def test_mariadb_11_8_sandbox(server_sandbox, mariadb_11_8):
    sb = server_sandbox("mariadb-11.8")
    model = inspect(sb.connection_spec())
    assert model.flavor == Flavor.MARIADB and model.version.series == "11.8"
    v = _variables(sb)
    for opt in ("innodb_data_file_buffering", "innodb_data_file_write_through", "innodb_log_file_buffering",
                "innodb_log_file_write_through"):
        assert opt in v
    assert v["lc_messages_dir"].startswith(str(mariadb_11_8.root))
    sb.stop()
    assert sb.state() == sbx.SandboxState.STOPPED
    sb.start()
