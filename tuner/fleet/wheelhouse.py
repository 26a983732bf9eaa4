"""The wheel of the running innotier and a wheelhouse of its dependencies, for offline installs on hosts.

Fleet hosts often reach no package index (database servers in a closed network), so the install playbook
copies a wheelhouse and installs with ``pip --no-index``.  The controller builds it:

- innotier's own wheel from the source tree this innotier runs from (``pip wheel --no-deps``), or a wheel
  the user gives (``--wheel``);
- its dependencies with ``pip download`` into a per-machine cache (``innotier_cache()/wheelhouse``),
  where they stay: a second install downloads nothing.

The hosts need the same Python minor version and platform as the controller (wheels are binary).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import tuner
from tuner.core.errors import FleetError
from tuner.core.paths import innotier_cache


@dataclass
class Wheelhouse:
    directory: Path  # holds every wheel the install needs
    wheel: Path  # innotier's own wheel (inside directory)
    version: str
    archive: Path  # the directory as one tar file: one transfer per host instead of one per wheel

    def to_dict(self) -> dict[str, str]:
        return {"directory": str(self.directory), "wheel": self.wheel.name, "version": self.version,
                "archive": str(self.archive)}


def source_tree() -> Path | None:
    """The checkout this innotier runs from (editable install), or None for an installed wheel."""
    root = Path(tuner.__file__).resolve().parent.parent
    return root if (root / "setup.cfg").is_file() and (root / "tuner").is_dir() else None


PIP_FIX = "fix the cause or give --wheel and a reachable index"
# a setuptools older than 70.1 builds wheels only with the `wheel` package installed beside it
NO_WHEEL_FIX = "install the wheel package into this virtualenv (`pip install wheel`) or give --wheel FILE"


def pip_reason(text: str) -> str:
    """The cause in pip's output.  A failed build ends with "See above for details": the cause is then the
    build's own output, which pip frames between "[N lines of output]" and "[end of output]"."""
    framed: list[str] = []
    inside = False
    for line in text.splitlines():
        s = line.strip()
        if s.endswith("lines of output]"):
            inside, framed = True, []
        elif s == "[end of output]":
            inside = False
        elif inside and s:
            framed.append(s)
    lines = framed or [ln.strip() for ln in text.splitlines()
                       if ln.strip() and not ln.strip().startswith(("hint:", "note:"))]
    return " | ".join(lines[-3:]) or "no output"


def _pip(*args: str, what: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        text = r.stderr + "\n" + r.stdout
        fix = NO_WHEEL_FIX if "bdist_wheel" in text else PIP_FIX
        raise FleetError(f"{what} failed: {pip_reason(text)}; {fix}")


def build_wheel(out: Path, wheel: str | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if wheel:
        src = Path(wheel)
        if not src.is_file() or not src.name.startswith("innotier-") or src.suffix != ".whl":
            raise FleetError(f"--wheel {wheel} is not an innotier wheel file; give the path of innotier-*.whl")
        dst = out / src.name
        shutil.copy2(src, dst)
        return dst
    tree = source_tree()
    if tree is None:
        raise FleetError("this innotier was installed from a wheel and cannot rebuild it; give --wheel PATH "
                         "(the innotier-*.whl it was installed from)")
    for old in out.glob("innotier-*.whl"):
        old.unlink()
    _pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree), what="building innotier's wheel")
    found = sorted(out.glob("innotier-*.whl"))
    if not found:
        raise FleetError(f"pip built no innotier wheel in {out}; run `pip wheel {tree}` to see why")
    return found[-1]


def _remove_own_wheels(directory: Path) -> None:
    for stale in directory.glob("innotier-*.whl"):
        stale.unlink()


def build_wheelhouse(workdir: Path, wheel: str | None = None, echo=print) -> Wheelhouse:
    """innotier's wheel in ``workdir`` plus its dependencies (cached per machine), all in one directory."""
    deps = innotier_cache() / "wheelhouse" / f"py{sys.version_info.major}{sys.version_info.minor}"
    deps.mkdir(parents=True, exist_ok=True)
    own = build_wheel(workdir / "own", wheel)
    echo(f"fleet: innotier wheel {own.name}; dependencies cached in {deps}")
    # pip download puts the requested wheel itself into the cache too, and on the next build takes a file of the
    # same name found there instead of the one given: a stale innotier wheel (same version, older requirements)
    # would hide new dependencies.  Keep none there.
    _remove_own_wheels(deps)
    _pip("download", "-q", "--only-binary=:all:", "-d", str(deps), str(own), what="downloading the dependencies")
    _remove_own_wheels(deps)
    house = workdir / "wheelhouse"
    if house.exists():
        shutil.rmtree(house)
    house.mkdir(parents=True)
    for w in deps.glob("*.whl"):
        if not w.name.startswith("innotier-"):
            (house / w.name).symlink_to(w)
    shutil.copy2(own, house / own.name)
    archive = workdir / "wheelhouse.tar"
    with tarfile.open(archive, "w") as tar:  # wheels are compressed already
        for w in sorted(house.iterdir()):
            tar.add(w.resolve(), arcname=w.name)
    return Wheelhouse(directory=house, wheel=house / own.name, version=tuner.__version__, archive=archive)
