"""The redo note of a MariaDB table move's plan: when the copy crowds the redo log, and what it suggests.

Pure rules here on recorded real monitor output (tests/fixtures/recorded/innodb-status); the note on a real
plan is in test_table_move_mariadb.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from datadir_mover.tablemove import redo_room
from datadir_mover.tablemove.redo_room import MIB, RedoRoom
from tuner.core import innodb_status
from tuner.core.server import Flavor, Version

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "innodb-status"


def test_the_capacity_is_read_per_server_kind():
    assert redo_room.capacity({"innodb_log_file_size": str(96 * MIB)}) == 96 * MIB  # MariaDB 10.5+: one file
    assert redo_room.capacity({"innodb_log_file_size": str(48 * MIB), "innodb_log_files_in_group": "2"}) == 96 * MIB
    assert redo_room.capacity({"innodb_redo_log_capacity": str(100 * MIB),
                               "innodb_log_file_size": str(48 * MIB)}) == 100 * MIB  # MySQL 8.0.30+
    assert redo_room.capacity({}) is None


def test_crowded_when_the_copy_does_not_fit_below_the_flush_point():
    # measured under TPC-C (bench/table_move_bench.py, MariaDB 10.11, stock at W=1: a 36 MiB file): the checkpoint
    # age when the move began, and the clients' p99 during the moves over before
    at_96 = RedoRoom(96 * MIB, 72 * MIB, 36 * MIB)  # 1.94-2.58x: crowded
    at_256 = RedoRoom(256 * MIB, 184 * MIB, 36 * MIB)  # 1.71-2.18x: crowded
    at_1g = RedoRoom(1024 * MIB, 690 * MIB, 36 * MIB)  # 1.62-1.68x after 90 s: fits
    assert at_96.crowded and at_256.crowded and not at_1g.crowded
    assert at_96.suggested_capacity() == 256 * MIB  # at today's age; planned again there, 512 MiB
    assert at_256.suggested_capacity() == 512 * MIB
    assert RedoRoom(96 * MIB, 0, 73 * MIB).crowded and not RedoRoom(96 * MIB, 0, 72 * MIB).crowded
    for age, copy in ((0, 1), (72 * MIB, 36 * MIB), (3 << 30, 5 << 30)):
        size = RedoRoom(96 * MIB, age, copy).suggested_capacity()
        assert not RedoRoom(size, age, copy).crowded and (size == 64 * MIB or RedoRoom(size // 2, age, copy).crowded)


def test_the_note_names_the_sizes_and_the_online_resize_where_there_is_one():
    room = RedoRoom(96 * MIB, 72 * MIB, 36 * MIB)
    line = redo_room.note(room, Flavor.MARIADB, Version(10, 11, 6))
    assert line.startswith("redo: the copy writes about 36.0 MiB of redo into a 96.0 MiB redo log with 72.0 MiB")
    assert "SET GLOBAL innodb_log_file_size = 268435456" in line and "\n" not in line
    assert "a restart" in redo_room.note(room, Flavor.MARIADB, Version(10, 6, 18))
    assert "SET PERSIST innodb_redo_log_capacity" in redo_room.resize_words(Flavor.MYSQL, Version(9, 7, 0), 256 * MIB)
    assert redo_room.note(RedoRoom(1024 * MIB, 690 * MIB, 36 * MIB), Flavor.MARIADB, Version(10, 11, 6)) is None


@pytest.mark.parametrize("server", ["mariadb-10.11", "mariadb-11.8", "mysql-9.7"])
def test_the_checkpoint_age_comes_from_real_monitor_output(server):
    status = innodb_status.parse((RECORDED / f"{server}-run.txt").read_text())
    assert status.checkpoint_age is not None and 0 < status.checkpoint_age < 1 << 30


def test_the_copier_pauses_after_each_chunk_only_when_paced():
    from datadir_mover.tablemove import ptosc

    plain = ptosc.argv("/dev/null", "s", "t", "/tier", "_t_new")
    paced = ptosc.argv("/dev/null", "s", "t", "/tier", "_t_new", pause_s=0.1)
    assert "--sleep" not in plain and paced[paced.index("--sleep") + 1] == "0.1"
    assert plain[plain.index("--chunk-time") + 1] == "0.02" == paced[paced.index("--chunk-time") + 1]
