"""Persistence of a volatile tier, on a real tmpfs: units, consistent generations, power loss, all-or-nothing restore.

Power loss is simulated the hard way: the server is killed with SIGKILL while it commits,
and the tmpfs is unmounted and mounted again (empty).  ``persist restore`` must bring back
exactly the last consistent copy: every transaction committed before that sync started is
there, none committed after it finished is, the consistency checks pass, and what was lost
fits in the window ``persist status`` reported at the moment of the loss.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

import mvhelpers
from waiting import wait_for

SQL_LOG_TABLE = "CREATE TABLE mvdata_log.commits (id INT PRIMARY KEY AUTO_INCREMENT, at DOUBLE NOT NULL) ENGINE=InnoDB"


@pytest.fixture(scope="module")
def volatile_box(golden, innotier_home):
    tier = str(Path(innotier_home) / "pl-tier")
    mvhelpers.mount_tmpfs(tier, "1G")   # room for a restore's staged copy beside the live datadir
    sb = mvhelpers.clone_sandbox("pl-box", datadir=os.path.join(tier, "mysql"))
    backing = str(Path(innotier_home) / "pl-backing")
    yield sb, tier, backing
    from tuner.core.sandbox import Sandbox

    try:
        Sandbox.load("pl-box").destroy(force=True)
    finally:
        mvhelpers.unmount(tier)


def _committer(spec, stop: threading.Event, out: list[float]) -> None:
    """Commit one row a few ms apart, remembering the client-side commit time of each."""
    conn = spec.with_database("mvdata_log").connect()
    cur = conn.cursor()
    while not stop.is_set():
        try:
            t = time.time()
            cur.execute("INSERT INTO commits (at) VALUES (%s)", (t,))
            out.append(time.time())  # acknowledged commit (autocommit)
        except Exception:
            break  # the server was killed
        time.sleep(0.005)


@pytest.mark.root
def test_install_renders_and_verifies_units(volatile_box, cli, tmp_path):
    sb, tier, backing = volatile_box
    units = tmp_path / "units"
    r = cli("persist", "install", "--sandbox", sb.name, "--tier", tier, "--backing", backing, "--interval", "2m",
            "--unit-dir", str(units), "--first-sync", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verified_with"] == "systemd-analyze verify" and len(out["written"]) == 3
    restore_unit = next(p for p in units.iterdir() if "-sync-" not in p.name)
    text = restore_unit.read_text()
    assert "Before=mariadb.service" in text and "persist restore --backing" in text and "--if-needed" in text
    assert "ExecStop=" in text and "--offline --if-clean" in text
    timer = next(units.glob("*.timer")).read_text()
    assert "OnUnitActiveSec=120s" in timer
    sync_unit = next(p for p in units.glob("*-sync-*.service")).read_text()
    assert "rsync" not in sync_unit.replace("never a plain rsync", "")
    assert out["first_sync"]["method"] == "mariadb-backup"
    # credentials never in argv or a world-readable file
    assert oct(os.stat(Path(backing, "persist.json")).st_mode & 0o777) == "0o600"
    assert "password" not in Path(backing, "persist.json").read_text()
    # bad interval and a backing directory on the tier itself
    bad = cli("persist", "install", "--sandbox", sb.name, "--tier", tier, "--backing", f"{tier}/bk",
              "--unit-dir", str(units))
    assert bad.returncode == 2 and "persistent storage" in bad.stderr
    # a directory inside the tier is not the tier: restore could not tell at boot whether its mount came up
    inside = cli("persist", "install", "--sandbox", sb.name, "--tier", f"{tier}/mysql", "--backing",
                 str(tmp_path / "bk2"), "--unit-dir", str(tmp_path / "units2"))
    assert inside.returncode == 6 and inside.stderr.count("\n") == 1 and "not a mount point" in inside.stderr
    assert not (tmp_path / "bk2").exists() and not (tmp_path / "units2").exists()


@pytest.mark.root
def test_power_loss_restores_last_consistent_sync(volatile_box, cli):
    sb, tier, backing = volatile_box
    spec = sb.connection_spec()
    conn = spec.connect()
    conn.cursor().execute("CREATE DATABASE IF NOT EXISTS mvdata_log")
    conn.cursor().execute("DROP TABLE IF EXISTS mvdata_log.commits")
    conn.cursor().execute(SQL_LOG_TABLE)
    conn.close()
    assert mvhelpers.short_workload(spec, seconds=2) > 0
    refused = cli("persist", "restore", "--backing", backing, "--yes")
    assert refused.returncode == 6 and "server is running" in refused.stderr

    acked: list[float] = []
    stop = threading.Event()
    writer = threading.Thread(target=_committer, args=(spec, stop, acked))
    writer.start()
    try:
        wait_for(lambda: len(acked) >= 20, 60, "the writer's first 20 acknowledged commits")
        r = cli("persist", "sync", "--backing", backing, "--json")  # a consistent copy under load
        assert r.returncode == 0, r.stderr
        gen = json.loads(r.stdout)
        # commits acknowledged after the sync finished: these are lost
        wait_for(lambda: sum(t > gen["finished_at"] for t in list(acked)) >= 20, 60,
                 "20 commits acknowledged after the sync finished")
        status = json.loads(cli("persist", "status", "--backing", backing, "--json", check=True).stdout)
        sb.stop("kill")  # power loss: no shutdown at all
        killed_at = time.time()
    finally:
        stop.set()
        writer.join()
    mvhelpers.unmount(tier)  # the tier's contents are gone
    # the tier's mount did not come up (as at a boot where it failed): restore refuses, filling nothing
    backing_before = sorted(os.listdir(backing))
    for if_needed in ((), ("--if-needed",)):
        r = cli("persist", "restore", "--backing", backing, "--yes", *if_needed)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 6 and len(lines) == 1, (r.returncode, r.stderr)
        assert f"tier {tier} is not mounted" in lines[0] and "mount the tier first" in lines[0], lines[0]
    assert not mvhelpers.is_mounted(tier) and not os.listdir(tier)
    assert sorted(os.listdir(backing)) == backing_before and not Path(backing, "restore-state.json").exists()
    mvhelpers.mount_tmpfs(tier, "1G")
    assert not os.listdir(tier)

    r = cli("persist", "restore", "--backing", backing, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["generation"] == gen["id"]
    sb.start(recover=True)
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("SELECT at FROM mvdata_log.commits ORDER BY id")
    present = [row[0] for row in cur.fetchall()]
    conn.close()
    lost = [t for t in acked if t > (present[-1] if present else 0)]
    assert present, "nothing committed before the sync came back"
    assert all(t <= gen["finished_at"] for t in present), "a commit from after the sync finished came back"
    before_sync = [t for t in acked if t < gen["started_at"] - 0.05]
    assert len(present) >= len(before_sync), "commits from before the sync started are missing"
    # finished_at is the moment the copy was taken (the end of --backup, not of --prepare): every commit
    # acknowledged before it is in the copy (one connection, so the k-th acknowledgement is the k-th row)
    acked_before_copy = sum(t < gen["finished_at"] for t in acked)
    assert len(present) >= acked_before_copy, (len(present), acked_before_copy, "finished_at is after the copy")
    assert lost, "the test wrote nothing after the sync: it proves nothing"
    # what was lost fits the window status reported (its age grows by the time until the loss), plus
    # the sync's own duration, during which commits may or may not have made it into the copy
    status_at = gen["finished_at"] + status["data_loss_window_s"]
    window_at_loss = status["data_loss_window_s"] + (killed_at - status_at)
    assert killed_at - min(lost) <= window_at_loss + (gen["finished_at"] - gen["started_at"]) + 0.1
    assert status["rpo_s"] >= status["interval_s"] + gen["duration_s"] - 0.1
    mvhelpers.data_consistent(spec)


@pytest.mark.root
def test_generations_flip_keep_previous_and_offline_sync(volatile_box, cli):
    sb, tier, backing = volatile_box
    gdir = Path(backing, "generations")
    Path(gdir, ".tmp-crashed-sync").mkdir()  # a sync that died half way: never pointed at, cleaned up
    first = json.loads(cli("persist", "sync", "--backing", backing, "--json", check=True).stdout)
    sb.stop("clean")
    refused = cli("persist", "sync", "--backing", backing)
    assert refused.returncode == 6 and "not running" in refused.stderr
    second = json.loads(cli("persist", "sync", "--backing", backing, "--offline", "--json", check=True).stdout)
    assert second["method"].startswith("offline copy")
    names = sorted(p.name for p in gdir.iterdir())
    assert names == sorted([first["id"], second["id"]]), names  # the previous generation is kept, older pruned
    pointer = json.loads(Path(backing, "current.json").read_text())
    assert pointer["id"] == second["id"] and Path(second["path"], "COMPLETE").exists()
    skipped = cli("persist", "restore", "--backing", backing, "--if-needed", "--json", check=True)
    assert json.loads(skipped.stdout)["restored"] is False  # the tier still holds the files
    sb.start()
    # what `persist install` does on a live server (systemctl start of the restore unit): nothing, exit 0
    skipped = cli("persist", "restore", "--backing", backing, "--if-needed", "--json", check=True)
    assert json.loads(skipped.stdout)["restored"] is False
    refused = cli("persist", "restore", "--backing", backing, "--yes")
    assert refused.returncode == 6 and "the server is running" in refused.stderr
    mvhelpers.data_consistent(sb.connection_spec())
    text = cli("persist", "status", "--backing", backing, check=True).stdout
    assert "A power loss now loses the transactions committed in the last" in text
    assert "Recovery point objective" in text


def _tree_state(root: str) -> list[tuple]:
    """Every entry under ``root`` with its stat and, for files, its digest: what a refused restore must not change."""
    from datadir_mover.move.copy import digest_file, walk

    return [(rel, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino,
             digest_file(os.path.join(root, rel), drop_cache=False) if stat.S_ISREG(st.st_mode) else None)
            for rel, st in walk(root)]


@pytest.mark.root
def test_a_damaged_generation_is_refused_while_staging_and_nothing_changes(volatile_box, cli):
    """The restore checks the generation from the bytes its staging copy reads (one read, no separate pass):
    a flipped byte and a missing file are each refused with one line naming the file, the staging directories
    are gone, the live datadir, the tier and the backing directory are as they were; repaired, it restores."""
    sb, tier, backing = volatile_box
    sb.stop("clean")
    # an offline generation: its manifest holds the digests its own copy recorded (read back and matched)
    gen = json.loads(cli("persist", "sync", "--backing", backing, "--offline", "--json", check=True).stdout)
    assert gen["method"].startswith("offline copy")
    data = Path(gen["path"], "data")
    largest = max((p for p in data.rglob("*") if p.is_file() and p.parent == data), key=lambda p: p.stat().st_size)
    table = next(p for p in sorted(data.rglob("*.ibd")) if p.parent != data)   # a file one level down
    live_before, tier_before = _tree_state(tier), sorted(os.listdir(tier))
    backing_before = sorted(os.listdir(backing))

    def refused(rel: str) -> None:
        r = cli("persist", "restore", "--backing", backing, "--yes")
        # the staging progress ("innotier: staging N entries ..."), then the error: one line
        lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("innotier: staging ")]
        assert r.returncode == 6 and len(lines) == 1, (r.returncode, r.stderr)
        assert f"generation {gen['id']} is damaged ({rel} does not match its manifest)" in lines[0], lines[0]
        assert "nothing was restored" in lines[0]
        assert sorted(os.listdir(tier)) == tier_before     # no staging directory left, nothing swapped
        assert _tree_state(tier) == live_before
        assert sorted(os.listdir(backing)) == backing_before and not Path(backing, "restore-state.json").exists()

    offset = largest.stat().st_size // 2 + 12345            # one byte in the middle of a block, size unchanged
    with open(largest, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x01]))
    try:
        refused(largest.name)
    finally:
        with open(largest, "r+b") as fh:
            fh.seek(offset)
            fh.write(byte)
    aside = Path(backing).parent / "pl-aside.ibd"
    os.rename(table, aside)
    try:
        refused(str(table.relative_to(data)))
    finally:
        os.rename(aside, table)
    # the control: the same generation, repaired, restores (what was refused was the damage)
    r = cli("persist", "restore", "--backing", backing, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["generation"] == gen["id"]
    sb.start()
    mvhelpers.data_consistent(sb.connection_spec())
