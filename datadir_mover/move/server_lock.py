"""One move per server at a time: a lock per server, held from the confirmation until COMMIT or ROLLBACK.

The open-move check at plan time sees only journals that already have records, so two
`move apply` of the same server confirmed at the same moment would both pass it and both
stop, copy and switch the same files.  The mover that works on a move holds ``flock`` on
``moves/servers/<server key>.lock`` (the kernel drops it when the process dies, so a killed
mover never blocks its own resume) and writes its move id and pid into it, so a second one
refuses in one line naming the move at work.  Under the lock the open-move check runs again
before a new journal is created.
"""

from __future__ import annotations

import fcntl
import os
import re
import weakref
from pathlib import Path

from tuner.core.errors import MoveError

from datadir_mover.move.journal import moves_dir

LOCKS_DIR = "servers"


def lock_path(server_key: str) -> Path:
    return moves_dir() / LOCKS_DIR / (re.sub(r"[^A-Za-z0-9_.-]+", "_", server_key) + ".lock")


class ServerLock:
    """The lock of one server; ``acquire`` refuses in one line when another mover holds it."""

    def __init__(self, server_key: str):
        self.server_key = server_key
        self.path = lock_path(server_key)
        self._fd: int | None = None
        self._closer: weakref.finalize | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, move_id: str) -> "ServerLock":
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").split()
            os.close(fd)
            other, pid = (holder + ["?", "?"])[:2]
            raise MoveError(f"move {other} of {self.server_key} is at work in process {pid}: one move per server at a "
                            f"time; wait for it to finish (`innotier move status`), then plan again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{move_id} {os.getpid()}\n".encode(), 0)
        self._fd = fd
        self._closer = weakref.finalize(self, os.close, fd)  # an executor dropped without run() frees the server
        return self

    def release(self) -> None:
        if self._closer is not None:
            self._closer()  # closes the descriptor once: the kernel drops the lock
            self._closer = None
        self._fd = None
