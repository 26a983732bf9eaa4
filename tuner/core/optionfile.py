"""Private (0600) option files for external tools, removed afterwards.

Credentials reach client tools (mariadb, pt-*, sysbench, peers) through a file
only the owner can read, never through argv.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterable, Iterator


@contextlib.contextmanager
def private_option_file(lines: Iterable[str], prefix: str = "innotier-", suffix: str = ".cnf") -> Iterator[str]:
    """Write ``lines`` to a new 0600 temporary file, yield its path, and remove it on exit."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, ("\n".join(lines) + "\n").encode())
        os.close(fd)
        fd = -1
        yield path
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
