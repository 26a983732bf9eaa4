"""The repository is self-contained: nothing reads or points outside the checkout.

A plain `git clone` must run every test; recorded fixtures live in tests/fixtures/recorded/<group>/ with
their provenance.  Two proofs: no file in the checkout names the old folder beside it, and the test
modules that used to read it pass in a copy of the checkout sitting alone in a temporary directory (the
same copy `.ci/run` makes for the whole suite, by scripts/copy-checkout).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# spelled in pieces so that this file does not match itself
OUTSIDE = ("../" + "shared", "/work/" + "shared")
# the modules that read recorded fixtures from beside the checkout before they moved into the repository
AFFECTED = ["tests/tiers/test_tiers_recorded.py", "tests/tpcc/test_adapters_parsers.py",
            "tests/tiers/test_tiers_raid_formula.py", "tests/profiles/test_profiles_lint_corpus.py"]


def checkout_files() -> list[Path]:
    """Tracked files that exist, and untracked files git does not ignore (what scripts/copy-checkout copies)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, check=True).stdout.decode()
    return [REPO / f for f in out.split("\0") if f and (REPO / f).is_file()]


def copy_checkout(dest: Path) -> Path:
    subprocess.run(["bash", str(REPO / "scripts" / "copy-checkout"), str(dest)], check=True, capture_output=True)
    return dest


def test_no_file_names_a_folder_outside_the_checkout():
    offenders = []
    for path in checkout_files():
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if any(o in line for o in OUTSIDE):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not offenders, "files point outside the checkout (copy what they need into the repository):\n" + \
        "\n".join(offenders)


def test_recorded_fixture_groups_carry_their_provenance(fixtures_dir):
    assert fixtures_dir == REPO / "tests" / "fixtures" / "recorded"
    groups = sorted(p.name for p in fixtures_dir.iterdir() if p.is_dir())
    assert groups == ["distro-packages", "hardware", "hardware-lab", "innodb-status", "local-tiers", "peer-output",
                      "placement-goal-run"]
    for g in groups:
        readmes = list((fixtures_dir / g).glob("README*"))
        assert len(readmes) == 1, g
        text = readmes[0].read_text()
        # every file of the group is named in its README (sysfs trees by their top folder)
        for f in (fixtures_dir / g).rglob("*"):
            if f.is_file() and not f.name.startswith("README"):
                top = f.relative_to(fixtures_dir / g).parts
                assert f.name in text or top[0] in text, f"{g}: {f} is not described in {readmes[0].name}"


def test_copy_checkout_copies_only_the_checkout(tmp_path):
    copy = copy_checkout(tmp_path / "innotier")
    assert sorted(os.listdir(tmp_path)) == ["innotier"]
    assert not (copy / ".venv").exists()
    copied = {str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert copied == {str(p.relative_to(REPO)) for p in checkout_files()}
    # the copy is a repository whose one commit holds those files (the newcomer test clones it)
    head = subprocess.run(["git", "ls-files"], cwd=copy, capture_output=True, text=True, check=True).stdout
    assert set(head.split()) == copied
    # bad input: a non-empty destination is refused, nothing written
    r = subprocess.run(["bash", str(REPO / "scripts" / "copy-checkout"), str(copy)], capture_output=True, text=True)
    assert r.returncode == 2 and "not empty" in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.mark.slow
def test_affected_modules_pass_in_a_lone_copy(tmp_path):
    copy = copy_checkout(tmp_path / "innotier")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    # the copy's own modules are the ones imported (cwd first on sys.path), not the checkout's
    where = subprocess.run([sys.executable, "-c", "import tuner, datadir_mover; print(tuner.__file__)"],
                           cwd=copy, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(copy / "tuner" / "__init__.py")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *AFFECTED],
                       cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in last and "failed" not in last and "error" not in last, last
