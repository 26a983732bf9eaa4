"""MySQL general tablespaces named by the tables in them (pure; the query itself runs on a real MySQL 9.7 in
tests/servers/test_server_placement.py)."""

from __future__ import annotations

from tuner.core.server import model_from_variables
from tuner.placement import objects, spaces

MYSQL = model_from_variables({"version": "9.7.4", "datadir": "/d", "tmpdir": "/t", "innodb_page_size": "16384"})


def test_rows_as_the_server_reports_them_become_absolute_files_and_tables():
    rows = [(b"./ts1.ibd", b"tpcc/history"), ("/tier/innotier_tpcc_stock.ibd", "tpcc/stock"),
            ("./ts1.ibd", "tpcc/orders"), ("./mysql.ibd", "mysql/user"), ("./mysql.ibd", "mysql/db")]
    assert spaces.owners_from_rows(rows, "/d") == {"/d/ts1.ibd": ("tpcc.history", "tpcc.orders"),
                                                   "/tier/innotier_tpcc_stock.ibd": ("tpcc.stock",)}


def test_a_general_tablespace_is_the_candidate_of_its_tables():
    owners = {"/tier/innotier_tpcc_stock.ibd": ("tpcc.stock",), "/d/ts1.ibd": ("tpcc.history", "tpcc.orders")}
    # without the owners, the path misnames the first (schema "tier") and drops the second (a file in the datadir)
    assert objects.classify("/tier/innotier_tpcc_stock.ibd", MYSQL) == ("tier.innotier_tpcc_stock", "table",
                                                                       "tier.innotier_tpcc_stock")
    assert objects.classify("/d/ts1.ibd", MYSQL) is None
    assert objects.classify("/tier/innotier_tpcc_stock.ibd", MYSQL, owners) == ("tpcc.stock", "table", "tpcc.stock")
    assert objects.classify("/d/ts1.ibd", MYSQL, owners) == (
        "tablespace ts1", "table", "general tablespace ts1 (tpcc.history, tpcc.orders)")
    # components and file-per-table files are named as before
    assert objects.classify("/d/#innodb_redo/#ib_redo9", MYSQL, owners)[1] == "redo"
    assert objects.classify("/d/tpcc/item.ibd", MYSQL, owners)[0] == "tpcc.item"
    cands, other = objects.candidates(["/d/ts1.ibd", "/d/mysql.ibd"], MYSQL, {}, {"tablespace ts1": 5}, owners)
    assert [(c.key, c.files) for c in cands if c.kind == "table"] == [("tablespace ts1", ("/d/ts1.ibd",))]
    assert other == ["/d/mysql.ibd"]
