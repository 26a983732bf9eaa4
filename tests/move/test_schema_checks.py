"""The mover's post-move schema checks are a registry; the application registers the TPC-C check."""

from __future__ import annotations

import pytest

from datadir_mover.move.server_check import ServerCheck, schema_checks as checks
from tuner.cli import build_parser
from tuner.core.server import ConnectionSpec


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(checks, "_CHECKS", {})
    return checks


def test_cli_start_up_registers_the_tpcc_check(registry):
    assert registry.registered() == []
    build_parser()
    assert [c.name for c in registry.registered()] == ["tpcc"]


def test_every_detected_schema_is_checked_and_failures_fail_the_move(registry):
    seen = []
    registry.register_schema_check("demo", lambda spec: ["a", "b"],
                                   lambda spec, schema: seen.append((spec.database, schema)) or
                                   ("ok" if schema == "a" else "failed: clause 3.3.2.1"))
    results = registry.run_schema_checks(ConnectionSpec(socket="/nonexistent.sock"))
    assert results == {"demo": {"a": "ok", "b": "failed: clause 3.3.2.1"}}
    assert seen == [("a", "a"), ("b", "b")]  # each check runs against its own schema
    check = ServerCheck(True, "/d", 3, [], results)
    assert not check.ok and check.failed_schema_checks() == {"demo:b": "failed: clause 3.3.2.1"}
    assert check.to_dict()["demo"] == {"a": "ok", "b": "failed: clause 3.3.2.1"}
    assert ServerCheck(True, "/d", 3, [], {"demo": {"a": "ok"}}).ok


@pytest.mark.parametrize("name", ["ok", "tables", "not a name"])
def test_a_check_cannot_shadow_a_result_key(registry, name):
    with pytest.raises(ValueError, match="schema check name"):
        registry.register_schema_check(name, lambda spec: [], lambda spec, schema: "ok")


def test_every_key_of_the_verification_result_is_reserved():
    keys = set(ServerCheck(True, "/d", 3, [], {"demo": {"a": "ok"}}).to_dict()) - {"demo"}
    assert keys <= checks.RESERVED_NAMES, keys - checks.RESERVED_NAMES
