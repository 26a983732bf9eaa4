"""The copy on its own, on small trees: holes, owner, mode and mtime kept, a corrupted copy caught (before and
after the copy's own read-back), a delta pass, the manifest's round trip, a stopped source read past the page
cache where it is not cached."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import mvhelpers

from datadir_mover.move.copy import blocks
from datadir_mover.move.copy import file as file_mod
from datadir_mover.move.copy import tree as tree_mod
from datadir_mover.move.copy import RACY_MARGIN_NS, Manifest, copy_tree, digest_file, recheck_sources, verify_tree, walk
from tuner.core.errors import MoveError


def test_copy_keeps_holes_owner_mode_and_verifies(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    mvhelpers.write_sparse(src / "ibdata1", 64 << 20, [(0, os.urandom(1 << 20)), (40 << 20, os.urandom(4096))])
    (src / "db" / "t.ibd").write_bytes(os.urandom(300_000))
    os.chmod(src / "db" / "t.ibd", 0o640)
    os.chown(src / "db" / "t.ibd", 65534, 65534)
    os.symlink("t.ibd", src / "db" / "link")
    dst.mkdir()
    manifest, stats = copy_tree(src, dst, walk(src), stable=True)
    assert stats.files_copied == 2 and all(r.verified for r in manifest.records.values())
    s, d = os.stat(src / "ibdata1"), os.stat(dst / "ibdata1")
    assert d.st_size == s.st_size and d.st_blocks * 512 < 8 << 20, "holes were filled"
    assert digest_file(str(src / "ibdata1")) == digest_file(str(dst / "ibdata1"))
    t = os.stat(dst / "db" / "t.ibd")
    assert (t.st_uid, t.st_gid, t.st_mode & 0o777) == (65534, 65534, 0o640)
    assert t.st_mtime_ns == os.stat(src / "db" / "t.ibd").st_mtime_ns
    assert os.readlink(dst / "db" / "link") == "t.ibd"


def test_verify_catches_a_corrupted_copy(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_bytes(os.urandom(100_000))
    manifest, _ = copy_tree(src, dst, walk(src), verify=False)
    with open(dst / "f", "r+b") as fh:
        fh.seek(5000)
        fh.write(b"\x00\x01")
    with pytest.raises(MoveError, match="differs from its source"):
        verify_tree(manifest)


def test_verify_reads_again_a_copy_changed_after_the_copy_read_it_back(tmp_path):
    """The mover's COPY reads each copy back as it writes it; a byte changed on the target after that (its mtime put
    back, as a careless tool might) is caught by VERIFY, which reads again every copy whose stat moved."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_bytes(os.urandom(300_000))
    (src / "g").write_bytes(os.urandom(300_000))
    manifest, _ = copy_tree(src, dst, walk(src), verify=True, stable=True)
    assert all(r.verified for r in manifest.records.values())
    verify_tree(manifest)  # nothing changed: passes
    st = os.stat(dst / "g")
    with open(dst / "g", "r+b") as fh:
        fh.seek(123_456)
        byte = fh.read(1)
        fh.seek(123_456)
        fh.write(bytes([byte[0] ^ 0x01]))
    os.utime(dst / "g", ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(MoveError, match="copy .*g .*differs from its source"):
        verify_tree(manifest)


def test_copy_read_back_catches_a_byte_changed_between_write_and_read_back(tmp_path, monkeypatch):
    """Fault injected: a byte of the target flipped after the copy wrote and fsynced it, before its read-back (the only
    read-back of a mover's offline copy now that COPY does it): the copy stops on it."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "ibdata1").write_bytes(os.urandom(3 * MiB + 1234))
    _drop_cache(src / "ibdata1")
    real = tree_mod.copy_file

    def copy_then_flip(src_path, dst_path, *args):
        fc = real(src_path, dst_path, *args)
        with open(dst_path, "r+b") as fh:
            fh.seek(2 * MiB + 77)
            byte = fh.read(1)
            fh.seek(2 * MiB + 77)
            fh.write(bytes([byte[0] ^ 0x01]))
        return fc

    monkeypatch.setattr(tree_mod, "copy_file", copy_then_flip)
    with pytest.raises(MoveError, match="differs from its source"):
        copy_tree(src, dst, walk(src), verify=True, stable=True)


def test_delta_pass_recopies_changed_and_racy_files_only(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    for name in ("cold", "hot", "gone"):
        (src / name).write_bytes(os.urandom(50_000))
    old = time.time_ns() - 10 * RACY_MARGIN_NS
    os.utime(src / "cold", ns=(old, old))
    os.utime(src / "hot", ns=(old, old))
    os.utime(src / "gone", ns=(old, old))
    # ctime cannot be set back; pretend the pre-copy read them much later than any change
    pre, _ = copy_tree(src, dst, walk(src))
    for rec in pre.records.values():
        rec.read_at_ns += 10 * RACY_MARGIN_NS
    (src / "hot").write_bytes(os.urandom(50_000))
    (src / "gone").unlink()
    final, stats = copy_tree(src, dst, walk(src), previous=pre)
    assert stats.files_skipped == 1 and stats.files_copied == 1 and stats.files_removed == 1
    assert not (dst / "gone").exists()
    assert digest_file(str(dst / "hot")) == digest_file(str(src / "hot"))
    assert recheck_sources(final) == []
    # a file modified just before the pre-copy read it is "racily clean": copied again
    racy, _ = copy_tree(src, dst, walk(src))
    again, st2 = copy_tree(src, dst, walk(src), previous=racy)
    assert st2.files_skipped == 0


def test_manifest_round_trip(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    (tmp_path / "b").mkdir()
    m, _ = copy_tree(tmp_path / "a", tmp_path / "b", walk(tmp_path / "a"))
    assert Manifest.from_dict(m.to_dict()).to_dict() == m.to_dict()


# ---------------------------------------------------------------- an extent map that lies

MiB = 1 << 20


def _lying_map(real, lo: int, hi: int):
    """SEEK_DATA/SEEK_HOLE as ``real`` reports them, but with [lo, hi) reported as a hole."""

    def extents(fd, start, end):
        out = []
        for a, b in real(fd, start, end):
            out += [(a, min(b, lo))] if a < lo else []
            out += [(max(a, hi), b)] if b > hi else []
        return out

    return extents


def _drop_cache(path) -> None:
    """Evict a file's pages from the page cache, as a stopped server's O_DIRECT files are; checked with mincore."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert not any(blocks.cached_pages(fd, os.fstat(fd).st_size)), "the page cache kept the file"
    finally:
        os.close(fd)


def _cached(path) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return blocks.cached_pages(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _all_data(tmp_path, cache: str = "cached", layout: str = "allocated"):
    """A source whose first 3 MiB are data everywhere: the whole file (``allocated``: copied by its bytes alone), or
    followed by a 5 MiB hole (``sparse``: copied by the extent map's rule, checked against the bytes)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "ibdata1").write_bytes(os.urandom(3 * MiB))  # data everywhere, no hole
    if layout == "sparse":
        os.truncate(src / "ibdata1", 8 * MiB)
    if cache == "uncached":  # read with O_DIRECT by a copy of the stopped source
        _drop_cache(src / "ibdata1")
    return src, dst


def test_stopped_source_is_read_past_the_page_cache_where_it_is_not_cached(tmp_path):
    """A stopped source's uncached pages are read with O_DIRECT (they stay uncached), its cached ones through the
    cache; the copy is exact either way, a file whose length is not a multiple of the block size included."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "cold.ibd").write_bytes(os.urandom(5 * MiB + 1234))
    mvhelpers.write_sparse(src / "ibdata1", 6 * MiB + 512, [(0, os.urandom(MiB)), (4 * MiB, os.urandom(8192))])
    (src / "warm.ibd").write_bytes(os.urandom(2 * MiB))
    for name in ("cold.ibd", "ibdata1"):
        _drop_cache(src / name)
    fd = os.open(src / "cold.ibd", os.O_RDONLY)
    try:  # its first MiB cached again, without read-ahead: that part is read through the cache
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(fd, MiB, 0)
    finally:
        os.close(fd)
    assert all(_cached(src / "cold.ibd")[:MiB // 4096]) and not any(_cached(src / "cold.ibd")[MiB // 4096:])
    m, _ = copy_tree(src, dst, walk(src), verify=True, stable=True)
    assert not any(_cached(src / "cold.ibd")[MiB // 4096:]) and not any(_cached(src / "ibdata1")), \
        "the copy read the uncached part through the page cache"
    assert all(_cached(src / "warm.ibd"))
    for name in ("cold.ibd", "ibdata1", "warm.ibd"):
        assert (dst / name).read_bytes() == (src / name).read_bytes()
        assert m.records[name].verified and m.records[name].digest == digest_file(str(src / name), drop_cache=False)
    assert os.stat(dst / "ibdata1").st_blocks * 512 < 3 * MiB, "holes were filled"


@pytest.mark.parametrize("layout", ["allocated", "sparse"])
@pytest.mark.parametrize("cache", ["cached", "uncached"])
def test_offline_copy_copies_data_the_extent_map_calls_a_hole(tmp_path, monkeypatch, cache, layout):
    """Fault injected: the file system's extent map reports [1 MiB, 2 MiB) of a stopped source as a hole.  The copy
    reads it all the same (through the page cache, or past it when the source is not cached), finds it is not
    zeros and writes it."""
    src, dst = _all_data(tmp_path, cache, layout)
    monkeypatch.setattr(blocks, "data_extents", _lying_map(blocks.data_extents, MiB, 2 * MiB))
    with open(src / "ibdata1", "rb") as fh:
        assert blocks.data_extents(fh.fileno(), 0, 3 * MiB) == [(0, MiB), (2 * MiB, 3 * MiB)]
    m, _ = copy_tree(src, dst, walk(src), stable=True)
    assert (dst / "ibdata1").read_bytes() == (src / "ibdata1").read_bytes()
    assert m.records["ibdata1"].verified and m.records["ibdata1"].digest == digest_file(str(src / "ibdata1"))


@pytest.mark.parametrize("layout", ["allocated", "sparse"])
@pytest.mark.parametrize("cache", ["cached", "uncached"])
def test_read_back_catches_a_copy_that_trusted_a_lying_extent_map(tmp_path, monkeypatch, cache, layout):
    """Fault injected twice: the map lies, and the copy is made to believe it (the unwritten range stays a hole on the
    target), or, for a source allocated whole, believes its data is zeros (left unwritten, then allocated).  The
    source's digest is of what was read, the read-back reads the target's unwritten range as zeros: caught."""
    src, dst = _all_data(tmp_path, cache, layout)
    monkeypatch.setattr(blocks, "data_extents", _lying_map(blocks.data_extents, MiB, 2 * MiB))
    monkeypatch.setattr(file_mod, "_nonzero_gaps", lambda data, c, ce, extents, digests: [])
    monkeypatch.setattr(file_mod, "_all_zeros", lambda digests, length: True)
    with pytest.raises(MoveError, match="differs from its source"):
        copy_tree(src, dst, walk(src), stable=True)


def test_read_back_reads_what_the_target_map_calls_a_hole(tmp_path, monkeypatch):
    """A flipped byte in a range the target's extent map reports as a hole is still read back, and caught."""
    src, dst = _all_data(tmp_path)
    m, _ = copy_tree(src, dst, walk(src), verify=False, stable=True)
    with open(dst / "ibdata1", "r+b") as fh:
        fh.seek(MiB + 4242)
        fh.write(b"\xff\x00")
    monkeypatch.setattr(blocks, "data_extents", lambda fd, start, end: [])  # "all of it is a hole"
    with pytest.raises(MoveError, match="differs from its source"):
        verify_tree(m)


# ---------------------------------------------------------------- a source allocated whole


def _allocated_with_zeros(src) -> int:
    """A tablespace allocated whole (no hole) whose [1 MiB, 3 MiB) are zeros written as data, cached, so the extent
    map calls every byte data (as a warm redo log's preallocated zeros); its size."""
    path = src / "ibdata1"
    path.write_bytes(os.urandom(MiB) + bytes(2 * MiB) + os.urandom(100_000))
    st = os.stat(path)
    assert st.st_blocks * 512 >= st.st_size and all(_cached(path))
    with open(path, "rb") as fh:
        assert blocks.data_extents(fh.fileno(), 0, st.st_size) == [(0, st.st_size)]
    return st.st_size


@pytest.mark.parametrize("target", ["disk", "tmpfs"])
def test_source_allocated_whole_leaves_its_zeros_unwritten_and_allocated(tmp_path, request, target):
    """A source allocated whole is copied by its bytes: its chunks of zeros are not written but allocated (the
    copy is allocated whole and equal), and the read-back reads them from the target all the same."""
    src = tmp_path / "src"
    src.mkdir()
    size = _allocated_with_zeros(src)
    base = tmp_path if target == "disk" else Path(request.getfixturevalue("mv_tiers")["tmpfs"])
    dst = base / "allocated-copy"
    dst.mkdir()
    try:
        m, stats = copy_tree(src, dst, walk(src), verify=True, stable=True)
        assert stats.bytes_copied == size - 2 * MiB, "the chunks of zeros were written"
        d = os.stat(dst / "ibdata1")
        assert d.st_size == size and d.st_blocks * 512 >= size, "the copy of a source allocated whole is sparse"
        assert (dst / "ibdata1").read_bytes() == (src / "ibdata1").read_bytes()
        assert m.records["ibdata1"].verified and m.records["ibdata1"].digest == digest_file(str(src / "ibdata1"))
    finally:
        shutil.rmtree(dst)


@pytest.mark.parametrize("target", ["disk", "tmpfs"])
def test_read_back_catches_a_byte_changed_in_the_zeros_the_copy_left_unwritten(tmp_path, request, monkeypatch,
                                                                               target):
    """Fault injected: a byte flipped, after the write and before the read-back, inside the zeros the copy left
    unwritten and allocated.  The read-back reads the target's bytes there, not what the copy knows it wrote:
    caught.  On tmpfs the copy read each chunk back as it wrote it, so the byte is flipped after that read-back:
    the target's stat moved since, so the copy is read back whole again, and that catches it."""
    src = tmp_path / "src"
    src.mkdir()
    _allocated_with_zeros(src)
    base = tmp_path if target == "disk" else Path(request.getfixturevalue("mv_tiers")["tmpfs"])
    dst = base / "allocated-flipped"
    dst.mkdir()
    real = tree_mod.copy_file

    def copy_then_flip(src_path, dst_path, *args):
        fc = real(src_path, dst_path, *args)
        assert all(b <= MiB or a >= 3 * MiB for a, b in fc.written), "the chunks of zeros were written"
        with open(dst_path, "r+b") as fh:
            fh.seek(2 * MiB + 77)
            fh.write(b"\x01")
        return fc

    monkeypatch.setattr(tree_mod, "copy_file", copy_then_flip)
    whole = "checksum of the copy .* differs from its source"  # the whole file read back, after the copy
    try:
        with pytest.raises(MoveError, match=whole):
            copy_tree(src, dst, walk(src), verify=True, stable=True)
    finally:
        shutil.rmtree(dst)


# ---------------------------------------------------------------- a copy onto memory, read back as it is written


@pytest.fixture
def memory_copy(tmp_path, mv_tiers):
    """(src, dst): an empty source directory under tmp_path and an empty target directory on the session's tmpfs
    (removed afterwards)."""
    src, dst = tmp_path / "src", Path(mv_tiers["tmpfs"]) / "read-back-as-written"
    src.mkdir()
    dst.mkdir()
    yield src, dst
    shutil.rmtree(dst)


AS_WRITTEN = "differs from its source at byte .* when read back right after it was written"


def test_memory_copy_is_read_back_as_written_and_not_again(memory_copy, monkeypatch):
    """A copy onto tmpfs is read back chunk by chunk as it is written (every byte: data, the zeros left unwritten
    and allocated, a sparse file's hole), and neither COPY nor VERIFY reads it whole again while its stat holds."""
    src, dst = memory_copy
    (src / "ibdata1").write_bytes(os.urandom(MiB) + bytes(2 * MiB) + os.urandom(100_000))  # allocated whole
    mvhelpers.write_sparse(src / "t.ibd", 5 * MiB, [(0, os.urandom(MiB)), (4 * MiB, os.urandom(4096))])
    size = sum(os.stat(src / n).st_size for n in ("ibdata1", "t.ibd"))
    read_back, whole = [], []
    real_chunk, real_whole = file_mod.read_back_chunk, tree_mod.digest_file
    monkeypatch.setattr(file_mod, "read_back_chunk", lambda fd, a, b: read_back.append(b - a) or real_chunk(fd, a, b))
    monkeypatch.setattr(tree_mod, "digest_file", lambda *a, **k: whole.append(a[0]) or real_whole(*a, **k))
    m, _ = copy_tree(src, dst, walk(src), verify=True, stable=True)
    verify_tree(m)
    assert sum(read_back) == size and not whole, "read back in part, or twice"
    for name in ("ibdata1", "t.ibd"):
        assert (dst / name).read_bytes() == (src / name).read_bytes() and m.records[name].verified
    assert os.stat(dst / "t.ibd").st_blocks * 512 < 2 * MiB, "the read-back filled the holes"


@pytest.mark.parametrize("where", ["data", "allocated zeros", "hole"])
def test_memory_copy_read_back_catches_a_byte_changed_between_write_and_read_back(memory_copy, monkeypatch, where):
    """Fault injected: the target's byte at 2 MiB + 77 changed after the copy wrote its chunk and before the chunk
    is read back (as a medium returning other bytes would): in a chunk written, in the zeros a source allocated
    whole leaves unwritten (allocated before the writes), in a sparse source's hole.  Caught by that chunk's
    read-back, before the copy goes on."""
    src, dst = memory_copy
    if where == "data":
        (src / "ibdata1").write_bytes(os.urandom(3 * MiB))
    elif where == "allocated zeros":
        (src / "ibdata1").write_bytes(os.urandom(MiB) + bytes(2 * MiB) + os.urandom(100_000))
    else:
        mvhelpers.write_sparse(src / "ibdata1", 4 * MiB, [(0, os.urandom(MiB)), (3 * MiB, os.urandom(4096))])
    real = file_mod.read_back_chunk
    flipped = []

    def flip_then_read_back(fd, start, end):
        if start <= 2 * MiB + 77 < end:
            before = os.pread(fd, 1, 2 * MiB + 77)
            wfd = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)  # the file being read back, whatever its name
            try:
                os.pwrite(wfd, bytes([before[0] ^ 0x01]), 2 * MiB + 77)
            finally:
                os.close(wfd)
            flipped.append(before)
        return real(fd, start, end)

    monkeypatch.setattr(file_mod, "read_back_chunk", flip_then_read_back)
    with pytest.raises(MoveError, match=AS_WRITTEN):
        copy_tree(src, dst, walk(src), verify=True, stable=True)
    assert flipped


def test_memory_copy_read_back_catches_a_short_write(memory_copy, monkeypatch):
    """Fault injected: every write to the target drops its last byte and reports it written (a short write not
    reported): the first chunk's read-back catches it."""
    src, dst = memory_copy
    (src / "ibdata1").write_bytes(os.urandom(3 * MiB))
    real = file_mod.write_all
    monkeypatch.setattr(file_mod, "write_all", lambda fd, data, off: real(fd, data[:-1], off))
    with pytest.raises(MoveError, match=AS_WRITTEN):
        copy_tree(src, dst, walk(src), verify=True, stable=True)


@pytest.mark.parametrize("layout", ["allocated", "sparse"])
def test_memory_copy_read_back_catches_a_copy_that_trusted_a_lying_extent_map(memory_copy, monkeypatch, layout):
    """Fault injected twice, onto tmpfs: the map reports [1 MiB, 2 MiB) of the source as a hole and the copy is made
    to believe it (left unwritten: a hole, or allocated zeros for a source allocated whole).  The chunk's
    read-back reads zeros there, the source's digest is of the data read: caught."""
    src, dst = memory_copy
    (src / "ibdata1").write_bytes(os.urandom(3 * MiB))
    if layout == "sparse":
        os.truncate(src / "ibdata1", 8 * MiB)
    monkeypatch.setattr(blocks, "data_extents", _lying_map(blocks.data_extents, MiB, 2 * MiB))
    monkeypatch.setattr(file_mod, "_nonzero_gaps", lambda data, c, ce, extents, digests: [])
    monkeypatch.setattr(file_mod, "_all_zeros", lambda digests, length: True)
    with pytest.raises(MoveError, match=AS_WRITTEN):
        copy_tree(src, dst, walk(src), verify=True, stable=True)
