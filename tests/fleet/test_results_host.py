"""Results schema 2: a results database written before fleets (schema 1) gains cells.host when opened."""

from __future__ import annotations

import sqlite3

from tuner.sweep.results import SCHEMA, CellRecord, ResultsStore


def schema_1(sql: str) -> str:
    return sql.replace("    pt_summary TEXT,\n    host TEXT,\n", "    pt_summary TEXT,\n")


def test_schema_1_database_is_migrated_in_place(tmp_path):
    db = tmp_path / "results.db"
    old = sqlite3.connect(db)
    old.executescript(schema_1(SCHEMA))
    assert "host" not in {r[1] for r in old.execute("PRAGMA table_info(cells)")}
    old.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    old.execute("INSERT INTO runs VALUES ('r1', 'demo', 'd', 'y', '{}', NULL, 1, 1, NULL, 1, '{}')")
    old.execute("INSERT INTO cells (run_id, cell_id, idx, config_key, repeat, label, settings_json, status, "
                "started_at, finished_at, phases_json) VALUES ('r1', 'c1', 0, 'k', 1, 'l', '{}', 'ok', 1, 2, '{}')")
    old.commit()
    old.close()

    with ResultsStore(db) as store:
        (cell,) = store.cells("r1")
        assert cell.host is None and cell.cell_id == "c1"  # the old cell is intact
        assert int(store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) >= 2
        store.record_cell(CellRecord(run_id="r1", cell_id="h1/c1", idx=1, config_key="h1|k", repeat=1,
                                     label="host=h1, l", settings={"host": "h1"}, status="ok", started_at=3,
                                     finished_at=4, host="h1"))
        assert {c.cell_id: c.host for c in store.cells("r1")} == {"c1": None, "h1/c1": "h1"}
        assert [r["host"] for r in store.iter_export_rows("r1")] == [None, "h1"]
    with ResultsStore(db) as store:  # opening again changes nothing
        assert len(store.cells("r1")) == 2
