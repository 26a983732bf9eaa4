"""The page size an existing datadir was initialized with, read from the system tablespace header.

Page 0 of ibdata1 starts with the FIL header (38 bytes, FIL_PAGE_DATA); the FSP header follows and
its FSP_SPACE_FLAGS field is the 4-byte big-endian word at offset 16 of it (absolute offset 54).
Flag layouts (storage/innobase/include/fsp0types.h in mysql-server and MariaDB/server):
- MySQL / MariaDB non-full_crc32: POST_ANTELOPE bit 0, ZIP_SSIZE bits 1-4, ATOMIC_BLOBS bit 5,
  PAGE_SSIZE bits 6-9; PAGE_SSIZE 0 means the original 16k.
- MariaDB 10.4+ full_crc32 (default for new files since 10.5): PAGE_SSIZE bits 0-3 and the marker
  bit 4 (FSP_FLAGS_FCRC32_POS_MARKER).  The system tablespace is never ROW_FORMAT=COMPRESSED, so bit
  4 is zero in the other layout.
In both, a PAGE_SSIZE s means 512 << s bytes (3 = 4k ... 7 = 64k).
Reading is a plain read of 58 bytes; nothing is written.
"""

from __future__ import annotations

import os
import struct

from tuner.core.errors import ProfileError

FSP_SPACE_FLAGS_OFFSET = 38 + 16
FCRC32_MARKER = 1 << 4
VALID = (4096, 8192, 16384, 32768, 65536)


def page_size_from_flags(flags: int) -> int:
    if flags & FCRC32_MARKER:
        ssize = flags & 0xF
    else:
        ssize = (flags >> 6) & 0xF
    size = 16384 if ssize == 0 else 512 << ssize
    if size not in VALID:
        raise ProfileError(f"tablespace flags 0x{flags:x} give no valid page size; the file is not an InnoDB "
                           "system tablespace or is damaged")
    return size


def read_page_size(ibdata: str | os.PathLike) -> int:
    """The page size recorded in an InnoDB data file's first page."""
    with open(ibdata, "rb") as fh:
        head = fh.read(FSP_SPACE_FLAGS_OFFSET + 4)
    if len(head) < FSP_SPACE_FLAGS_OFFSET + 4:
        raise ProfileError(f"{ibdata} is too short to be an InnoDB data file")
    (flags,) = struct.unpack(">I", head[FSP_SPACE_FLAGS_OFFSET:FSP_SPACE_FLAGS_OFFSET + 4])
    return page_size_from_flags(flags)


def system_tablespace_path(datadir: str, data_home_dir: str | None = None, data_file_path: str | None = None) -> str:
    """The first file of innodb_data_file_path (default ibdata1) under innodb_data_home_dir (default the datadir)."""
    first = (data_file_path or "ibdata1:12M:autoextend").split(";")[0].split(":")[0]
    home = data_home_dir or datadir
    if not os.path.isabs(home):
        home = os.path.join(datadir, home)
    return os.path.join(home, first)


def datadir_page_size(datadir: str, data_home_dir: str | None = None, data_file_path: str | None = None) -> int | None:
    """The datadir's page size, or None when it has no system tablespace yet (not initialized)."""
    path = system_tablespace_path(datadir, data_home_dir, data_file_path)
    if not os.path.isfile(path):
        return None
    return read_page_size(path)
