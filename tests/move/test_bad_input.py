"""Bad requests: each refused with one clear line (exit code of MoveError), and nothing changed on disk."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

import mvhelpers


def _snapshot(sb, *dirs: str) -> dict:
    """Everything a refused move must leave alone: option files, sandbox record, datadir listing, targets, journals."""
    from datadir_mover.move.journal import moves_dir

    snap = {"conf.d": sorted(os.listdir(sb.conf_d)), "sandbox.json": Path(sb.dir, "sandbox.json").read_text(),
            "my.cnf": sb.cnf.read_text(), "datadir": sorted(os.listdir(sb.datadir)),
            "moves": sorted(os.listdir(moves_dir())) if moves_dir().exists() else []}
    for d in dirs:
        snap[d] = sorted(os.listdir(d)) if os.path.isdir(d) else ("missing" if not os.path.lexists(d) else "file")
    return snap


@pytest.fixture(scope="module")
def bad_box(golden, mv_tiers):
    sb = mvhelpers.clone_sandbox("mv-bad")
    small = os.path.join(mv_tiers["tmpfs"], "..", "small")
    small = os.path.abspath(small)
    mvhelpers.mount_tmpfs(small, "8M")
    yield sb, small
    mvhelpers.unmount(small)
    from tuner.core.sandbox import Sandbox

    Sandbox.load("mv-bad").destroy(force=True)


def _refused(cli, sb, args: list[str], expect: str, *watch: str) -> str:
    before = _snapshot(sb, *watch)
    r = cli("move", "apply", *args, "--sandbox", sb.name, "--yes")
    assert r.returncode == 7, f"expected a MoveError (exit 7), got {r.returncode}:\n{r.stdout}\n{r.stderr}"
    lines = [ln for ln in r.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("innotier: "), r.stderr
    assert expect in lines[0], lines[0]
    assert _snapshot(sb, *watch) == before, "a refused move changed something"
    assert sb.state().value == "running"
    return lines[0]


@pytest.mark.root
def test_not_enough_space(bad_box, cli):
    sb, small = bad_box
    msg = _refused(cli, sb, ["datadir", "--to", f"{small}/data"], "free but the move needs", small)
    assert "MiB" in msg


@pytest.mark.root
def test_target_inside_datadir(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    _refused(cli, sb, ["datadir", "--to", f"{sb.datadir}/nested"], "inside the datadir")
    _refused(cli, sb, ["redo", "--to", f"{sb.datadir}/redo"], "inside the datadir")


@pytest.mark.root
def test_source_inside_target(bad_box, cli):
    sb, _ = bad_box
    _refused(cli, sb, ["datadir", "--to", sb.dir], "is inside the target")  # the sandbox dir holds the datadir


@pytest.mark.root
def test_same_file_system(bad_box, cli, innotier_home):
    sb, _ = bad_box
    target = str(Path(innotier_home) / "same-fs-target")
    msg = _refused(cli, sb, ["redo", "--to", target], "same file system", target)
    assert "gain nothing" in msg and "--allow-same-fs" in msg


@pytest.mark.root
def test_server_still_running_with_no_shutdown(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    target = os.path.join(mv_tiers["zram"], "bad-running")
    _refused(cli, sb, ["redo", "--to", target, "--no-shutdown"], "still running", target)


@pytest.mark.root
def test_doublewrite_on_mariadb_explains_ibdata(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    msg = _refused(cli, sb, ["doublewrite", "--to", os.path.join(mv_tiers["zram"], "dw")], "system tablespace")
    assert "move plan ibdata" in msg


@pytest.mark.root
def test_target_owned_by_another_user(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    target = os.path.join(mv_tiers["zram"], "not-mine")
    os.mkdir(target)
    nobody = pwd.getpwnam("nobody")
    os.chown(target, nobody.pw_uid, nobody.pw_gid)
    try:
        _refused(cli, sb, ["redo", "--to", target], "is owned by nobody", target)
    finally:
        os.rmdir(target)


@pytest.mark.root
def test_symlinked_target(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    real = os.path.join(mv_tiers["zram"], "real-dir")
    link = os.path.join(mv_tiers["zram"], "link-dir")
    os.mkdir(real)
    os.symlink(real, link)
    try:
        _refused(cli, sb, ["redo", "--to", link], "is a symlink", real)
        _refused(cli, sb, ["redo", "--to", os.path.join(link, "sub")], "under a symlink", real)
    finally:
        os.unlink(link)
        os.rmdir(real)


@pytest.mark.root
def test_page_size_change_through_a_move(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    msg = _refused(cli, sb, ["datadir", "--to", os.path.join(mv_tiers["zram"], "ps"), "--page-size", "8k"],
                   "cannot change the page size")
    assert "fixed when the datadir is initialized" in msg


@pytest.mark.root
def test_nonempty_datadir_target_and_missing_parent(bad_box, cli, mv_tiers):
    sb, _ = bad_box
    full = os.path.join(mv_tiers["zram"], "full")
    os.makedirs(full, exist_ok=True)
    Path(full, "something").write_text("x")
    try:
        _refused(cli, sb, ["datadir", "--to", full], "is not empty", full)
    finally:
        subprocess.run(["rm", "-rf", full], check=True)
    _refused(cli, sb, ["redo", "--to", os.path.join(mv_tiers["zram"], "no", "such", "dir")], "does not exist")


@pytest.mark.root
def test_undo_in_ibdata_is_explained():
    from tuner.core.server import model_from_variables

    from datadir_mover.move import components
    from tuner.core.errors import MoveError

    model = model_from_variables({"version": "10.11.6-MariaDB", "datadir": "/var/lib/mysql",
                                  "innodb_undo_tablespaces": "0"})
    with pytest.raises(MoveError, match="undo logs live in the system tablespace"):
        components.check_supported("undo", model)
    mysql = model_from_variables({"version": "8.0.36", "version_comment": "MySQL Community Server",
                                  "datadir": "/var/lib/mysql", "innodb_undo_tablespaces": "2"})
    components.check_supported("doublewrite", mysql)  # MySQL 8.0.20+ has doublewrite files
    old = model_from_variables({"version": "8.0.19", "version_comment": "MySQL", "datadir": "/var/lib/mysql"})
    with pytest.raises(MoveError, match=r"before 8\.0\.20"):
        components.check_supported("doublewrite", old)
