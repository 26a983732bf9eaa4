"""Each step's typed record writes the journal line the step wrote before it had one, byte for byte.

``JOURNALED`` holds, state by state, the ``done`` data the steps of innotier 976ba3b (the last mover whose steps
returned dicts) wrote, one entry for each shape a step could write (a field written only sometimes, a null, a
skipped pre-copy, an older record's missing field).  Each is appended as that mover appended it (``Journal``'s
own ``_append``: sorted keys), read back by the journal reader, turned into its record and journaled again: the
two lines must be the same bytes but for the time.  So an older mover's journal resumes under this one, and a
journal this one writes resumes under the older one.
"""

from __future__ import annotations

import json
import re

import pytest

from datadir_mover.move.executor import HANDLERS, MoveSummary
from datadir_mover.move.journal import Journal
from datadir_mover.move.server_check import ServerCheck
from datadir_mover.move.step_records import (RECORDS, CopyRecord, LastPass, PassRecord, PrecopyRecord,
                                             ShutdownRecord, StartRecord, VerifyServerRecord)

T = 1764650000.123456
PASS_1 = {"pass": 1, "began_at": T, "seconds": 2.345, "files_changed": 120, "files_delta": 0,
          "bytes_written": 104857600, "files_unchanged": 0}
PASS_2 = {"pass": 2, "began_at": T + 3, "seconds": 0.412, "files_changed": 4, "files_delta": 3,
          "bytes_written": 262144, "files_unchanged": 116}
FLUSH = {"seconds": 0.81, "dirty_before": 5120, "dirty_after": 12, "page_size": 16384, "why": "clean enough"}
WAITING = {"commits_waiting_at_stop": 1,
           "waiting_commits": [{"thread": 42, "trx": "1234", "rows_modified": 3, "tables_locked": 2,
                                "tables": ["tpcc.stock"]}]}
CHECK = {"locations_ok": True, "location": "/mnt/t/datadir", "tables": 9, "checksum_problems": [],
         "tpcc": {"tpcc": "ok"}, "mode": "tables", "changed_since_start": [], "row_writes_since_start": 0,
         "changed_at_stop": ["tpcc.stock"], "commits_waiting_at_stop": 1, "file_proof": "read back",
         "pending_proof": False, "seconds": 1.234, "ok": True}

JOURNALED = {
    "PLAN": [{}],
    "PRECOPY": [
        {"skipped": True},
        {"passes": [PASS_1, PASS_2], "files": 120, "bytes": 104857600, "seconds": 2.757,
         "preflush": {**FLUSH, "settings_restored": True}, "expected_copy_s": 0.4, "expected_downtime_s": 3.2},
        {"passes": [PASS_1], "files": 120, "bytes": 104857600, "seconds": 2.345, "preflush": None,
         "expected_copy_s": 1.0, "expected_downtime_s": 4.1},
        {"passes": [PASS_1], "files": 120, "bytes": 104857600, "seconds": 2.345,
         "preflush": {"skipped": "could not connect"}, "expected_copy_s": 1.0, "expected_downtime_s": 4.1},
    ],
    "SHUTDOWN": [
        {"stop_began_at": T, "stopped_at": T, "note": "the server was already stopped: no table checksums from "
                                                      "before the move"},
        {"stop_began_at": T + 1, "preflush": FLUSH, "stopped_at": T + 4},
        {"stop_began_at": T + 1, "preflush": FLUSH, "read_lock_at": T, "tables": 9, "read_seconds": 0.2,
         **WAITING, "stopped_at": T + 4},
        {"stop_began_at": T + 1, "preflush": FLUSH, "read_lock_at": T, "tables": 9, "read_seconds": 0.2,
         "last_pass": {"flush": FLUSH, "pass": {**PASS_2, "pass": 3}, "seconds": 1.2},
         "flush_settings_restored": True, **WAITING, "stopped_at": T + 4},
        {"stop_began_at": T + 1, "preflush": {"skipped": "no connection"}, "read_lock_at": T, "tables": 9,
         "read_seconds": 0.2, "last_pass": {"skipped": "the sample under the block used the --max-write-block "
                                                       "of 0 s"},
         "flush_settings_restored": None, "commits_waiting_at_stop": -1, "waiting_commits": [], "stopped_at": T + 4},
        {"stop_began_at": T + 1, "preflush": FLUSH, "read_lock_at": T, "tables": 9, "read_seconds": 0.2,
         "last_pass": {**FLUSH, "skipped": "a pass takes about 2.3 s, more than the 0.4 s left of the "
                                           "--max-write-block"},
         "flush_settings_restored": False, **WAITING, "stopped_at": T + 4},
        {"stop_began_at": T + 1, "preflush": FLUSH, "read_lock_at": T,
         "block": "not obtained within lock_wait_timeout=5 s (a long statement held a lock): plain stop, no "
                  "sample before it", "stopped_at": T + 4},
    ],
    "COPY": [
        {"files": 0, "bytes": 0},
        {"files": 4, "bytes": 262144, "files_delta": 3, "bytes_read": 1048576,
         "files_unchanged_since_precopy": 116, "bytes_unchanged_since_precopy": 104595456, "seconds": 0.321},
    ],
    "VERIFY": [{"files": 120, "seconds": 0.05, "proof": "passed"}, {"files": 120, "seconds": 0.05,
                                                                    "proof": "pending"}],
    "SWITCH": [{"placement_file": "/s/conf.d/50-innotier-placement.cnf", "unit_dropin": None},
               {"placement_file": "/etc/mysql/conf.d/50-innotier-placement.cnf",
                "unit_dropin": "/etc/systemd/system/mariadb.service.d/50-innotier-move.conf"}],
    "START": [{"started_at": T + 6, "start_seconds": 1.234},
              {"started_at": T + 6, "start_seconds": 1.234, "target_files_checked": 120,
               "target_files_read_again": 0},
              {"started_at": T + 6, "start_seconds": 0.0}],
    "VERIFY_SERVER": [CHECK, {**CHECK, "tpcc": {"tpcc": "failed: clause 3.3.2.1"}, "ok": False},
                      {**{k: v for k, v in CHECK.items() if k != "tpcc"}, "mode": "sample", "location": None}],
    "COMMIT": [{"downtime_s": 5.1, "until_verified_s": 6.0, "writes_blocked_s": 5.3,
                "downtime_breakdown": {"stop_s": 1.0, "copy_s": 0.3, "start_s": 1.2, "other_s": 0.1}}, {}],
    "ROLLBACK": [{"removed": 12, "started": True, "check": CHECK}, {"removed": 0, "started": False, "check": {}}],
    "CLOSE": [{"removed": 3}],
    "FINALIZE": [{"removed": 121, "kept": []}, {"removed": 120, "kept": ["tpcc/stock.ibd", "old/"]}],
}
CASES = [(state, i, data) for state, shapes in JOURNALED.items() for i, data in enumerate(shapes)]


def _line_as_976ba3b_wrote_it(state: str, data: dict) -> str:
    return json.dumps({"state": state, "event": "done", "at": T, **data}, sort_keys=True, default=str)


def _without_time(line: str) -> str:
    return re.sub(r'^\{"at": [0-9.e+-]+, ', '{"at": T, ', line)


@pytest.mark.parametrize("state,i,data", CASES, ids=[f"{s}-{i}" for s, i, _ in CASES])
def test_a_record_journals_the_line_the_step_wrote_before(tmp_path, state, i, data):
    old = Journal(tmp_path / "old")
    old.dir.mkdir()
    old.path.write_text(_line_as_976ba3b_wrote_it(state, data) + "\n")
    record = RECORDS[state].of(old)  # the journal reader, unchanged, then the record
    new = Journal(tmp_path / "new")
    new.dir.mkdir()
    new.finish(state, **record.to_journal())
    assert _without_time(new.path.read_text()) == _without_time(old.path.read_text())


def test_every_step_returns_its_states_record():
    for state, handler in HANDLERS.items():
        assert handler.__annotations__["return"] == RECORDS[state].__name__, state


def test_records_name_what_the_steps_did():
    shutdown = ShutdownRecord.from_journal(JOURNALED["SHUTDOWN"][3])
    assert shutdown.last_pass == LastPass(FLUSH, True, pass_record=PassRecord.from_journal({**PASS_2, "pass": 3}),
                                          seconds=1.2)
    assert shutdown.last_pass.pass_record.number == 3 and shutdown.commits_at_stop().count == 1
    assert shutdown.commits_at_stop().commits[0].tables == ["tpcc.stock"]
    assert ShutdownRecord.from_journal(JOURNALED["SHUTDOWN"][6]).commits_at_stop().count == 0  # block not held
    assert ShutdownRecord.from_journal(JOURNALED["SHUTDOWN"][4]).commits_at_stop().count == -1  # unknown
    precopy = PrecopyRecord.from_journal(JOURNALED["PRECOPY"][1])
    assert [p.seconds for p in precopy.passes] == [2.345, 0.412] and precopy.preflush["settings_restored"]
    assert PrecopyRecord.from_journal({"skipped": True}).passes == ()
    assert CopyRecord.from_journal(JOURNALED["COPY"][0]).files_delta is None
    check = VerifyServerRecord.from_journal(CHECK)
    assert check.schema_checks == {"tpcc": {"tpcc": "ok"}} and check.changed_at_stop == ("tpcc.stock",)
    # an older mover's record without a field, or a state not done: the defaults
    assert StartRecord.from_journal({"started_at": T}) == StartRecord(started_at=T)
    assert ShutdownRecord.from_journal({}) == ShutdownRecord()


def test_the_post_start_checks_record_is_the_checks_own_dict():
    check = ServerCheck(True, "/d", 3, ["a.t: 1 -> 2"], {"tpcc": {"tpcc": "ok"}}, mode="sample",
                        changed_since_start=["a.u"], row_writes_since_start=4, seconds=0.12345)
    assert VerifyServerRecord.of_check(check).to_journal() == check.to_dict()


def test_the_summary_prints_what_it_printed_from_the_journal(tmp_path):
    """`move apply --json`: the summary's step fields are the steps' journal data, as when it copied them."""
    summary = MoveSummary("m1", "datadir", "/a", "/b", "committed", "committed: ...",
                          PrecopyRecord.from_journal(JOURNALED["PRECOPY"][1]),
                          CopyRecord.from_journal(JOURNALED["COPY"][1]),
                          VerifyServerRecord.from_journal(CHECK),
                          RECORDS["COMMIT"].from_journal(JOURNALED["COMMIT"][0]))
    assert summary.to_dict() == {"move_id": "m1", "component": "datadir", "from": "/a", "to": "/b",
                                 "phase": "committed", "state": "committed: ...", "copy": JOURNALED["COPY"][1],
                                 "precopy": JOURNALED["PRECOPY"][1], "verify_server": CHECK,
                                 **JOURNALED["COMMIT"][0]}
