"""Finding one journaled operation (datadir_mover.journal_lookup, used by `table-move resume|back|status`):
by id, or as the only one in the phases asked for, on real journal directories in a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadir_mover import journal_lookup
from tuner.core.errors import MoveError


class Op:
    """A journal as the lookup sees it: a directory, and a phase and a table read from its plan."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.plan = json.loads((directory / "plan.json").read_text())


def make(root: Path, name: str, phase: str, table: str = "s.t") -> None:
    (root / name).mkdir(parents=True)
    (root / name / "plan.json").write_text(json.dumps({"phase": phase, "table": table}))


def lookup(root: Path, move_id=None, phases=("open",), table=None) -> Op:
    return journal_lookup.find(root, move_id, phases, open_journal=Op, phase_of=lambda j: j.plan["phase"],
                               noun="table move", status_command="innotier table-move status",
                               keep=None if table is None else (lambda j: j.plan["table"] == table),
                               of=f" for {table}" if table else "")


def test_newest_first_and_only_directories_with_a_plan(tmp_path):
    make(tmp_path, "20261201T000000-a", "open")
    make(tmp_path, "20261202T000000-b", "committed")
    (tmp_path / "20261203T000000-torn").mkdir()            # a move that never wrote its plan
    assert [j.dir.name for j in journal_lookup.journals_in(tmp_path, Op)] == ["20261202T000000-b",
                                                                                "20261201T000000-a"]
    assert journal_lookup.journals_in(tmp_path / "none", Op) == []


def test_the_only_one_in_the_phases_and_refusals_naming_the_fix(tmp_path):
    with pytest.raises(MoveError, match=r"^no table move is open; see `innotier table-move status`$"):
        lookup(tmp_path)
    make(tmp_path, "1-a", "open", "s.a")
    make(tmp_path, "2-b", "committed", "s.b")
    assert lookup(tmp_path).dir.name == "1-a"
    assert lookup(tmp_path, phases=("open", "committed"), table="s.b").dir.name == "2-b"
    with pytest.raises(MoveError, match=r"^2 table moves are open or committed \(2-b, 1-a\); name one with --id$"):
        lookup(tmp_path, phases=("open", "committed"))
    with pytest.raises(MoveError, match=r"^no table move for s.c is rolled back; see"):
        lookup(tmp_path, phases=("rolled_back",), table="s.c")


def test_an_id_must_exist_and_the_refusal_lists_the_known_ones(tmp_path):
    make(tmp_path, "1-a", "rolled_back")
    assert lookup(tmp_path, "1-a").dir.name == "1-a"        # by id, whatever its phase
    with pytest.raises(MoveError, match=r"^no table move 'x' \(known: 1-a\); see `innotier table-move status`$"):
        lookup(tmp_path, "x")
