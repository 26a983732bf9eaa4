"""A sweep with a `server` axis on real servers: MariaDB 11.8 and MySQL 9.7 cells, each on its own golden copy."""

from __future__ import annotations

import pytest

SPEC = """
name: servers-e2e
workload: {driver: builtin, mode: procedures, warehouses: 1, warmup: 2, duration: 8, interval: 4}
repeats: 1
tiers:
  disk: {kind: home}
fixed: {page_size: 8k, clients: 2, buffer_pool_size: 128M, doublewrite: "ON"}
axes:
  server: [mariadb-11.8, mysql-9.7]
"""


def test_server_axis_is_validated(tmp_path):
    from tuner.core.errors import SweepError
    from tuner.sweep.spec import parse_spec

    import yaml

    doc = yaml.safe_load(SPEC)
    doc["axes"]["server"] = ["mariadb-11.8", "mysql-8.0"]
    with pytest.raises(SweepError, match="unknown server 'mysql-8.0'; use one of mariadb-10.11, mariadb-11.8, mysql-9.7"):
        parse_spec(doc)


@pytest.mark.slow
def test_sweep_over_servers(tmp_path, installed_server, cli, innotier_home):
    for server in ("mariadb-11.8", "mysql-9.7"):
        installed_server(server)
    spec = tmp_path / "servers-e2e.yaml"
    spec.write_text(SPEC)
    plan = cli("sweep", "plan", str(spec), check=True).stdout
    assert "mariadb 11.8" in plan and "mysql 9.7" in plan and plan.count("will be loaded once") == 2
    cli("sweep", "run", str(spec), "--no-metrics", check=True, timeout=900)

    from tuner.sweep.results import ResultsStore
    from tuner.sweep.spec import load_spec

    run_id = load_spec(str(spec)).run_id
    with ResultsStore() as store:
        cells = store.cells(run_id)
        assert [c.settings["server"] for c in cells] == ["mariadb-11.8", "mysql-9.7"]
        assert [c.status for c in cells] == ["ok", "ok"]
        assert cells[0].server_version.startswith("11.8.") and cells[1].server_version.startswith("9.7.")
        for c in cells:
            assert c.check_ok is True and c.tpmc > 0
            assert c.variables["innodb_page_size"] == "8192" and c.variables["innodb_doublewrite"] == "ON"
            assert set(c.environment["servers"]) == {"mariadb-11.8", "mysql-9.7"}
