"""Verified, durable, sparse-aware copies of InnoDB files, at the device's speed.

A copy is not trusted until it has been read back from the target and its checksum matches
the source's.  The modules, lowest first:

- ``manifest``: what a pass wrote (``FileRecord``, ``Manifest``, ``CopyStats``) and ``walk``;
- ``blocks``: the sizes (piece, chunk, block), digests, the read-back, ``StaleBlocks``;
- ``pages``: the InnoDB page format and the LSN-skip rule (why skipping is safe);
- ``redo``: the redo-log format, and the files the server may write through a mapping;
- ``delta``: a changed file copied by reading only its stale blocks;
- ``safe_fs``: a tree changed through directory descriptors, no link followed (the server's user writes there);
- ``file``: one file's copy; ``tree``: a tree's copy and its verification.
"""

from datadir_mover.move.copy.blocks import (BLOCK, CHUNK, PIECE, WORKERS, StaleBlocks, combine, digest_file,
                                            file_blocks, on_memory_fs, pieces)
from datadir_mover.move.copy.file import FileCopy, copy_file
from datadir_mover.move.copy.manifest import CopyStats, FileRecord, Manifest, allocated_bytes, logical_bytes, walk
from datadir_mover.move.copy.pages import TABLESPACE_NAME, stale_pages
from datadir_mover.move.copy.redo import REDO_NAME, SERVER_MAPPED_NAME, redo_stale_blocks
from datadir_mover.move.copy.safe_fs import Tree, UnsafePath, remove_all
from datadir_mover.move.copy.tree import (RACY_MARGIN_NS, copy_tree, recheck_sources,
                                          verify_tree)

__all__ = ["BLOCK", "CHUNK", "PIECE", "WORKERS", "StaleBlocks", "combine", "digest_file", "file_blocks",
           "on_memory_fs", "pieces", "FileCopy", "copy_file", "CopyStats", "FileRecord", "Manifest",
           "allocated_bytes", "logical_bytes", "walk", "TABLESPACE_NAME", "stale_pages", "REDO_NAME",
           "SERVER_MAPPED_NAME", "redo_stale_blocks", "Tree", "UnsafePath", "remove_all",
           "RACY_MARGIN_NS", "copy_tree", "recheck_sources",
           "verify_tree"]
