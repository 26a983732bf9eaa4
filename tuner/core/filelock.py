"""One process at a time: an exclusive ``flock`` on a lock file, held by an open descriptor.

The kernel drops the lock when the descriptor is closed or its process dies (a SIGKILLed
holder never blocks the next one), and the descriptor is not inherited across exec (Python's
default), so a server or prover started by the holder does not keep it.  The lock file is
opened without following a link (it lives in a directory of ours, but a link planted there is
refused, not followed) and created 0600.  A holder may write a line into it that a refused
process reads to name who holds it.
"""

from __future__ import annotations

import fcntl
import os


def try_lock(path: str | os.PathLike, wait: bool = False) -> int | None:
    """The descriptor holding an exclusive lock on ``path``; None when another process holds it (without
    ``wait``; with it, block until it is free).  Closing the descriptor releases the lock; OSError when the
    file cannot be opened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def set_holder(fd: int, line: str) -> None:
    """Say who holds the lock (read by ``holder``), replacing what an earlier holder wrote."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{line}\n".encode(), 0)


def holder(path: str | os.PathLike) -> str:
    """What the holder of ``path`` wrote into it ("" when nothing or the file is gone)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(200).decode(errors="replace").strip()
    except OSError:
        return ""
