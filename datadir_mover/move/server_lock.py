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

import os
import re
import weakref
from pathlib import Path

from tuner.core.errors import MoveError
from tuner.core.filelock import holder, set_holder, try_lock

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
        fd = try_lock(self.path)
        if fd is None:
            other, pid = (holder(self.path).split() + ["?", "?"])[:2]
            raise MoveError(f"move {other} of {self.server_key} is at work in process {pid}: one move per server at a "
                            f"time; wait for it to finish (`innotier move status`), then plan again")
        set_holder(fd, f"{move_id} {os.getpid()}")
        self._fd = fd
        self._closer = weakref.finalize(self, os.close, fd)  # an executor dropped without run() frees the server
        return self

    def release(self) -> None:
        if self._closer is not None:
            self._closer()  # closes the descriptor once: the kernel drops the lock
            self._closer = None
        self._fd = None
