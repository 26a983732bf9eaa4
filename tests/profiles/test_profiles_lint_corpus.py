"""Lint finds the planted problem in every bad option file and reports nothing on the good ones.

Each corpus file says, in its header: `# target: FLAVOR-VERSION`, `# expect: SEVERITY OPTION`
(the planted finding), and optionally `# datadir: 8k` (a real 8k MariaDB datadir), `# tier: ramfs`
(a real ramfs mount) or `# tier: dax` (the recorded ext4-DAX mount in tests/fixtures/recorded/hardware).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from profiles.lint import lint_file
from profiles.target import parse_target

CORPUS = Path(__file__).resolve().parent / "corpus"
BAD = sorted(p for p in (CORPUS / "bad").glob("*.cnf"))
GOOD = sorted(p for p in (CORPUS / "good").glob("*.cnf"))


def header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^#\s*(target|expect|datadir|tier):\s*(.+)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def test_corpus_is_big_enough():
    assert len(BAD) >= 20 and len(GOOD) >= 3


def _context(h, request):
    kwargs = {}
    if h.get("datadir"):
        sb = request.getfixturevalue("page_sandboxes")(h["datadir"])
        kwargs["datadir"] = sb.datadir
    if h.get("tier") == "ramfs":
        if os.geteuid() != 0:
            pytest.fail("the ramfs corpus files need root (CI runs as root)")
        kwargs["tier_path"] = request.getfixturevalue("ramfs_dir")
    elif h.get("tier") == "dax":
        tier, mounts = request.getfixturevalue("dax_mount")
        kwargs["tier_path"], kwargs["mounts"] = tier, mounts
    return kwargs


@pytest.mark.root
@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_file_has_its_planted_finding(path, request):
    h = header(path)
    severity, option = h["expect"].split()
    target = parse_target(h["target"])
    findings = lint_file(path, target.flavor, target.version, **_context(h, request))
    hits = [f for f in findings if f.option == option and f.severity == severity]
    assert hits, f"{path.name}: expected {severity} on {option}, got {[(f.severity, f.option, f.reason) for f in findings]}"
    for f in findings:  # every finding is complete
        assert f.severity in ("error", "warning", "info") and f.reason and f.fix


@pytest.mark.parametrize("path", GOOD, ids=[p.stem for p in GOOD])
def test_good_file_has_no_findings(path):
    target = parse_target(header(path)["target"])
    findings = lint_file(path, target.flavor, target.version)
    assert findings == []


def test_typo_suggests_the_nearest_name():
    path = CORPUS / "bad" / "typo-flush-method.cnf"
    target = parse_target("mariadb-10.11")
    (f,) = [f for f in lint_file(path, target.flavor, target.version) if f.option == "innodb_flush_methd"]
    assert "innodb_flush_method" in f.fix and f.where.endswith("typo-flush-method.cnf:4")


def test_page_size_mismatch_points_to_sandbox_create(page_sandboxes):
    sb = page_sandboxes("8k")
    target = parse_target("mariadb-10.11")
    findings = lint_file(CORPUS / "bad" / "page-size-mismatch.cnf", target.flavor, target.version, datadir=sb.datadir)
    (f,) = [f for f in findings if f.option == "innodb_page_size"]
    assert "8k" in f.reason and "sandbox create" in f.fix and "--page-size 16k" in f.fix


def test_tmpfs_accepts_o_direct_on_this_kernel(tmp_path):
    """Probed, not assumed: on Linux >= 6.6 tmpfs takes O_DIRECT, so no finding (ramfs never does)."""
    from tuner.core.probe import mount_of, probe_o_direct

    shm = "/dev/shm"
    if mount_of(shm).fstype != "tmpfs":
        pytest.fail("/dev/shm is expected to be tmpfs on the CI machine")
    target = parse_target("mariadb-10.11")
    findings = lint_file(CORPUS / "bad" / "o-direct-on-ramfs.cnf", target.flavor, target.version, tier_path=shm)
    o_direct = [f for f in findings if f.option == "innodb_flush_method"]
    assert (o_direct == []) == probe_o_direct(shm)
