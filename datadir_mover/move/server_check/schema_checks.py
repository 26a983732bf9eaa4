"""Post-move schema checks: a registry the layers above fill in.

The mover verifies every move with table checksums and the locations the server
reports.  Workloads that know more about their own schema (the TPC-C package:
its consistency conditions) register a check here at start-up; the mover runs
every registered check on every schema the check's ``detect`` finds, and knows
nothing else about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tuner.core.server import ConnectionSpec


@dataclass(frozen=True)
class SchemaCheck:
    name: str                                      # key in the verification result, e.g. "tpcc"
    detect: Callable[[ConnectionSpec], list[str]]  # schemas on the server this check applies to
    run: Callable[[ConnectionSpec, str], str]      # "ok" or "failed: <what>" for one schema


_CHECKS: dict[str, SchemaCheck] = {}
# keys of the verification result (``server_check.ServerCheck.to_dict``) a check's name may not take
RESERVED_NAMES = frozenset({"locations_ok", "location", "tables", "checksum_problems", "ok", "mode",
                            "changed_since_start", "row_writes_since_start", "changed_at_stop",
                            "commits_waiting_at_stop", "file_proof", "pending_proof", "seconds"})


def register_schema_check(name: str, detect: Callable[[ConnectionSpec], list[str]],
                          run: Callable[[ConnectionSpec, str], str]) -> None:
    """Add (or replace) the check called ``name``."""
    if not name.isidentifier() or name in RESERVED_NAMES:
        raise ValueError(f"schema check name {name!r} must be an identifier and not one of {sorted(RESERVED_NAMES)}")
    _CHECKS[name] = SchemaCheck(name, detect, run)


def registered() -> list[SchemaCheck]:
    return list(_CHECKS.values())


def run_schema_checks(spec: ConnectionSpec) -> dict[str, dict[str, str]]:
    """check name -> {schema: "ok" / "failed: ..."} for every registered check."""
    return {check.name: {schema: check.run(spec.with_database(schema), schema) for schema in check.detect(spec)}
            for check in registered()}
