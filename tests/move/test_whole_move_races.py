"""Whole moves raced by the server's user: nothing outside the two trees changes, whatever is planted between steps.

``test_root_follows_no_link.py`` races the copy functions; here the same real unprivileged user
(``recfs-racer``) races whole datadir moves, run as ``innotier move apply`` runs them once confirmed
(``Executor.create(plan).run()``, then ``prove`` and ``finalize``), on a real sandbox and a real tier.
The mover calls its ``on_state`` hook at every step boundary, before the step's journal record: the
racer makes its change there and answers once it is made, so every race is won by the racer,
deterministically, and the step after it meets it.  The world is the one a system server lives in:

- the sandbox's datadir belongs to the racer (the server's user: the mover gives the target its
  owner), in a root-owned directory;
- the tier is a real tmpfs whose root is ``1777`` like ``/dev/shm``: the racer may create names there
  and rename the directories it owns, the target among them;
- a root-owned canary tree outside both trees (mode, owner, times, inode and content of every entry)
  is the sentinel: at every boundary and after every move it must be exactly as it was.

Each move either completes with the server verified on the target and the proof passed, or refuses
in one line naming what the racer changed, and (before the server ran on the target) rolls back to
the source, verified, with the tables' checksums as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

import mvhelpers
from test_root_follows_no_link import Racer, racer_user, snapshot  # noqa: F401 (racer_user: the fixture)

from datadir_mover.move.copy import UnsafePath
from datadir_mover.move.stepbase import MoveHalted
from tuner.core.errors import MoveError

NAME = "movrace-race"


@dataclass
class World:
    sb: object
    src: Path
    tier: Path
    canary: Path
    racer: Racer
    canary_at_start: dict
    sums: dict  # the tables' checksums on the source


@pytest.fixture(scope="module")
def world(racer_user, golden, innotier_home):  # noqa: F811 (racer_user: the imported fixture)
    base = Path(tempfile.mkdtemp(prefix="movrace-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    tier = base / "tier"
    mvhelpers.mount_tmpfs(str(tier), "1G")
    os.chmod(tier, 0o1777)  # like /dev/shm: anyone creates names, and renames what it owns
    canary = base / "canary"
    canary.mkdir(mode=0o755)
    for name in ("secret", "item.ibd", "district.ibd", "extra.ibd", "ibdata1"):
        (canary / name).write_bytes(b"root's own " + name.encode())
        os.chmod(canary / name, 0o600)
    (canary / "sub").mkdir(mode=0o711)
    (canary / "sub" / "keep").write_bytes(b"root's own keep")
    src = base / "src"
    racer = None
    try:
        sb = mvhelpers.clone_sandbox(NAME, datadir=str(src), start=False)
        subprocess.run(["chown", "-R", f"{racer_user.pw_uid}:{racer_user.pw_gid}", str(src)], check=True)
        sb.start()
        racer = Racer(racer_user)
        yield World(sb, src, tier, canary, racer, snapshot(canary), mvhelpers.checksums(sb.connection_spec()))
    finally:
        if racer is not None:
            racer.close()
        from tuner.core.sandbox import Sandbox

        try:
            Sandbox.load(NAME).destroy(force=True)
        except Exception:  # noqa: BLE001 - never made (a failed clone): nothing to destroy
            pass
        mvhelpers.unmount(str(tier))
        shutil.rmtree(base, ignore_errors=True)


def _mover(world: World, target: Path, precopy: bool, races: dict[str, Callable[[], None]],
           allow_same_fs: bool = False):
    """A datadir move's executor with the racer at the named boundaries; (executor, lines it said, boundaries
    where the canary was found changed)."""
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor

    plan = planmod.build(planmod.MoveRequest("datadir", str(target), precopy=precopy, probe=False,
                                             allow_same_fs=allow_same_fs), world.sb.connection_spec())
    said: list[str] = []
    ex = Executor.create(plan, echo=said.append)
    ex.background_proof = False  # the test proves the move itself, in the foreground (no process outlives it)
    changed: list[str] = []

    def at(state: str) -> None:
        if snapshot(world.canary) != world.canary_at_start:
            changed.append(state)
        if state in races:
            races[state]()

    ex.on_state = at
    return ex, said, changed


def _refused(ex) -> str:
    with pytest.raises(MoveError) as refused:
        ex.run()
    text = str(refused.value)
    assert "\n" not in text, text
    return text


def _nothing_outside_changed(world: World, changed: list[str]) -> None:
    assert changed == [], f"the canary changed before these steps: {changed}"
    assert snapshot(world.canary) == world.canary_at_start, "root changed a file outside the two trees"


def _back_on_source(world: World, ex) -> None:
    from tuner.core.server import inspect

    spec = world.sb.connection_spec()
    assert ex.journal.phase == "rolled_back" and world.sb.running_pid() is not None
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(world.src)
    assert mvhelpers.checksums(spec) == world.sums


@pytest.mark.root
def test_a_link_planted_where_the_target_will_be_made_is_refused_and_rolled_back(world):
    """Between PLAN and the pre-copy, the racer puts a link to the canary where the mover will make the target
    (it may: the tier is 1777): the pre-copy refuses it, and the rollback removes nothing through it."""
    target = world.tier / "movrace-planted"
    ex, said, changed = _mover(world, target, True,
                               {"PRECOPY": lambda: world.racer.do("link", str(target), str(world.canary))})
    text = _refused(ex)
    assert f"move failed in PRECOPY: {target} is a symbolic link" in text and "rolled back" in text, text
    assert any(f"the target {target} is a symbolic link to {world.canary}" in s for s in said), said
    assert os.readlink(target) == str(world.canary)  # the racer's link: not the move's to remove
    _nothing_outside_changed(world, changed)
    _back_on_source(world, ex)
    os.unlink(target)


@pytest.mark.root
def test_a_given_target_swapped_for_a_link_before_the_copy_is_refused_and_rolled_back(world):
    """The DBA gave an existing, empty directory the server's user owns; once the server is stopped the racer
    renames it aside and puts a link to the canary in its place: the copy must not write through it (before, it
    did: the datadir went into the canary), and the rollback must not remove through it."""
    target = world.tier / "movrace-given"
    target.mkdir()
    os.chown(target, world.src.stat().st_uid, world.src.stat().st_gid)
    os.chmod(target, 0o750)
    ex, said, changed = _mover(world, target, False,
                               {"COPY": lambda: world.racer.do("swap", str(target), str(world.canary))})
    text = _refused(ex)
    assert f"move failed in COPY: {target} is a symbolic link" in text and "rolled back" in text, text
    assert os.readlink(target) == str(world.canary) and os.listdir(f"{target}.aside") == []
    _nothing_outside_changed(world, changed)
    _back_on_source(world, ex)
    os.unlink(target)
    os.rmdir(f"{target}.aside")


@pytest.mark.root
def test_the_made_target_swapped_for_a_link_before_verify_is_refused_and_rolled_back(world):
    """After the copy the racer renames the target (it owns it) and puts a link to the canary in its place: VERIFY
    refuses the link instead of reading through it, and the rollback, which used to fail on it and leave the server
    stopped, says so, removes nothing through it and starts the server on the source."""
    target = world.tier / "movrace-made"
    ex, said, changed = _mover(world, target, False,
                               {"VERIFY": lambda: world.racer.do("swap", str(target), str(world.canary))})
    text = _refused(ex)
    assert f"move failed in VERIFY: {target} is a symbolic link" in text and "rolled back" in text, text
    assert os.readlink(target) == str(world.canary)
    assert Path(f"{target}.aside", "tpcc").is_dir()  # the copy, where the racer put it
    _nothing_outside_changed(world, changed)
    _back_on_source(world, ex)
    os.unlink(target)
    shutil.rmtree(f"{target}.aside")


@pytest.mark.root
def test_a_target_directory_swapped_before_start_halts_and_the_rollback_stays_inside(world):
    """Right before START the racer swaps the target's ``tpcc`` for a link to the canary: the server is not started
    on it (one line naming it), and the rollback removes the whole target, the racer's link and the renamed
    directory included, through descriptors: nothing of the canary."""
    from datadir_mover.move.executor import Executor

    target = world.tier / "movrace-start"
    ex, said, changed = _mover(world, target, False,
                               {"START": lambda: world.racer.do("swap", str(target / "tpcc"), str(world.canary))})
    with pytest.raises(MoveHalted) as halted:
        ex.run()
    text = str(halted.value)
    assert "\n" not in text and f"the target {target} changed after the copy was verified" in text, text
    assert "tpcc (not a directory)" in text and world.sb.running_pid() is None, text
    back = Executor.open(ex.journal).rollback()
    assert back.started and back.removed > 0 and not os.path.lexists(target)
    _nothing_outside_changed(world, changed)
    _back_on_source(world, ex)


@pytest.mark.root
def test_a_whole_move_raced_at_every_copy_completes_verified_and_finalize_stays_inside(world, cli):
    """A pre-copied move, raced where the mover must carry on: a link to root's file planted in the source before the
    pre-copy (copied as a link), a copied table replaced by a link to the canary before the stop and another before
    the offline copy (each copied again, not written through), a link under a new name in the target before the
    offline copy (removed, not followed); and a second, real `innotier move apply` of the same server before the
    stop (refused in one line naming this move).  The move completes, the server is verified on the target, the
    proof passes.  Then the racer swaps the source's ``tpcc`` for a link to the canary: finalize refuses in one line;
    put back, it finalizes."""
    from tuner.core.server import inspect

    src, canary, racer = world.src, world.canary, world.racer
    target, other = world.tier / "movrace-whole", world.tier / "movrace-second"
    second: list = []
    races = {
        "PRECOPY": lambda: racer.do("link", str(src / "tpcc" / "movrace-note"), str(canary / "secret")),
        "SHUTDOWN": lambda: (second.append(cli("move", "apply", "datadir", "--sandbox", NAME, "--to", str(other),
                                               "--yes")),
                             racer.do("replace", str(target / "tpcc" / "item.ibd"), str(canary / "item.ibd"))),
        "COPY": lambda: (racer.do("replace", str(target / "tpcc" / "district.ibd"), str(canary / "district.ibd")),
                         racer.do("link", str(target / "tpcc" / "movrace-extra.ibd"), str(canary / "extra.ibd"))),
    }
    ex, said, changed = _mover(world, target, True, races)
    result = ex.run()
    assert result.phase == "committed" and result.verify_server.ok, result.to_dict()
    refusal = second[0].stderr.strip().splitlines()
    assert second[0].returncode != 0 and len(refusal) == 1, second[0].stderr
    assert f"move {ex.plan.move_id} on this server is not finished" in refusal[0] and not os.path.lexists(other)
    proof = ex.prove()
    assert proof.status == "passed", proof.text()
    spec = world.sb.connection_spec()
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(target)
    assert mvhelpers.checksums(spec) == world.sums
    for name in ("item.ibd", "district.ibd"):
        assert not (target / "tpcc" / name).is_symlink() and (target / "tpcc" / name).stat().st_size > 16384
    assert not os.path.lexists(target / "tpcc" / "movrace-extra.ibd")
    assert os.readlink(target / "tpcc" / "movrace-note") == str(canary / "secret")
    _nothing_outside_changed(world, changed)

    racer.do("swap", str(src / "tpcc"), str(canary))  # between COMMIT and FINALIZE, in the source
    with pytest.raises(UnsafePath) as refused:
        ex.finalize(accept_volatile=True)
    text = str(refused.value)
    assert "\n" not in text and f"{src}/tpcc is a symbolic link" in text, text
    assert snapshot(canary) == world.canary_at_start, "finalize removed a file of the canary through the link"
    os.unlink(src / "tpcc")  # the operator puts the directory back, as the refusal says
    os.rename(f"{src}/tpcc.aside", src / "tpcc")
    done = ex.finalize(accept_volatile=True)
    assert done.removed > 0 and not os.path.lexists(src / "tpcc") and ex.journal.phase == "finalized"
    assert snapshot(canary) == world.canary_at_start


@pytest.mark.root
def test_switch_and_verify_server_raced_stay_inside(world):
    """The two boundaries the races above leave out.  Before SWITCH (the copy verified, the server stopped) the
    racer swaps the made target for a link to the canary: SWITCH makes sure of the target through a descriptor
    (it would chown and chmod it), so it refuses in one line and the rollback removes nothing through the link.
    Before VERIFY_SERVER (the server runs on the target: its files are the racer's) the racer plants links to
    root's files in the target and in the stopped source: the check, the commit and finalize (which removes the
    source) follow none, and finalize leaves the planted link where it is.  The source is where the server runs
    now (the test before this one moved it onto the tier: the moves stay on it); the canary is compared at every
    boundary."""
    from tuner.core.server import inspect

    spec = world.sb.connection_spec()
    canary, racer = world.canary, world.racer
    home = Path(os.path.realpath(inspect(spec).datadir))

    target = world.tier / "movrace-switch"
    ex, said, changed = _mover(world, target, False,
                               {"SWITCH": lambda: racer.do("swap", str(target), str(canary))}, allow_same_fs=True)
    text = _refused(ex)
    assert f"move failed in SWITCH: {target} is a symbolic link" in text and "rolled back" in text, text
    assert os.readlink(target) == str(canary) and Path(f"{target}.aside", "tpcc").is_dir()
    _nothing_outside_changed(world, changed)
    assert ex.journal.phase == "rolled_back" and world.sb.running_pid() is not None
    assert Path(os.path.realpath(inspect(spec).datadir)) == home and mvhelpers.checksums(spec) == world.sums
    os.unlink(target)
    shutil.rmtree(f"{target}.aside")

    target = world.tier / "movrace-verify-server"
    planted = (target / "tpcc" / "movrace-late.ibd", home / "tpcc" / "movrace-late.ibd")

    def plant() -> None:
        racer.do("link", str(planted[0]), str(canary / "extra.ibd"))
        racer.do("link", str(planted[1]), str(canary / "secret"))

    ex, said, changed = _mover(world, target, False, {"VERIFY_SERVER": plant}, allow_same_fs=True)
    result = ex.run()
    assert result.phase == "committed" and result.verify_server.ok, result.to_dict()
    assert ex.prove().status == "passed"
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(target)
    assert mvhelpers.checksums(spec) == world.sums
    done = ex.finalize(accept_volatile=True)
    assert done.removed > 0 and ex.journal.phase == "finalized"
    assert "tpcc/" in done.kept and not (home / "tpcc" / "item.ibd").exists(), done  # the planted link stays
    assert [os.readlink(p) for p in planted] == [str(canary / "extra.ibd"), str(canary / "secret")]
    _nothing_outside_changed(world, changed)
