"""`placement check` against real things: an advice from a TPC-C window measured on the shared MariaDB sandbox
and a tier priced by fio on a real tmpfs, checked by a one-block sweep of real sandboxes (every cell's files
where the server says they are, predicted beside measured); a table placed and taken back behind the check's
back is caught; bad input is one line and changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import mvhelpers
from sqlhelpers import stored_rows

from tuner.core.errors import SweepError, UsageError
from tuner.core.probe import mount_of
from tuner.core.server import Flavor
from tuner.placement import advisor, check, measure, tiercost
from tuner.placement.model import IoProfile
from tuner.placement.store import PlacementStore
from tuner.sweep import table_placement
from tuner.sweep.runner import RunnerOptions
from tuner.tpcc.config import RunConfig

MIB = 1 << 20


@pytest.fixture(scope="module")
def check_tier(innotier_home):
    """A real 640 MiB tmpfs: the fast tier (everything's cell holds a whole W=1 datadir), unmounted at the end."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root; CI runs the suite as root")
    path = mvhelpers.mount_tmpfs(os.path.join(innotier_home, "placecheck-fast"), "640M")
    try:
        yield path
    finally:
        subprocess.run(["umount", path], check=False)


def test_an_advice_is_checked_by_a_sweep_with_every_file_where_the_cell_says(tpcc_w1, check_tier, innotier_home):
    results = os.path.join(innotier_home, "placecheck-results.db")
    profile = measure.measure(tpcc_w1.with_database(None), interval=1.0,
                              tpcc=RunConfig(clients=2, warmup=1, duration=3, interval=1, database="tpcc"))
    fast = tiercost.characterize(check_tier, size_bytes=8 * MIB, runtime_s=1)
    here = tiercost.characterize(mount_of(innotier_home).mountpoint, size_bytes=8 * MIB, runtime_s=1)
    assert fast.randread_iops > 0 and fast.randwrite_iops > 0 and here.randread_iops > 0
    advice = advisor.advise(profile, fast, 24 * MIB)
    with PlacementStore(results) as store:
        store.put_profile(profile)
        store.put_tier(fast)
        store.put_tier(here)
        store.put_advice(advisor.stored(advice, here))
        plan = check.build(check.CheckRequest(naive=("largest tables",), budgets=(8 * MIB,), blocks=1, warmup=1,
                                              duration=3, interval=1), store)
    names = [c.name for c in plan.cells]
    assert names[0].startswith("none") and names[-1] == "everything" and len(names) >= 3, names
    # the advisor's pick at a second budget, from the same profile and tiers, is a cell too (alone or merged)
    at_8 = next(c for c in plan.cells if "advisor at 8.0 MiB" in c.name)
    pick_8 = advisor.advise(profile, fast, 8 * MIB).pick
    assert at_8.bytes <= 8 * MIB and at_8.predicted == pick_8.saving and set(at_8.keys) == set(pick_8.keys)
    # a budget where nothing that fits saves anything is none's cell, and a note says so
    assert bool(pick_8.keys) or (at_8 is plan.cells[0] and any("advisor at 8.0 MiB picks nothing" in n
                                                                for n in plan.notes)), (at_8, plan.notes)
    assert "the advisor's pick (and at 8.0 MiB)" in plan.spec_doc["description"]
    assert any(k.startswith("tpcc.") for c in plan.cells for k in c.placement), "no cell places a table"
    spec = plan.spec()
    assert spec.repeats == 1 and spec.workload.warehouses == 1 and spec.fixed["clients"] == 2
    assert spec.tiers["fast"].path == os.path.realpath(check_tier)

    summary = check.execute(plan, RunnerOptions(results=results, listen=None, pt_summary=False, probe=False,
                                                live=False, echo=lambda m: None))
    assert summary.failed == [] and summary.ran == len(plan.cells), summary
    res = check.result(plan, results)

    # every cell ran, and the server put each file where the cell says
    from tuner.sweep.results import ResultsStore

    with ResultsStore(results) as rs:
        recs = {json.dumps(r.settings["placement"], sort_keys=True): r for r in rs.cells(res.run_id)}
    fast_root = os.path.realpath(check_tier) + "/"
    for c in plan.cells:
        rec = recs[json.dumps(dict(c.placement), sort_keys=True)]
        assert rec.status == "ok" and rec.check_ok and rec.tpmc > 0, (c.name, rec.failure)
        on_fast = os.path.realpath(rec.variables["datadir"]).startswith(fast_root)
        assert on_fast == (c.placement["datadir"] == "fast"), (c.name, rec.variables["datadir"])
        tables = [k for k, t in c.placement.items() if k.startswith("tpcc.") and t == "fast"]
        if c.placement["datadir"] == "slow":
            at_end = (rec.tiers or {}).get("tables_at_end") or {}
            assert sorted(at_end) == sorted(tables), c.name
            for k in tables:  # read from the cell's server after its run
                assert at_end[k]["under"] and at_end[k]["path"].startswith(fast_root), at_end[k]
                assert at_end[k]["path"].endswith(f"/tpcc/{k.split('.')[1]}.ibd") and at_end[k]["bytes"] > 0
    # the report: predicted beside measured for every cell, and the bytes placed
    rows = {r.name: r for r in res.rows}
    assert list(rows) == names
    for r in res.rows:
        assert r.placed_where == "checked", (r.name, r.placed_where)
        assert r.tpmc and r.tpmc > 0 and r.measured_ratio is not None and r.measured_ratio > 0, r
        assert r.measured_low is None  # one block: no interval, and the note says so
    assert rows[names[0]].measured_ratio == 1.0 and rows[names[0]].bytes_placed == 0
    # the calibrated model: nothing predicts 1x, everything predicts what everything measured, the rest between;
    # a profile that counted no wait at all (the 3-s window read nothing from disk: seen once in CI) has no shares
    every = rows["everything"]
    if every.predicted <= 0:
        assert check.NO_COUNTED_WAIT in res.notes and all(r.calibrated_ratio is None for r in res.rows), res.notes
    else:
        assert check.NO_COUNTED_WAIT not in res.notes
        assert rows[names[0]].calibrated_ratio == 1.0
        assert every.calibrated_ratio == pytest.approx(every.measured_ratio)
        for r in res.rows[1:-1]:
            assert r.calibrated_ratio == pytest.approx(check.calibrated(r.predicted_share, every.measured_ratio))
            assert min(1.0, every.measured_ratio) <= r.calibrated_ratio <= max(1.0, every.measured_ratio), r
    # the queueing network, fitted to everything's measured ratio (or a note why there is none on this run)
    network, why = check.queueing_model(plan, every.measured_ratio)
    if network is None:
        assert why in res.notes and all(r.queueing_ratio is None for r in res.rows), (why, res.notes)
    else:
        assert rows[names[0]].queueing_ratio == 1.0
        assert every.queueing_ratio == pytest.approx(every.measured_ratio, rel=1e-6)
        for c in plan.cells[1:-1]:
            assert rows[c.name].queueing_ratio == pytest.approx(network.ratio(c.keys))
            assert 1.0 <= rows[c.name].queueing_ratio <= every.measured_ratio * (1 + 1e-6)
    for c in plan.cells[1:]:
        r = rows[c.name]
        assert r.predicted == c.predicted and r.bytes_advised == c.bytes and r.bytes_placed > 0
    table_cells = [c for c in plan.cells[1:-1] if c.keys]
    for c in table_cells:  # the tables' own files, as the cells' servers reported them: a page or more each, and
        # no more than measured plus allocation slack (the placing rebuilds a table, which compacts it: CI saw
        # new_order, emptied in part by Deliveries, placed at 384 KiB against 816 KiB measured)
        measured = sum(profile.candidate(k).size_bytes for k in c.keys)
        assert 16384 * len(c.keys) <= rows[c.name].bytes_placed <= measured + 4 * MIB, (c.name, measured)
    assert any("one block" in n for n in res.notes)
    # the advisor's pick against the naive one of the same budget is asked in the same family (not after the fact)
    separate = any(c.name.split(" = ")[0] == "advisor" for c in plan.cells) and "largest tables" in names
    assert len(res.head_to_head) == int(separate), (names, res.head_to_head)
    for pair in res.head_to_head:
        assert pair["cell"].startswith("advisor") and pair["against"] == "largest tables" and pair["ratio"] > 0
        assert pair["low"] is None and "needs at least 2 blocks" in pair["state"], pair
        assert check.head_to_head_lines(res)[0].startswith(f"{pair['cell']} over largest tables: ")
    shown = check.result_rows(res)
    assert all(s["predicted ms/s"] != "" and s["measured x"].endswith("x") for s in shown)
    with PlacementStore(results) as store:
        assert store.check(res.run_id) == json.loads(json.dumps(res.to_dict()))


def test_a_placed_table_taken_back_to_the_datadir_is_caught(shared_sandbox, check_tier):
    """The fault: a table placed on the tier goes back to the datadir behind the check's back; verify says so."""
    conn = shared_sandbox.connection_spec().connect()
    cur = conn.cursor()
    try:
        cur.execute("DROP DATABASE IF EXISTS placecheck_db")
        cur.execute("CREATE DATABASE placecheck_db")
        cur.execute("USE placecheck_db")
        cur.execute("CREATE TABLE placecheck_db.t (id INT PRIMARY KEY, v VARCHAR(20), KEY (v)) ENGINE=InnoDB")
        cur.execute("INSERT INTO placecheck_db.t SELECT seq, CONCAT('v', seq) FROM seq_1_to_2000")
        cur.execute("CHECKSUM TABLE placecheck_db.t")
        before = cur.fetchall()[0][1]
        where = os.path.join(check_tier, "placecheck-fault")
        placed = table_placement.place_tables(conn, Flavor.MARIADB, {"placecheck_db.t": Path(where)})
        path = placed["placecheck_db.t"]["path"]
        assert path.startswith(os.path.realpath(where) + "/") and os.path.getsize(path) > 0
        cur.execute("CHECKSUM TABLE placecheck_db.t")
        assert cur.fetchall()[0][1] == before  # the same rows
        assert table_placement.verify(conn, Flavor.MARIADB, {"placecheck_db.t": where})["placecheck_db.t"]["under"]
        # taken back: a copy in the datadir swapped in
        cur.execute("CREATE TABLE placecheck_db.t2 LIKE placecheck_db.t")
        cur.execute("INSERT INTO placecheck_db.t2 SELECT * FROM placecheck_db.t")
        cur.execute("RENAME TABLE placecheck_db.t TO placecheck_db.t_old, placecheck_db.t2 TO placecheck_db.t")
        with pytest.raises(SweepError, match="placecheck_db.t at .* elsewhere|elsewhere: placecheck_db.t at") as err:
            table_placement.verify(conn, Flavor.MARIADB, {"placecheck_db.t": where})
        assert "\n" not in str(err.value) and shared_sandbox.datadir.rstrip("/") in str(err.value)
    finally:
        cur.execute("DROP DATABASE IF EXISTS placecheck_db")
        cur.close()
        conn.close()


# ---- bad input: one line naming the fix, nothing changed -------------------------------------------------------

def _store_advice(results: str, mount: str, server: dict | None = None, workload: dict | None = None) -> None:
    """A stored advice over a small profile (input data in the stored format: what `placement advise` writes)."""
    from tuner.placement.model import Candidate, FileIo, Interval, TierCost

    files = {"/d/tpcc/stock.ibd": ("tpcc.stock", 40 * MIB), "/d/tpcc/item.ibd": ("tpcc.item", 10 * MIB)}
    profile = IoProfile("io-bad", "2026-12-02T03:00:00+00:00",
                        server or {"flavor": "mariadb", "version": _host_version(), "page_size": 16384,
                                   "innodb_buffer_pool_size": str(32 * MIB)},
                        workload or {"kind": "tpcc", "settings": {"clients": 2}, "result": {"warehouses": 1}},
                        tuple(Interval(1.0, {f: FileIo(reads=50, read_s=0.02, misc=2, misc_s=0.001) for f in files})
                              for _ in range(3)),
                        tuple(Candidate(k, "table", k, (f,), n) for f, (k, n) in files.items()), (), {})
    tier = TierCost("tier-bad", os.path.realpath(mount), "tmpfs", "tmpfs", True, "O_DIRECT", 16384, 40e-6, 36e-6,
                    1e-6, 2e8, 2e8, 1 << 30, "2026-12-02T03:00:00+00:00", "fio-3.33")
    with PlacementStore(results) as store:
        store.put_profile(profile)
        store.put_tier(tier)
        store.put_advice(advisor.stored(advisor.advise(profile, tier, 16 * MIB), None))


def _host_version() -> str:
    from tuner.core.sandbox import find_binaries

    return str(find_binaries(None).version)


def _one_line(r, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("innotier: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def _unchanged(results: str, innotier_home) -> None:
    assert stored_rows(results, "placement_checks") == 0 and stored_rows(results, "runs") == 0
    from tuner.core.sandbox import list_sandboxes

    assert not [s.name for s in list_sandboxes() if s.name.startswith("sweep-")]


def test_bad_input_is_one_line_and_changes_nothing(cli, tmp_path, check_tier, innotier_home):
    empty = str(tmp_path / "empty.db")
    _one_line(cli("placement", "check", "--results", empty), "no stored advice", "placement advise")
    _unchanged(empty, innotier_home)

    other = str(tmp_path / "other-server.db")
    _store_advice(other, check_tier, server={"flavor": "mysql", "version": "9.7.4", "page_size": 16384})
    _one_line(cli("placement", "check", "--results", other, "--plan"), "measured on mysql 9.7", "--server")
    _unchanged(other, innotier_home)

    unmounted = tmp_path / "not-a-mount"
    unmounted.mkdir()
    gone = str(tmp_path / "unmounted.db")
    _store_advice(gone, str(unmounted))
    _one_line(cli("placement", "check", "--results", gone), "not a mount point", "mount the tier")
    _unchanged(gone, innotier_home)

    observed = str(tmp_path / "observed.db")
    _store_advice(observed, check_tier, workload={"kind": "observed", "seconds": 10})
    with PlacementStore(observed) as store, pytest.raises(UsageError, match="--during-tpcc") as err:
        check.build(check.CheckRequest(), store)
    assert "\n" not in str(err.value)
    _unchanged(observed, innotier_home)

    # and a good one prints its plan (cells, the generated sweep) and runs nothing
    good = str(tmp_path / "good.db")
    _store_advice(good, check_tier)
    r = cli("placement", "check", "--results", good, "--plan", "--blocks", "1")
    assert r.returncode == 0, r.stderr
    assert "everything" in r.stdout and "tpcc.item: fast" in r.stdout and "predicted" in r.stdout
    _unchanged(good, innotier_home)
    # further budgets: the advice's own, one below every candidate, not a size: one line each, nothing run
    _one_line(cli("placement", "check", "--results", good, "--plan", "--budget", "16M"), "advice's own budget")
    _one_line(cli("placement", "check", "--results", good, "--plan", "--budget", "1M"), "smaller than every",
              "larger --budget")
    _one_line(cli("placement", "check", "--results", good, "--plan", "--budget", "lots"), "--budget", "not a size")
    _unchanged(good, innotier_home)
    with PlacementStore(good) as store:
        with pytest.raises(UsageError, match="--blocks 0"):
            check.build(replace(check.CheckRequest(), blocks=0), store)


def test_a_mysql_advice_that_picks_tables_is_planned_as_a_mysql_sweep(installed_server, cli, tmp_path, check_tier,
                                                                     innotier_home):
    """Table cells run on MySQL too (a general tablespace in the cell's innodb_directories; the placing itself is
    tested on a real MySQL 9.7 in tests/servers/test_server_placement.py): the check of an advice measured on
    MySQL 9.7 whose pick is a table plans a sweep on that server, every cell validated, nothing run."""
    installed_server("mysql-9.7")
    results = str(tmp_path / "mysql.db")
    _store_advice(results, check_tier, server={"flavor": "mysql", "version": "9.7.4", "page_size": 16384,
                                               "innodb_buffer_pool_size": str(32 * MIB)})
    r = cli("placement", "check", "--results", results, "--server", "mysql-9.7", "--plan", "--blocks", "1")
    assert r.returncode == 0, r.stderr
    assert "tpcc.item: fast" in r.stdout and "mysql 9.7" in r.stdout.lower(), r.stdout
    with PlacementStore(results) as store:
        plan = check.build(check.CheckRequest(server="mysql-9.7", blocks=1), store)
    swept = check.sweep_plan(plan)
    assert swept.flavor == Flavor.MYSQL and not swept.skipped and swept.refusal is None, swept.refusal
    assert any(k == "tpcc.item" and t == "fast" for c in swept.cells for k, t in c.placement.items())
    _unchanged(results, innotier_home)


def test_a_mysql_check_runs_its_table_cell_in_a_general_tablespace(installed_server, check_tier, innotier_home):
    """The check of a MySQL 9.7 advice that picks tpcc.item, run at tiny size (one block, 3 s cells, no naive
    pick): the table cell's sandbox gets its table directory in innodb_directories before its first start (one
    start, no restart), the table lands in a general tablespace there, and the server says so after the run."""
    installed_server("mysql-9.7")
    results = os.path.join(innotier_home, "placecheck-mysql.db")
    _store_advice(results, check_tier, server={"flavor": "mysql", "version": "9.7.4", "page_size": 16384,
                                               "innodb_buffer_pool_size": str(32 * MIB)})
    with PlacementStore(results) as store:
        plan = check.build(check.CheckRequest(server="mysql-9.7", naive=(), blocks=1, warmup=1, duration=3,
                                              interval=1), store)
    summary = check.execute(plan, RunnerOptions(results=results, listen=None, pt_summary=False, probe=False,
                                                live=False, echo=lambda m: None))
    assert summary.failed == [] and summary.ran == len(plan.cells) == 3, summary
    res = check.result(plan, results)
    from tuner.sweep.results import ResultsStore

    with ResultsStore(results) as rs:
        (rec,) = [r for r in rs.cells(res.run_id) if r.settings["placement"].get("tpcc.item") == "fast"]
    assert rec.status == "ok" and rec.check_ok and rec.server_version.startswith("9.7."), rec.failure
    (table_dir,) = rec.tiers["innodb_directories"]
    assert table_dir.startswith(os.path.realpath(check_tier) + "/")
    assert f"innodb_directories={table_dir}" in rec.option_file and table_dir in rec.variables["innodb_directories"]
    at_end = rec.tiers["tables_at_end"]["tpcc.item"]
    assert at_end["under"] and at_end["path"] == os.path.join(table_dir, "innotier_tpcc_item.ibd"), at_end
    assert at_end["bytes"] > 0
    assert {r.name: r.placed_where for r in res.rows}["advisor"] == "checked"


def test_a_sweep_placement_names_tpcc_tables_only_and_places_them_on_both_flavors():
    from tuner.core.server import Version
    from tuner.sweep.plan import expand, validate_cell
    from tuner.sweep.spec import parse_spec

    doc = {"name": "t", "tiers": {"disk": {"kind": "home"}, "fast": {"kind": "path", "path": "/dev/shm"}},
           "axes": {"placement": ["disk", {"tpcc.stock": "fast", "redo": "fast"}]}}
    spec = parse_spec(doc)
    cell = next(c for c in expand(spec) if len(c.placement) > 1)
    assert cell.placement == {"datadir": "disk", "redo": "fast", "tpcc.stock": "fast"}
    assert cell.tiers_used == ["disk", "fast"]
    validate_cell(cell, Flavor.MARIADB, Version(10, 11, 19))
    validate_cell(cell, Flavor.MYSQL, Version(9, 7, 4))  # a general tablespace in the cell's innodb_directories
    for bad in ("tpcc.nosuch", "other.stock"):
        with pytest.raises(SweepError, match="unknown; valid: .*tpcc.<table>") as err:
            parse_spec({**doc, "axes": {"placement": [{bad: "fast"}]}})
        assert "\n" not in str(err.value)


def _file_of(spec, table: str) -> tuple[str, int]:
    """Where the server says the table's file is, and its row count."""
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT FILENAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s",
                    (table.replace(".", "/"),))
        row = cur.fetchone()
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        return row[0] if row else "", cur.fetchone()[0]
    finally:
        conn.close()


def test_apply_moves_the_picks_tables_online_and_names_the_components(tpcc_w1, shared_sandbox, cli, tmp_path,
                                                                     check_tier, innotier_home):
    """`placement apply`: a stored advice whose pick is a TPC-C table and the redo log, on the shared MariaDB
    sandbox: `--plan` moves nothing; the real run moves the table onto the tier online (the server names its new
    file there), prints the redo's `move apply` command and runs no restart; bad input is one line."""
    from tuner.placement.model import Candidate, FileIo, Interval, TierCost

    results = str(tmp_path / "apply.db")
    root = os.path.join(check_tier, "apply-root")
    os.makedirs(root, exist_ok=True)
    files = {"/d/tpcc/item.ibd": ("tpcc.item", "table", 10 * MIB), "/d/ib_logfile0": ("redo", "redo", 8 * MIB),
             "/d/tpcc/stock.ibd": ("tpcc.stock", "table", 40 * MIB)}
    profile = IoProfile("io-apply", "2026-12-02T10:00:00+00:00",
                        {"flavor": "mariadb", "version": _host_version(), "page_size": 16384},
                        {"kind": "tpcc", "settings": {"clients": 2}, "result": {"warehouses": 1}},
                        tuple(Interval(1.0, {f: FileIo(reads=50, read_s=0.02 * (2 if k == "tpcc.item" else 1),
                                                       misc=2, misc_s=0.001) for f, (k, _, _) in files.items()})
                              for _ in range(3)),
                        tuple(Candidate(k, kind, k, (f,), n) for f, (k, kind, n) in files.items()), (), {})
    tier = TierCost("tier-apply", os.path.realpath(check_tier), "tmpfs", "tmpfs", True, "O_DIRECT", 16384, 40e-6,
                    36e-6, 1e-6, 2e8, 2e8, 1 << 30, "2026-12-02T10:00:00+00:00", "fio-3.33")
    with PlacementStore(results) as store:
        store.put_profile(profile)
        store.put_tier(tier)
        advice = advisor.stored(advisor.advise(profile, tier, 20 * MIB), None)
        store.put_advice(advice)
    assert sorted(advice.advice.pick.keys) == ["redo", "tpcc.item"], advice.advice.pick
    home_file, rows = _file_of(tpcc_w1, "tpcc.item")
    sb = ["--sandbox", shared_sandbox.name, "--results", results]

    r = cli("placement", "apply", "--to", root, "--i-accept-volatile", "--plan", *sb)
    assert r.returncode == 0, r.stderr
    assert "table tpcc.item" in r.stdout and "innotier move apply redo --to" in r.stdout, r.stdout
    assert "    note: tier " in r.stdout and "    note: volatile tier: accepted" in r.stdout, r.stdout  # each move's own
    assert _file_of(tpcc_w1, "tpcc.item")[0] == home_file  # the plan moved nothing

    # bad input: a root that is not there, an unconfirmed run: one line each, nothing moved
    r = cli("placement", "apply", "--to", str(tmp_path / "nowhere"), "--i-accept-volatile", *sb)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "tpcc.item of advice" in r.stderr and "nothing was moved" in r.stderr, r.stderr
    _one_line(cli("placement", "apply", "--to", root, "--i-accept-volatile", *sb, input=""), "--yes")
    assert _file_of(tpcc_w1, "tpcc.item")[0] == home_file

    r = cli("placement", "apply", "--to", root, "--i-accept-volatile", "--yes", *sb)
    assert r.returncode == 0, r.stderr
    moved, moved_rows = _file_of(tpcc_w1, "tpcc.item")
    assert moved_rows == rows and moved.startswith(os.path.realpath(root) + "/") and moved.endswith("/item.ibd"), moved
    assert "moved tpcc.item" in r.stdout and "next, in a maintenance window: innotier move apply redo" in r.stdout
    r = cli("table-move", "back", "tpcc.item", "--yes")
    assert r.returncode == 0, r.stderr
    assert _file_of(tpcc_w1, "tpcc.item") == (home_file, rows)
