"""The same set of files on both sides: what the source no longer has does not come back, and an extra is named.

Faults injected on a real sandbox and real tiers:

- the mover SIGKILLed during its pre-copy once its first pass put every file in the target (the
  ``PRECOPY:pass`` crash point: nothing of the pass journaled), then two tables dropped on the
  running source (one MyISAM, one InnoDB): ``move resume`` starts the pre-copy over and must
  remove their copies from the target, and the proof must pass;
- a file planted in the target between COPY and VERIFY (the mover killed at ``COPY:done``): the
  proof, which compares the file lists both ways with the target's list taken at the switch, must
  name it and fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import mvhelpers
from sqlhelpers import execute

CRASH = "INNOTIER_MOVE_CRASH_AT"
DROPPED = ["a_old/gone.MYD", "a_old/gone.MYI", "a_old/gone.frm", "a_old/gone2.frm", "a_old/gone2.ibd"]


def _open_move(sandbox: str) -> str:
    from datadir_mover.move.journal import all_journals

    mine = [j for j in all_journals() if j.plan()["server_key"] == f"sandbox:{sandbox}" and j.phase == "open"]
    assert len(mine) == 1, [j.dir.name for j in mine]
    return mine[0].dir.name


@pytest.mark.root
def test_tables_dropped_while_a_precopy_was_interrupted_stay_dropped_and_an_extra_is_named(clone, mv_tiers, cli):
    from tuner.core.server import inspect

    sb = clone("recfs-drop")
    spec = sb.connection_spec()
    execute(spec, "CREATE DATABASE a_old",  # sorts first: copied in the first files of the pass
            "CREATE TABLE a_old.gone (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MyISAM",
            "INSERT INTO a_old.gone VALUES (1, 'myisam'), (2, 'rows')",
            "CREATE TABLE a_old.gone2 (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
            "INSERT INTO a_old.gone2 VALUES (1, 'innodb'), (2, 'rows')")
    home = inspect(spec).datadir
    target = os.path.join(mv_tiers["tmpfs"], "recfs-drop")

    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--precopy", "--yes",
                 env={CRASH: "PRECOPY:pass"})
    assert killed.returncode == -9, f"the mover was to be killed after its first pass:\n{killed.stderr}"
    assert all(Path(target, rel).exists() for rel in DROPPED), "the pre-copy had not copied the tables"
    execute(spec, "DROP TABLE a_old.gone", "DROP TABLE a_old.gone2")  # on the running source, the move waiting
    assert not any(Path(home, rel).exists() for rel in DROPPED)
    before = mvhelpers.checksums(spec)

    move_id = _open_move(sb.name)
    resumed = cli("move", "resume", "--id", move_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["phase"] == "committed"
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(target)
    came_back = [rel for rel in DROPPED if os.path.lexists(os.path.join(target, rel))]
    assert not came_back, f"dropped tables came back with the resumed move: {came_back}"
    assert execute(spec, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'a_old'") == [(0,)]
    assert mvhelpers.checksums(spec) == before
    verified = cli("move", "verify", "--id", move_id, "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["status"] == "passed", verified.stdout
    done = cli("move", "finalize", "--id", move_id, "--yes", "--i-accept-volatile", "--json")
    assert done.returncode == 0, done.stderr  # the source removed through checked directory descriptors
    assert not os.path.exists(home)

    # a file put into the target behind the mover's back, between COPY and the switch
    second = os.path.join(mv_tiers["zram"], "recfs-drop")
    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", second, "--yes",
                 env={CRASH: "COPY:done"})
    assert killed.returncode == -9, killed.stderr
    Path(second, "a_old", "planted.ibd").write_bytes(b"not from the source")
    move_id = _open_move(sb.name)
    resumed = cli("move", "resume", "--id", move_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    proof = cli("move", "verify", "--id", move_id)
    assert proof.returncode == 1, proof.stdout + proof.stderr
    assert "a_old/planted.ibd (in the target at the switch but not copied from the source)" in proof.stdout, \
        proof.stdout
    refused = cli("move", "finalize", "--id", move_id, "--yes", "--i-accept-volatile")
    assert refused.returncode != 0 and "a_old/planted.ibd" in refused.stderr, refused.stderr
    assert os.path.isdir(target) and os.listdir(target), "finalize removed the source of a failed proof"


def test_a_removal_that_fails_stops_the_pass_in_one_line(tmp_path):
    """A failed unlink is an error, not a comment: a dropped database's directory holding a file the mover did
    not write cannot be removed, and the pass says so instead of leaving it for the server to find."""
    from datadir_mover.move.copy import copy_tree, walk
    from tuner.core.errors import MoveError

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "old").mkdir(parents=True)
    dst.mkdir()
    (src / "old" / "gone.ibd").write_bytes(b"g" * 5000)
    (src / "ibdata1").write_bytes(b"i" * 5000)
    first, _ = copy_tree(src, dst, walk(src))
    (src / "old" / "gone.ibd").unlink()
    (src / "old").rmdir()
    (dst / "old" / "stray").write_bytes(b"not the mover's")
    with pytest.raises(MoveError) as failed:
        copy_tree(src, dst, walk(src), previous=first)
    assert f"could not remove {dst}/old: Directory not empty" in str(failed.value), failed.value
    assert "\n" not in str(failed.value)
    assert not (dst / "old" / "gone.ibd").exists() and (dst / "old" / "stray").exists()
