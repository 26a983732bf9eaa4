"""TPC-C on the real MySQL 9.7 and MariaDB 11.8: W=1 load, 20 s runs in both modes, consistency checks pass."""

from __future__ import annotations

import json

import pytest

SERVERS = ("mysql-9.7", "mariadb-11.8")


@pytest.mark.slow
@pytest.mark.parametrize("server", SERVERS)
def test_load_run_both_modes_and_check(server, server_sandbox, cli):
    sb = server_sandbox(server)
    proc = cli("tpcc", "load", "--sandbox", sb.name, "--warehouses", "1")
    assert proc.returncode == 0, proc.stderr
    for mode in ("procedures", "statements"):
        proc = cli("tpcc", "run", "--sandbox", sb.name, "--clients", "4", "--warmup", "2", "--duration", "20",
                   "--mode", mode, "--json")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["errors"] == 0, (server, mode, result.get("error_messages"))
        assert result["counts"]["new_order"]["commit"] > 0
        proc = cli("tpcc", "check", "--sandbox", sb.name)
        assert proc.returncode == 0 and "all checks passed" in proc.stdout, proc.stdout + proc.stderr
