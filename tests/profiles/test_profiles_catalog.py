"""The catalog: every row names its source, rows agree with the recorded MariaDB 10.11 binary, facts per version."""

from __future__ import annotations

import json

import pytest

from profiles.catalog import CATALOG_DIR, load_catalog
from profiles.target import parse_target

REQUIRED_OPTIONS = ("innodb_page_size", "innodb_flush_method", "innodb_doublewrite", "innodb_buffer_pool_size",
                    "innodb_buffer_pool_instances", "innodb_log_file_size", "innodb_redo_log_capacity",
                    "innodb_doublewrite_dir", "innodb_doublewrite_files", "innodb_doublewrite_pages")
SERIES = ("mariadb-10.6", "mariadb-10.11", "mariadb-11.4", "mysql-5.7", "mysql-8.0", "mysql-8.4")


def test_every_row_names_its_source():
    for row in load_catalog().rows:
        assert row.source.startswith(("https://dev.mysql.com/doc/refman/", "https://mariadb.com/docs/")), row
        assert row.evidence in ("binary", "manual", "manual-cited"), row


def test_rows_of_one_option_do_not_overlap():
    cat = load_catalog()
    for option in cat.options():
        for fam in ("mariadb", "mysql"):
            rows = sorted(cat.rows_for(option, fam), key=lambda r: r.since)
            for a, b in zip(rows, rows[1:]):
                assert a.until is not None and a.until <= b.since, (option, fam, a.span(), b.span())


def test_required_options_are_covered_for_every_reference_series():
    cov = load_catalog().coverage()
    for option in REQUIRED_OPTIONS:
        assert option in cov
    for option in ("innodb_page_size", "innodb_flush_method", "innodb_doublewrite", "innodb_buffer_pool_size"):
        assert all(cov[option][s] != "-" for s in SERIES), (option, cov[option])


@pytest.mark.parametrize("target,option,status", [
    ("mysql-8.0.29", "innodb_redo_log_capacity", "removed"),
    ("mysql-8.0.30", "innodb_redo_log_capacity", "active"),
    ("mysql-8.0.30", "innodb_log_file_size", "deprecated"),
    ("mysql-8.0.19", "innodb_doublewrite_dir", None),
    ("mysql-8.0.20", "innodb_doublewrite_dir", "active"),
    ("mariadb-10.6", "innodb_buffer_pool_instances", "ignored"),
    ("mariadb-10.11", "innodb_flush_method", "active"),
    ("mariadb-11.4", "innodb_flush_method", "deprecated"),
    ("mariadb-11.4", "innodb_data_file_buffering", "active"),
    ("mariadb-10.11", "innodb_data_file_buffering", None),
    ("mariadb-10.11", "innodb_redo_log_capacity", "removed"),
])
def test_version_facts(target, option, status):
    row = load_catalog().row(option, parse_target(target))
    assert (row.status if row else None) == status


def test_doublewrite_values_per_version():
    cat = load_catalog()
    assert cat.row("innodb_doublewrite", parse_target("mysql-8.0.29")).type == "bool"
    assert set(cat.row("innodb_doublewrite", parse_target("mysql-8.0.30")).values) == {
        "ON", "OFF", "DETECT_AND_RECOVER", "DETECT_ONLY"}
    assert cat.row("innodb_doublewrite", parse_target("mariadb-10.11")).type == "bool"
    assert "fast" in cat.row("innodb_doublewrite", parse_target("mariadb-11.4")).values


def test_mariadb_10_11_rows_match_the_recorded_binary():
    """Rows marked `binary` for MariaDB 10.11 agree with information_schema.SYSTEM_VARIABLES of the real 10.11.19."""
    rec = json.loads((CATALOG_DIR / "recorded" / "mariadb-10.11-system-variables.json").read_text())
    real = {r["variable_name"].lower(): r for r in rec["rows"]}
    target = parse_target("mariadb-" + rec["version"].split("-")[0])  # mariadb-10.11.19
    checked = 0
    for row in load_catalog().rows:
        if row.flavor != "mariadb" or row.evidence != "binary" or not row.applies("mariadb", target.version):
            continue
        if row.status in ("removed", "ignored"):
            assert row.option not in real, f"{row.option} is a variable on the real 10.11 but marked {row.status}"
            continue
        v = real[row.option]
        if row.min is not None:
            assert int(v["numeric_min_value"]) == row.min, row.option
        if row.max is not None:
            assert int(v["numeric_max_value"]) == row.max, row.option
        if row.values and row.type == "enum" and v["enum_value_list"]:
            assert {x.lower() for x in row.values} == {x.lower() for x in v["enum_value_list"].split(",")}, row.option
        elif row.option == "innodb_page_size":  # numeric on the server, an enum of byte values in the catalog
            assert (int(v["numeric_min_value"]), int(v["numeric_max_value"])) == (4096, 65536)
        if row.default_normalized() is not None and row.type != "enum":
            assert row.default_normalized() == row.normalize(v["default_value"]), row.option
        read_only = v["read_only"] == "YES"
        assert read_only == (row.change in ("restart", "init")), row.option
        checked += 1
    assert checked >= 10


def test_recorded_option_names_reject_what_the_binary_rejects():
    names = load_catalog().recorded_names(parse_target("mariadb-10.11"))
    assert "innodb_flush_method" in names and "innodb_log_file_mmap" in names
    assert "innodb_redo_log_capacity" not in names and "innodb_data_file_buffering" not in names


def test_profile_catalog_shows_sources_short_wide_json_and_whole(cli):
    default = cli("profile", "catalog", check=True, env={"COLUMNS": "200"}).stdout
    assert "sources" in default and "MySQL 8.0 innodb-parameters" in default and "MariaDB docs" in default
    assert "https://" not in default
    wide = cli("profile", "catalog", "--wide", check=True, env={"COLUMNS": "250"}).stdout
    assert "https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_page_size" in wide
    data = json.loads(cli("profile", "catalog", "--json", check=True).stdout)
    assert all(row["sources"] and all(u.startswith("https://") for u in row["sources"])
               for row in data["options"].values())
    one = cli("profile", "catalog", "--option", "innodb_page_size", check=True, env={"COLUMNS": "80"}).stdout
    assert "…" not in one and "..." not in one
    assert "https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_page_size" in one.splitlines()[-2] + one.splitlines()[-1]
