"""Every catalog row of the recorded series agrees with the real binary; lint knows MySQL 9.7 and MariaDB 11.8."""

from __future__ import annotations

import pytest

from profiles.catalog import load_catalog
from profiles.lint import lint_options
from profiles.recorded import RECORDED_SERIES, check_row, check_series, load_recording
from profiles.target import parse_target


@pytest.mark.parametrize("series", RECORDED_SERIES)
def test_every_row_agrees_with_the_recorded_binary(series):
    checked, problems = check_series(series)
    assert problems == []
    assert checked >= 25, f"only {checked} rows of {series} were compared"


def test_a_disagreeing_row_is_reported():
    """The check can fail: the 8.4 rows (the manual's) against the 9.7 binary disagree where 9.7 changed."""
    rec = load_recording("mysql-9.7")
    cat = load_catalog()
    old = cat.row("innodb_log_file_size", parse_target("mysql-8.4"))
    assert check_row(old, rec) == ["innodb_log_file_size: marked deprecated but the binary has no such option or variable"]
    cap = cat.row("innodb_redo_log_capacity", parse_target("mysql-8.4"))
    assert check_row(cap, rec) == ["innodb_redo_log_capacity: max 137438953472 in the catalog, 549755813888 on the binary"]


@pytest.mark.parametrize("target,option,status", [
    ("mysql-9.7", "innodb_log_file_size", "removed"),
    ("mysql-9.7", "innodb_log_files_in_group", "removed"),
    ("mysql-9.7", "innodb_redo_log_capacity", "active"),
    ("mysql-9.7", "innodb_doublewrite_dir", "active"),
    ("mysql-9.7", "innodb_flush_method", "active"),
    ("mariadb-11.8", "innodb_data_file_buffering", "active"),
    ("mariadb-11.8", "innodb_data_file_write_through", "active"),
    ("mariadb-11.8", "innodb_log_file_buffering", "active"),
    ("mariadb-11.8", "innodb_log_file_write_through", "active"),
    ("mariadb-11.8", "innodb_flush_method", "deprecated"),
])
def test_version_facts_of_the_new_series(target, option, status):
    assert load_catalog().row(option, parse_target(target)).status == status


def test_recorded_names_are_the_binaries():
    cat = load_catalog()
    my = cat.recorded_names(parse_target("mysql-9.7"))
    assert {"innodb_redo_log_capacity", "innodb_doublewrite_dir", "innodb_flush_method"} <= my
    assert "innodb_log_file_size" not in my and "innodb_log_files_in_group" not in my
    maria = cat.recorded_names(parse_target("mariadb-11.8"))
    assert {"innodb_data_file_buffering", "innodb_data_file_write_through", "innodb_log_file_buffering",
            "innodb_log_file_write_through"} <= maria


def _errors(options: dict[str, str], flavor: str) -> list:
    t = parse_target(flavor)
    return [f for f in lint_options(options, t.flavor, t.version) if f.severity == "error"]


def test_lint_knows_mysql_9_7():
    findings = lint_options({"innodb_log_file_size": "1G", "innodb_redo_log_capacity": "200G"},
                            *_target("mysql-9.7"))
    assert [(f.severity, f.option) for f in findings] == [("error", "innodb_log_file_size")]
    assert "innodb_redo_log_capacity" in findings[0].fix
    assert [f.option for f in _errors({"innodb_redo_log_capacity": "200G"}, "mysql-8.4")] == ["innodb_redo_log_capacity"]


def _target(flavor: str):
    t = parse_target(flavor)
    return t.flavor, t.version


def test_lint_knows_mariadb_11_8():
    opts = {"innodb_data_file_buffering": "OFF", "innodb_data_file_write_through": "OFF",
            "innodb_log_file_buffering": "OFF", "innodb_log_file_write_through": "ON"}
    assert _errors(opts, "mariadb-11.8") == []
    assert sorted(f.option for f in _errors(opts, "mariadb-10.11")) == [
        "innodb_data_file_buffering", "innodb_data_file_write_through", "innodb_log_file_write_through"]
