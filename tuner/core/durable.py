"""Durable writes: the one helper for option files, journals, state and results.

``write_atomic`` writes a temporary file beside the target, flushes and fsyncs
it, renames it over the target and fsyncs the directory, so a reader (or a
crash) sees either the old content or the new, never a mix.  On failure the
temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so that renames and creations inside it are durable."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes | str, mode: int = 0o644) -> Path:
    """Replace ``path`` with ``data`` atomically and durably; return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(target.parent)
    return target


def write_json_atomic(path: str | os.PathLike, obj: Any, mode: int = 0o644) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", mode)


def append_line_durable(path: str | os.PathLike, line: str, mode: int = 0o600) -> None:
    """Append one line (a journal record) and fsync it before returning; after a line a crash tore (no newline at
    the end of the file) it starts a new line, so the record stays whole."""
    p = Path(path)
    new = not p.exists()
    fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (("\n" if torn else "") + line.rstrip("\n") + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(p.parent)
