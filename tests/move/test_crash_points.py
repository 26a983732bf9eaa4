"""Fault injection: SIGKILL the real `innotier move apply` at each journal step, then resume or roll back.

The mover kills itself right after the chosen journal record is durable
(``INNOTIER_MOVE_CRASH_AT=STATE:event``; ``mid`` = after the step's first unit of work),
which is what a power cut or an OOM kill looks like to the journal.  After
``move resume`` or ``move rollback`` the server must run on the location the journal says,
every table's checksum must equal the value from before the move, and the consistency
checks must pass.  The datadir moves (with the online pre-copy) between the sandbox's
directory and a real tmpfs, so every state has real work to interrupt.
"""

from __future__ import annotations

import json
import os

import pytest

import mvhelpers

# (crash point, what to do after it).  Every journal state is interrupted at least once; the states
# whose interruption leaves different things behind (pre-copy half done, checksums taken but the
# server still up, files half copied, option file switched but not the sandbox record, server
# started on the new files) are tried with both resume and rollback.
CRASH_POINTS = [
    ("PLAN:done", "rollback"),
    ("PRECOPY:mid", "rollback"),
    ("SHUTDOWN:mid", "resume"),
    ("SHUTDOWN:done", "rollback"),
    ("COPY:mid", "resume"),
    ("COPY:mid", "rollback"),
    ("VERIFY:begin", "resume"),
    ("SWITCH:mid", "rollback"),
    ("SWITCH:mid", "resume"),
    ("START:done", "rollback"),
    ("VERIFY_SERVER:begin", "resume"),
    ("COMMIT:done", "resume"),
]
# every begin/done/mid record (23 points, about three times as long): INNOTIER_TEST_ALL_CRASH_POINTS=1
ALL_CRASH_POINTS = [
    ("PLAN:done", "rollback"), ("PRECOPY:begin", "resume"), ("PRECOPY:mid", "resume"), ("PRECOPY:mid", "rollback"),
    ("PRECOPY:done", "rollback"), ("SHUTDOWN:begin", "resume"), ("SHUTDOWN:mid", "rollback"),
    ("SHUTDOWN:mid", "resume"), ("SHUTDOWN:done", "resume"), ("COPY:begin", "rollback"), ("COPY:mid", "resume"),
    ("COPY:mid", "rollback"), ("COPY:done", "resume"), ("VERIFY:begin", "rollback"), ("VERIFY:done", "resume"),
    ("SWITCH:begin", "resume"), ("SWITCH:mid", "rollback"), ("SWITCH:mid", "resume"), ("SWITCH:done", "rollback"),
    ("START:begin", "resume"), ("START:done", "rollback"), ("START:done", "resume"),
    ("VERIFY_SERVER:begin", "rollback"), ("VERIFY_SERVER:done", "resume"), ("COMMIT:begin", "resume"),
    ("COMMIT:done", "resume"),
]
# points after which the server has accepted connections on the target (rollback needs the explicit flag)
AFTER_START = {"START:done", "VERIFY_SERVER:begin", "VERIFY_SERVER:done", "COMMIT:begin", "COMMIT:done"}
if os.environ.get("INNOTIER_TEST_ALL_CRASH_POINTS") == "1":
    CRASH_POINTS = ALL_CRASH_POINTS


@pytest.fixture(scope="module")
def crash_box(golden, mv_tiers):
    sb = mvhelpers.clone_sandbox("mv-crash")
    spec = sb.connection_spec()
    state = {"sb": sb, "spec": spec, "before": mvhelpers.checksums(spec), "home": sb.datadir,
             "flush": mvhelpers.flush_settings(spec),
             "tier": os.path.join(mv_tiers["tmpfs"], "crash"), "n": 0, "tried": []}
    yield state
    from tuner.core.sandbox import Sandbox

    print(f"\ncrash points tried: {len(state['tried'])} ({', '.join(state['tried'])})")
    Sandbox.load("mv-crash").destroy(force=True)


def _datadir(spec) -> str:
    from tuner.core.server import inspect

    return inspect(spec).datadir


def _open_move_id() -> str:
    from datadir_mover.move.journal import all_journals

    mine = [j for j in all_journals() if j.plan()["server_key"] == "sandbox:mv-crash" and j.phase in ("open", "committed")]
    assert len(mine) == 1, [j.dir.name for j in mine]
    return mine[0].dir.name


def _phase(move_id: str) -> str:
    from datadir_mover.move.journal import Journal, moves_dir

    return Journal(moves_dir() / move_id).phase


def _finalize(move_id: str):  # the FinalizeRecord
    from datadir_mover.move.executor import Executor
    from datadir_mover.move.journal import Journal, moves_dir

    from datadir_mover.move.proof import Proof

    journal = Journal(moves_dir() / move_id)
    result = Executor.open(journal).finalize(accept_volatile=True)  # the tier is tmpfs: no persistence here
    assert Proof.load(journal).status == "passed"  # finalize refuses unless the proof passed
    return result


@pytest.mark.root
@pytest.mark.parametrize("point,action", CRASH_POINTS, ids=[f"{p}-{a}" for p, a in CRASH_POINTS])
def test_kill_mover_then_recover(point, action, crash_box, cli):
    sb, spec = crash_box["sb"], crash_box["spec"]
    here = _datadir(spec)
    crash_box["n"] += 1
    target = (os.path.join(crash_box["tier"], f"d{crash_box['n']}") if here == crash_box["home"]
              else crash_box["home"])
    os.makedirs(crash_box["tier"], exist_ok=True)

    proc = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--precopy", "--yes",
               env={"INNOTIER_MOVE_CRASH_AT": point})
    assert proc.returncode == -9, f"the mover was to be killed at {point}:\n{proc.stdout}\n{proc.stderr}"
    crash_box["tried"].append(f"{point}/{action}")
    move_id = _open_move_id()

    if point == "COMMIT:done":
        r = cli("move", "resume", "--id", move_id)
        assert r.returncode != 0 and "committed" in r.stderr  # nothing left to resume
        expected = target
    else:
        after_start = point in AFTER_START
        if action == "rollback" and after_start:
            # the server accepted connections on the target: rollback refuses without the explicit flag
            refused = cli("move", "rollback", "--id", move_id, "--yes")
            assert refused.returncode != 0 and "--discard-writes-since-start" in refused.stderr, refused.stderr
            assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        r = cli("move", action, "--id", move_id, "--json",
                *(["--yes"] if action == "rollback" else []),
                *(["--discard-writes-since-start"] if action == "rollback" and after_start else []))
        assert r.returncode == 0, f"{action} after a crash at {point} failed:\n{r.stdout}\n{r.stderr}"
        expected = target if action == "resume" else here
        out = json.loads(r.stdout)
        check = out["verify_server"] if action == "resume" else out["check"]
        assert check["ok"] and check["locations_ok"], check
        if check.get("mode") == "sample" and check["tables"]:
            # the default verification compared every table's sample (no client writes here: nothing excused)
            assert not check["checksum_problems"] and not check["changed_since_start"], check

    assert sb.state().value == "running"
    assert os.path.realpath(_datadir(spec)) == os.path.realpath(expected)
    assert mvhelpers.checksums(spec) == crash_box["before"], f"table contents changed after {point} + {action}"
    assert mvhelpers.flush_settings(spec) == crash_box["flush"], \
        f"the pre-flush settings stayed after {point} + {action}"
    if point == "COMMIT:done":
        mvhelpers.data_consistent(spec)
    assert _phase(move_id) == ("rolled_back" if expected == here else "committed")
    if expected == target:
        assert not _finalize(move_id).kept
        assert not os.path.exists(here), "finalize left the old datadir behind"


@pytest.mark.root
def test_kill_inside_finalize_then_finalize_again(crash_box, cli):
    sb, spec = crash_box["sb"], crash_box["spec"]
    here = _datadir(spec)
    target = os.path.join(crash_box["tier"], "fin") if here == crash_box["home"] else crash_box["home"]
    r = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    move_id = json.loads(r.stdout)["move_id"]
    k = cli("move", "finalize", "--id", move_id, "--yes", "--i-accept-volatile",
            env={"INNOTIER_MOVE_CRASH_AT": "FINALIZE:mid"})
    assert k.returncode == -9
    crash_box["tried"].append("FINALIZE:mid/finalize")
    assert os.path.isdir(here) and os.listdir(here), "the kill came after the first removal: files remain"
    again = cli("move", "finalize", "--id", move_id, "--yes", "--i-accept-volatile")
    assert again.returncode == 0, again.stderr
    assert not os.path.exists(here)
    assert mvhelpers.checksums(spec) == crash_box["before"]
    assert os.path.realpath(_datadir(spec)) == os.path.realpath(target)
