"""tuner.core.durable: crash-safe replace, cleanup on failure, directory fsync, journal append.

The crash tests kill a real writer process with SIGKILL at random moments and check
what a reader finds afterwards.
"""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.core import durable
from tuner.core.durable import append_line_durable, write_atomic, write_json_atomic

OLD = b"old\n" * 1000
SIZE = 4 << 20  # large enough that a plain write would be caught half-done

WRITER = """
import sys
from tuner.core.durable import write_atomic
target = sys.argv[1]
i = 0
print("ready", flush=True)
while True:
    i += 1
    write_atomic(target, bytes([65 + i %% 26]) * %d)
""" % SIZE

APPENDER = """
import json, sys
from tuner.core.durable import append_line_durable
i = 0
print("ready", flush=True)
while True:
    i += 1
    append_line_durable(sys.argv[1], json.dumps({"seq": i, "pad": "x" * (i % 5000)}))
"""


def _start(code: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


def test_killed_writer_leaves_old_or_new_content_never_partial(tmp_path):
    target = tmp_path / "state.bin"
    target.write_bytes(OLD)
    rng = random.Random(7)
    seen_new = 0
    for _ in range(12):
        proc = _start(WRITER, str(target))
        time.sleep(rng.uniform(0.0, 0.25))  # a random moment in the writer's loop, not an assertion
        _kill(proc)
        data = target.read_bytes()
        if data == OLD:
            continue
        seen_new += 1
        assert len(data) == SIZE and data == data[:1] * SIZE, "a reader found a partial or mixed file"
    # temp files of the killed writers are the only debris; the target is always whole
    assert all(p.name.startswith(".state.bin.") and p.suffix == ".tmp"
               for p in tmp_path.iterdir() if p != target)
    assert seen_new > 0, "the writer never got a replace done; the test proved nothing"


def test_failed_replace_removes_the_temp_file_and_keeps_the_target(tmp_path):
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    (target / "keep").write_text("kept")
    with pytest.raises(OSError):
        write_atomic(target, "new content")  # rename over a non-empty directory fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir-in-the-way"]
    assert (target / "keep").read_text() == "kept"


def test_replace_sets_the_mode_and_creates_the_parent(tmp_path):
    target = tmp_path / "a" / "b" / "client.cnf"
    write_atomic(target, "[client]\n", mode=0o600)
    assert target.read_text() == "[client]\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    assert json.loads(target.read_text()) == {"a": [1, 2], "b": 1}
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_replace_fsyncs_the_directory_after_the_rename(tmp_path, monkeypatch):
    """A spy around the real fsync_dir: the rename is only durable once the directory is synced."""
    calls = []
    real = durable.fsync_dir

    def spy(path):
        calls.append((Path(path), Path(tmp_path, "f").read_text()))  # the new content is in place by then
        real(path)

    monkeypatch.setattr(durable, "fsync_dir", spy)
    write_atomic(tmp_path / "f", "new")
    assert calls == [(tmp_path, "new")]


def test_fsync_helpers_work_on_real_files_and_directories(tmp_path):
    (tmp_path / "f").write_text("x")
    durable.fsync_file(tmp_path / "f")
    durable.fsync_dir(tmp_path)
    with pytest.raises(NotADirectoryError):
        durable.fsync_dir(tmp_path / "f")


def test_journal_append_adds_whole_lines_and_syncs_the_new_directory_entry(tmp_path, monkeypatch):
    dirs = []
    real = durable.fsync_dir
    monkeypatch.setattr(durable, "fsync_dir", lambda p: (dirs.append(Path(p)), real(p)))
    journal = tmp_path / "journal.jsonl"
    append_line_durable(journal, '{"step": 1}')
    append_line_durable(journal, '{"step": 2}\n')  # a trailing newline is not doubled
    assert journal.read_text() == '{"step": 1}\n{"step": 2}\n'
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert dirs == [tmp_path]  # only the creation needed the directory synced


def test_killed_appender_leaves_only_whole_records(tmp_path):
    journal = tmp_path / "journal.jsonl"
    rng = random.Random(8)
    for _ in range(6):
        proc = _start(APPENDER, str(journal))
        time.sleep(rng.uniform(0.02, 0.2))
        _kill(proc)
    text = journal.read_text()
    assert text.endswith("\n")
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) > 6
    assert all(set(r) == {"seq", "pad"} for r in records)
