"""Building, registering, exporting and importing server distributions.

``plan_install(name)`` says what will happen (printable); ``install(plan)`` does it:

- a tree distribution: ``debootstrap --variant=minbase SUITE DIR MIRROR`` into a staging directory,
  ``apt-get install --no-install-recommends PACKAGES`` inside it (chroot; root is needed here and only here),
  a check that the archive still serves the distribution's series, stripping of apt caches, lists and docs,
  then the manifest and an atomic rename into place;
- a host distribution: the installed package's binary is registered (manifest only).

``export(name, file)`` writes ``<name>/`` as a ``.tar.zst``; ``install_from_archive(file)`` unpacks one,
verifies its manifest against its binary and only then puts it in place.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tuner.core.errors import ServerError, ToolMissing, UsageError
from tuner.core.server import Version
from tuner.core.servers.distributions import DEBIAN_MIRROR, Distribution, get, known_names
from tuner.core.servers.tree import (MANIFEST, InstalledServer, Manifest, installed, read_manifest, servers_dir,
                                     sha256_file, tree_bytes, tree_launcher, VERIFIED, write_manifest)

Progress = Callable[[str], None]

# removed from a built tree: nothing the server needs at run time
STRIP = ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info",
         "usr/share/locale", "var/cache/debconf/templates.dat-old", "var/log")


def _quiet(_msg: str) -> None:
    pass


@dataclass
class InstallPlan:
    dist: Distribution
    target: Path
    mirror: str
    steps: list[str]
    already_installed: bool = False  # a re-run: verify the tree that is there instead of building one

    def render(self) -> str:
        if self.already_installed:
            return f"{self.dist.name} is already installed in {self.target}: verify it against its manifest"
        lines = [f"install {self.dist.name}: {self.dist.describe()} into {self.target}"]
        lines += [f"  {i}. {s}" for i, s in enumerate(self.steps, 1)]
        return "\n".join(lines)


def plan_install(name: str, mirror: str = DEBIAN_MIRROR) -> InstallPlan:
    dist = get(name)
    target = servers_dir() / dist.name
    if (target / MANIFEST).exists():
        return InstallPlan(dist=dist, target=target, mirror=mirror, already_installed=True,
                           steps=["check the binary against the manifest's sha256 (and the tree's loader)"])
    if dist.kind == "host":
        steps = [f"check that the host package {dist.main_package} provides /{dist.binary} {dist.series}",
                 "record its version and the sha256 of the binary in the manifest"]
    else:
        steps = [f"debootstrap --variant=minbase {dist.suite} STAGING {mirror}",
                 f"apt-get install --no-install-recommends {' '.join(dist.packages)} inside the tree",
                 f"check that the server reports {dist.flavor.value} {dist.series}",
                 f"strip {', '.join(STRIP[:5])} ...",
                 "write the manifest (suite, package versions, binary sha256, build date) and move the tree into place"]
    return InstallPlan(dist=dist, target=target, mirror=mirror, steps=steps)


def install(plan: InstallPlan, progress: Progress = _quiet) -> InstalledServer:
    """Build or register the server; for an installed one, verify it (a damaged tree says how to reinstall)."""
    if plan.already_installed:
        progress(f"verifying the installed {plan.dist.name}")
        return installed(plan.dist.name, verify=True)
    if plan.dist.kind == "host":
        return _register_host(plan, progress)
    return _build_tree(plan, progress)


# ---------------------------------------------------------------------------
# host distribution


def _dpkg_version(package: str, root: Path | None = None) -> str | None:
    cmd = (["chroot", str(root)] if root else []) + ["dpkg-query", "-W", "-f=${Version}", package]
    out = subprocess.run(cmd, capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


def _server_version(srv_run: Callable[[list[str]], subprocess.CompletedProcess], binary: str) -> str:
    out = srv_run([binary, "--version"])
    text = (out.stdout or out.stderr).strip()
    if out.returncode != 0 or "Ver" not in text:
        raise ServerError(f"{binary} --version failed ({text.splitlines()[-1] if text else out.returncode}); "
                          "the installation is broken: remove and install the server again")
    return text


def _check_series(dist: Distribution, version_string: str, package_version: str | None) -> Version:
    version = Version.parse(version_string.split("Ver", 1)[-1])
    if version.series != dist.series:
        src = f"Debian {dist.suite}" if dist.suite else "the host"
        raise ServerError(f"{src} now serves {dist.main_package} {package_version or version} ({version.series}), "
                          f"not {dist.series}: the archive no longer serves {dist.name}; install it from a cache "
                          f"archive with `innotier server install {dist.name} --from-archive FILE`")
    return version


def _register_host(plan: InstallPlan, progress: Progress) -> InstalledServer:
    dist = plan.dist
    binary = "/" + dist.binary
    pkg_version = _dpkg_version(dist.main_package)
    if not os.path.isfile(binary) or not pkg_version:
        raise ToolMissing(f"the host has no {dist.main_package} ({binary} missing); "
                          f"install it with `apt-get install {dist.main_package}`")
    text = _server_version(lambda a: subprocess.run(a, capture_output=True, text=True, timeout=60), binary)
    version = _check_series(dist, text, pkg_version)
    progress(f"registering the host's {dist.main_package} {pkg_version}")
    manifest = Manifest(name=dist.name, flavor=dist.flavor.value, series=dist.series, kind="host", suite=None,
                        mirror=None, packages={dist.main_package: pkg_version}, binary=dist.binary,
                        binary_sha256=sha256_file(binary), version_string=text, version=str(version),
                        build_date=_now(), innotier_version=innotier_version(), tree_bytes=0,
                        notes=["host package: an apt upgrade changes the binary; run `server remove` and "
                               "`server install` again after one"])
    plan.target.mkdir(parents=True, exist_ok=True)
    write_manifest(plan.target, manifest)
    return InstalledServer(dist=dist, path=plan.target, manifest=manifest)


# ---------------------------------------------------------------------------
# tree distribution


def _require_root_and_tools() -> None:
    if os.geteuid() != 0:
        raise UsageError("building a server tree needs root (debootstrap and apt-get in a chroot); run it with "
                         "sudo, or install a cache archive with --from-archive FILE (no root needed)")
    if not shutil.which("debootstrap"):
        raise ToolMissing("debootstrap is not installed; install it with `apt-get install debootstrap`")


def _run_streaming(cmd: list[str], log: Path, progress: Progress, what: str, pattern: str | None = None,
                   env: dict | None = None) -> None:
    """Run a long command, its output into ``log``; report every ``pattern`` line (packages) as progress."""
    t0 = time.monotonic()
    count = 0
    last = 0.0
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        assert proc.stdout is not None
        for raw in proc.stdout:
            fh.write(raw)
            if pattern and re.search(pattern, raw.decode(errors="replace")):
                count += 1
                now = time.monotonic()
                if now - last >= 5:
                    progress(f"  {what}: {count} packages, {now - t0:.0f} s")
                    last = now
        rc = proc.wait()
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise ServerError(f"{what} failed (exit {rc}): {' | '.join(tail)}; see {log}")
    progress(f"  {what}: done in {time.monotonic() - t0:.0f} s")


def _apt_install(root: Path, dist: Distribution, log: Path, progress: Progress) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    try:
        _run_streaming(["chroot", str(root), "apt-get", "install", "-y", "--no-install-recommends", *dist.packages],
                       log, progress, f"apt-get install {' '.join(dist.packages)}", pattern=r"^(Get|Unpacking)", env=env)
    except ServerError:
        text = log.read_text(errors="replace")
        if re.search(r"has no installation candidate|Unable to locate package", text):
            raise ServerError(f"Debian {dist.suite} no longer serves {dist.main_package}: the archive no longer "
                              f"serves {dist.name}; install it from a cache archive with "
                              f"`innotier server install {dist.name} --from-archive FILE`") from None
        raise


def _strip(root: Path) -> None:
    subprocess.run(["chroot", str(root), "apt-get", "clean"], capture_output=True)
    for rel in STRIP:
        p = root / rel
        if p.is_dir():
            for child in p.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        elif p.exists():
            p.unlink()
    # mariadb-install-db and resolveip want the host names resolvable inside the tree
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")


def _build_tree(plan: InstallPlan, progress: Progress) -> InstalledServer:
    _require_root_and_tools()
    dist = plan.dist
    t0 = time.monotonic()
    staging = servers_dir() / f".build-{dist.name}"
    if staging.exists():
        shutil.rmtree(staging)  # a build interrupted earlier: never half-used
    root = staging / "tree"
    root.mkdir(parents=True)
    log = staging / "build.log"
    try:
        progress(f"[1/4] debootstrap {dist.suite} from {plan.mirror} (about a minute)")
        _run_streaming(["debootstrap", "--variant=minbase", dist.suite, str(root), plan.mirror], log, progress,
                       f"debootstrap {dist.suite}", pattern=r"^I: (Retrieving|Extracting) ")
        progress(f"[2/4] apt-get install {' '.join(dist.packages)}")
        _apt_install(root, dist, log, progress)
        packages = {p: _dpkg_version(p, root) or "?" for p in dist.packages}
        text = _server_version(lambda a: subprocess.run(tree_launcher(root) + a, capture_output=True, text=True,
                                                        timeout=60), str(root / dist.binary))
        version = _check_series(dist, text, packages[dist.main_package])
        progress(f"[3/4] {dist.flavor.value} {version}; stripping caches, lists and docs")
        _strip(root)
        progress("[4/4] writing the manifest")
        manifest = Manifest(name=dist.name, flavor=dist.flavor.value, series=dist.series, kind="tree",
                            suite=dist.suite, mirror=plan.mirror, packages=packages, binary=dist.binary,
                            binary_sha256=sha256_file(root / dist.binary), version_string=text,
                            version=str(version), build_date=_now(), innotier_version=innotier_version(),
                            build_seconds=round(time.monotonic() - t0, 1), tree_bytes=tree_bytes(root))
        write_manifest(staging, manifest)
        log.unlink(missing_ok=True)
        os.rename(staging, plan.target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return InstalledServer(dist=dist, path=plan.target, manifest=manifest)


def innotier_version() -> str:
    """The installed innotier's version (the kernel does not import the application package for it)."""
    try:
        return importlib.metadata.version("innotier")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------------------
# cache archives


def export(name: str, file: str | os.PathLike, progress: Progress = _quiet) -> Path:
    """Write the installed tree ``name`` (manifest and tree) as a .tar.zst cache archive."""
    srv = installed(name)
    if srv.dist.kind == "host":
        raise UsageError(f"{name} is the host's own package; there is nothing to export (install it with apt)")
    out = Path(file).resolve()
    if not out.name.endswith(".tar.zst"):
        raise UsageError(f"archive name {out.name} does not end in .tar.zst; name it like {name}.tar.zst")
    if not shutil.which("zstd"):
        raise ToolMissing("zstd is not installed; install it with `apt-get install zstd`")
    tmp = out.with_name(out.name + ".part")
    progress(f"writing {out} (zstd -3)")
    proc = subprocess.run(["tar", "-C", str(servers_dir()), "--use-compress-program=zstd -3 -T0",
                           f"--exclude={srv.dist.name}/{VERIFIED}", "-cf", str(tmp), srv.dist.name],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ServerError(f"writing {out} failed: {proc.stderr.strip()}; check the space and permissions there")
    os.replace(tmp, out)
    return out


def _archive_top(file: Path) -> str:
    """The one top-level directory of a cache archive; refuse anything else (absolute paths, '..', several)."""
    proc = subprocess.run(["tar", "--use-compress-program=zstd -d", "-tf", str(file)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"{file} is not a readable .tar.zst archive ({proc.stderr.strip()[:120]}); "
                         "give a file written by `innotier server export`")
    tops = set()
    for member in proc.stdout.splitlines():
        if member.startswith("/") or ".." in Path(member).parts:
            raise UsageError(f"{file} holds an unsafe path {member!r}; give a file written by `innotier server export`")
        tops.add(Path(member).parts[0])
    if len(tops) != 1 or next(iter(tops)) not in known_names():
        raise UsageError(f"{file} is not a server cache archive (top level {sorted(tops)[:3]}); "
                         f"give a file written by `innotier server export` (one of {', '.join(known_names())})")
    return tops.pop()


def install_from_archive(file: str | os.PathLike, name: str | None = None,
                         progress: Progress = _quiet) -> InstalledServer:
    """Unpack a cache archive, verify its manifest against its binary, then put it in place."""
    path = Path(file).resolve()
    if not path.is_file():
        raise UsageError(f"archive {path} does not exist; give a file written by `innotier server export`")
    top = _archive_top(path)
    if name and get(name).name != top:
        raise UsageError(f"{path} holds {top}, not {name}; give the archive of {name} or leave out the name")
    plan = plan_install(top)
    if plan.already_installed:  # an archive would replace the tree: only on request
        raise UsageError(f"server {top} is already installed in {plan.target}; to replace it from {path.name}, "
                         f"remove it first with `innotier server remove {top}`")
    staging = servers_dir() / f".import-{top}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        progress(f"unpacking {path}")
        proc = subprocess.run(["tar", "--use-compress-program=zstd -d", "-C", str(staging), "-xf", str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ServerError(f"unpacking {path} failed: {proc.stderr.strip()[:200]}; check the space in {staging}")
        srv = InstalledServer(dist=plan.dist, path=staging / top, manifest=read_manifest(staging / top))
        if srv.manifest.name != top:
            raise UsageError(f"{path}: the manifest names {srv.manifest.name}, the archive {top}; the file is not "
                             "a cache archive written by innotier")
        srv.verify()
        os.rename(staging / top, plan.target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return InstalledServer(dist=plan.dist, path=plan.target, manifest=read_manifest(plan.target))

