"""What a move may not take over or give up: a directory it did not create, and the only persistent copy."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tuner.core.errors import MoveError


@pytest.mark.root
def test_tmpdir_move_to_tmp_leaves_tmp_root_1777(clone, cli):
    sb = clone("mv-tmpdir")
    before = os.stat("/tmp")
    assert (before.st_uid, stat.S_IMODE(before.st_mode)) == (0, 0o1777), "this machine's /tmp is not root 1777"
    r = cli("move", "apply", "tmpdir", "--sandbox", sb.name, "--to", "/tmp", "--yes", "--json", "--allow-same-fs")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phase"] == "committed"
    after = os.stat("/tmp")
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (before.st_uid, before.st_gid, 0o1777)
    back = cli("move", "rollback", "--id", json.loads(r.stdout)["move_id"], "--yes",
               "--discard-writes-since-start")
    assert back.returncode != 0 and "committed" in back.stderr  # a committed move is not rolled back
    assert stat.S_IMODE(os.stat("/tmp").st_mode) == 0o1777


@pytest.mark.root
def test_existing_directory_the_server_cannot_write_is_refused_unchanged(mv_tiers):
    from datadir_mover.move import preflight

    locked = os.path.join(mv_tiers["zram"], "locked")
    os.mkdir(locked, 0o755)
    try:
        st = os.stat(locked)
        assert not preflight._writable_by(st, 65534) and preflight._writable_by(st, 0)
        os.chown(locked, 0, 0)
        with pytest.raises(MoveError, match="cannot write into it.*changes no directory it did not create"):
            preflight.check_owner(locked, 65534, "nobody")
        assert stat.S_IMODE(os.stat(locked).st_mode) == 0o755
    finally:
        os.rmdir(locked)


@pytest.mark.root
def test_finalize_onto_tmpfs_without_persistence_is_refused(clone, mv_tiers, cli):
    sb = clone("mv-volatile")
    target = os.path.join(mv_tiers["tmpfs"], "volatile")
    r = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    move = json.loads(r.stdout)
    refused = cli("move", "finalize", "--id", move["move_id"], "--yes")
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1 and "volatile tier (tmpfs)" in refused.stderr, refused.stderr
    assert "--i-accept-volatile" in refused.stderr and "persist install" in refused.stderr
    assert os.path.isdir(move["from"]) and os.listdir(move["from"]), "the source was touched"
    ok = cli("move", "finalize", "--id", move["move_id"], "--yes", "--i-accept-volatile", "--json")
    assert ok.returncode == 0, ok.stderr
    assert not os.path.exists(move["from"])
