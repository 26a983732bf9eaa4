"""The lab image: Debian 12 with real md and pmem kernel drivers, built once per machine and cached by content.

Recipe (spec -> plan -> build -> result):
- ``mmdebstrap --variant=minbase`` of bookworm with the kernel, mdadm, ndctl/daxctl, f2fs-tools, MariaDB, fio, Python
  (apt downloads in parallel and dpkg runs once with ``force-unsafe-io``: a throw-away build tree needs no
  fsync per file; debootstrap took 128-306 s for the same set, most of it sequential downloads and fsyncs);
- a venv ``/opt/innotier`` holding innotier's Python dependencies, installed offline (``--no-index``) from
  wheels that ``pip download`` fetched on the host.  innotier itself is NOT in the image: the checkout is
  shared into the guest over 9p at every boot and run from source (``PYTHONPATH``), so a new commit does not
  rebuild the image;
- ``vmlinux`` extracted from the compressed ``vmlinuz`` (qemu boots an uncompressed ELF kernel directly,
  which with a tiny busybox initramfs takes ~9 s under emulation instead of ~32 s with Debian's initrd);
- a busybox initramfs that loads only the virtio, ext4 and 9p modules, mounts the root image and the run
  share and hands over to the run's own init script (written by ``vm.py`` per run);
- the W=1 TPC-C golden datadir (``tuner.sweep.golden``, 16k pages, the key the in-guest moves and the
  raid-level sweep clone) loaded at build time with the image's own MariaDB, natively in a chroot inside
  private mount, network and PID namespaces (~30 s here instead of minutes under emulation at every run);
- a raw, sparse ext4 root image made with ``mkfs.ext4 -d`` (no loop device, no mount).

The key is a hash of everything above that changes the image (packages, requirements, initramfs, recipe
version, the TPC-C loader's version the golden copy was made with), so the cache directory ``innotier_cache()/lab/<key>`` is reused until the recipe changes.
"""

from __future__ import annotations

import configparser
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from datadir_mover.lab import host as host_mode
from datadir_mover.lab import packaged_host
from tuner.core.durable import write_atomic
from tuner.core.errors import LabError
from tuner.core.paths import innotier_cache

RECIPE_VERSION = 4   # 2: the venv is byte-compiled at build; 3: mmdebstrap; 4: the golden datadir inside
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    "linux-image-amd64", "kmod", "udev", "mdadm", "ndctl", "daxctl", "e2fsprogs", "xfsprogs", "util-linux",
    "f2fs-tools",   # mkfs.f2fs: the DCPMM paper's f2fs cell (dcpmm-filesystems); the kernel ships f2fs.ko
    "procps", "fio", "mariadb-server", "mariadb-client", "mariadb-backup", "python3", "python3-venv",
    "busybox", "iproute2", "apparmor",
    "systemd",   # systemd-analyze: `persist install` verifies its units with it (systemd is not the guest's init)
)
# loaded by the initramfs, in this order after their dependencies (modprobe --show-depends resolves them)
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "ext4", "9pnet_virtio", "9p")
HOST_TOOLS = ("mmdebstrap", "mkfs.ext4", "qemu-system-x86_64", "qemu-img", "busybox", "cpio", "modprobe")
ROOT_SIZE = 6 << 30          # sparse: only what the files use is allocated
ENV_VENV = "/opt/innotier"
GUEST_HOME = "/root/innotier"   # INNOTIER_HOME in the guest: the golden copy is made under it at build time
GOLDEN_PAGE_SIZE, GOLDEN_WAREHOUSES = "16k", 1
# the golden copy's redo log: 16 MiB, not the server's default 96 MiB (45% of the W=1 datadir's bytes), since
# every clone, move and sync in the lab copies the datadir under emulation; the lab's servers run with it too
LAB_REDO_OPTION = {"innodb_log_file_size": "16M"}
# run by the image's python in the chroot with the checkout at /mnt/src (a subprocess, not an import: the
# lab is below the sweep in the layers); the same key and load buffer pool as the in-guest moves use
GOLDEN_SCRIPT = f"""
from tuner.core import sandbox as sbx
from tuner.sweep import golden
bins = sbx.find_binaries(None)
key = golden.key_of(bins, {GOLDEN_PAGE_SIZE!r}, {GOLDEN_WAREHOUSES})
meta = golden.ensure(key, bins, load_buffer_pool="256M", progress=lambda m: print(m, flush=True),
                     load_options={LAB_REDO_OPTION!r})
print("golden", key.id, meta["bytes"], meta["timings"], flush=True)
"""

INITRAMFS_INIT = r"""#!/bin/busybox sh
# innotier lab initramfs: load virtio/ext4/9p, mount the root image and the run share, hand over.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.order); do insmod "/modules/$m" 2>/dev/null; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
mkdir -p /newroot
mount -t ext4 -o rw /dev/vda /newroot || { echo "lab-initramfs: cannot mount /dev/vda"; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 lab /newroot/mnt/lab \
  || { echo "lab-initramfs: cannot mount the run share"; poweroff -f; }
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /mnt/lab/init
"""

GUEST_HOSTS = "127.0.0.1\tlocalhost lab\n::1\tlocalhost ip6-localhost ip6-loopback\n"


@dataclass(frozen=True)
class ImageSpec:
    packages: tuple[str, ...] = PACKAGES
    requirements: tuple[str, ...] = ()
    suite: str = SUITE
    mirror: str = MIRROR
    loader: str = ""          # the checkout's TPC-C LOADER_VERSION: a new one makes the golden copy stale
    host: bool = False        # also bootable in host mode (--init systemd; datadir_mover.lab.host)
    packaged: str = ""        # a packaged-server host (datadir_mover.lab.packaged_host): boots with systemd only

    def initramfs_init(self) -> str:
        return host_mode.initramfs_init(INITRAMFS_INIT) if self.host or self.packaged else INITRAMFS_INIT

    def key(self) -> str:
        fields = {"recipe": RECIPE_VERSION, "packages": sorted(self.packages),
                  "requirements": sorted(self.requirements), "suite": self.suite,
                  "initramfs": self.initramfs_init(), "modules": INITRAMFS_MODULES,
                  "hosts": GUEST_HOSTS, "golden": GOLDEN_SCRIPT, "loader": self.loader}
        if self.host:
            fields["host"] = [host_mode.CONFINED_PROFILE, host_mode.UNIT_TEXT, host_mode.MASKED, host_mode.CMDLINE,
                              host_mode.LAB_OPTIONS]
        if self.packaged:   # only then: the other images keep their keys (and their cache entries)
            fields["packaged"] = packaged_host.recipe(packaged_host.get(self.packaged))
        payload = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass
class Image:
    """A built image: what ``vm.py`` boots."""
    directory: Path
    key: str
    kernel_release: str = ""
    build_seconds: float | None = None
    size_bytes: int | None = None          # allocated on disk (sparse files count what they use)
    packages: dict[str, str] = field(default_factory=dict)
    host: bool = False                     # bootable with --init systemd too

    @property
    def root(self) -> Path:
        return self.directory / "root.img"

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinux"

    @property
    def initramfs(self) -> Path:
        return self.directory / "initramfs.cpio.gz"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["directory"] = str(self.directory)
        return d


def requirements_of(setup_cfg: Path) -> tuple[str, ...]:
    """innotier's install_requires plus the test extra, read from the checkout's setup.cfg."""
    cfg = configparser.ConfigParser()
    cfg.read(setup_cfg)
    lines = cfg.get("options", "install_requires", fallback="").splitlines()
    lines += cfg.get("options.extras_require", "test", fallback="").splitlines()
    return tuple(ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#"))


def loader_version_of(loader_py: Path) -> str:
    """The checkout's ``LOADER_VERSION`` (read as text: the lab sits below the TPC-C code in the layers)."""
    m = re.search(r'^LOADER_VERSION\s*=\s*["\']?([^"\'\s#]+)', loader_py.read_text(), re.M)
    if not m:
        raise LabError(f"{loader_py} has no LOADER_VERSION line; the golden copy in the image needs it")
    return m.group(1)


def default_spec(checkout: Path, host: bool = False) -> ImageSpec:
    return ImageSpec(requirements=requirements_of(checkout / "setup.cfg"),
                     loader=loader_version_of(checkout / "tuner" / "tpcc" / "loader.py"), host=host)


def packaged_spec(checkout: Path, name: str) -> ImageSpec:
    """The image of packaged lab host ``name`` (packaged_host.SERVERS): its suite, its server packages, no golden
    copy (its server's own datadir is the one moved)."""
    server = packaged_host.get(name)
    return ImageSpec(packages=packaged_host.BASE_PACKAGES + server.packages, suite=server.suite, packaged=name,
                     requirements=packaged_host.guest_requirements(requirements_of(checkout / "setup.cfg")))


def lab_dir() -> Path:
    return innotier_cache() / "lab"


def find_image(spec: ImageSpec) -> Image | None:
    directory = lab_dir() / spec.key()
    meta = directory / "image.json"
    if not meta.is_file():
        return None
    data = json.loads(meta.read_text())
    data["directory"] = directory
    return Image(**data)


def host_blockers() -> list[str]:
    out = [] if os.geteuid() == 0 else ["building the lab image needs root (mmdebstrap, chroot); run it with sudo"]
    missing = [t for t in HOST_TOOLS if shutil.which(t) is None]
    if missing:
        out.append(f"{', '.join(missing)} not installed; run scripts/bootstrap.sh (apt-get install qemu-system-x86 "
                   "qemu-utils mmdebstrap busybox-static cpio zstd)")
    return out


# ---- the build -----------------------------------------------------------------------------------

Progress = Callable[[str], None]


def _run(argv: list[str], what: str, log: Path, **kw) -> str:
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(argv)}\n")
        fh.flush()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
        fh.write(proc.stdout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-5:])
        raise LabError(f"{what} failed (exit {proc.returncode}); see {log} for the whole output:\n{tail}")
    return proc.stdout


def build(spec: ImageSpec, checkout: Path, *, force: bool = False, progress: Progress = print) -> Image:
    """Build the image for ``spec`` unless the cache has it; return it."""
    if not force and (image := find_image(spec)):
        progress(f"lab image {image.key} is cached at {image.directory}")
        return image
    blockers = host_blockers()
    if blockers:
        raise LabError("cannot build the lab image: " + "; ".join(blockers))
    key = spec.key()
    final = lab_dir() / key
    lab_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=lab_dir()))
    log = work / "build.log"
    started = time.monotonic()
    rootfs = work / "rootfs"
    server = packaged_host.get(spec.packaged) if spec.packaged else None
    try:
        steps = [
            (f"mmdebstrap Debian {spec.suite}: " + ", ".join(spec.packages), lambda: _bootstrap(spec, rootfs, log)),
            ("configure the guest (hosts, fstab, mount points" + (", host mode: systemd units, AppArmor profile)"
                                                                   if spec.host else ")"),
             lambda: _configure(rootfs, spec.host)),
            ("download innotier's Python dependencies on the host (pip download)",
             lambda: _download_wheels(spec, work / "wheels", log, _guest_python(rootfs))),
            ("install them offline into /opt/innotier in the image", lambda: _install_wheels(spec, rootfs, work / "wheels", log)),
        ]
        if server is None:
            steps.append(("load the W=1 TPC-C golden datadir with the image's MariaDB (chroot)",
                          lambda: _load_golden(rootfs, checkout, log)))
        else:
            steps.append((f"packaged host: {server.unit} and /{server.profile} as {server.packages[0]} installs them, "
                          "the lab's unit, a small redo log", lambda: _configure_packaged(rootfs, server, log)))
        steps += [
            ("extract the uncompressed kernel (vmlinux)", lambda: _extract_kernel(rootfs, work / "vmlinux")),
            ("build the busybox initramfs (virtio, ext4, 9p)",
             lambda: _initramfs(rootfs, work / "initramfs.cpio.gz", spec.initramfs_init(), log)),
            ("make the ext4 root image (mkfs.ext4 -d)", lambda: _root_image(rootfs, work / "root.img", log)),
        ]
        for i, (what, fn) in enumerate(steps, 1):
            t0 = time.monotonic()
            progress(f"[{i}/{len(steps)}] {what} ...")
            fn()
            progress(f"[{i}/{len(steps)}] done in {time.monotonic() - t0:.0f} s")
        image = Image(directory=final, key=key, kernel_release=_kernel_release(rootfs),
                      packages=_package_versions(rootfs, spec.packages), host=spec.host or bool(spec.packaged))
        shutil.rmtree(rootfs)
        shutil.rmtree(work / "wheels", ignore_errors=True)
        image.build_seconds = round(time.monotonic() - started, 1)
        image.size_bytes = _allocated(work)
        write_atomic(work / "image.json", json.dumps({k: v for k, v in image.to_dict().items()
                                                      if k != "directory"}, indent=2))
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
        progress(f"lab image {key} built in {image.build_seconds:.0f} s, {image.size_bytes / 2**20:.0f} MiB on disk, "
                 f"at {final}")
        return image
    except BaseException:
        _umount_under(rootfs)
        if log.exists():   # the build tree goes, its log stays beside the cache
            shutil.copy2(log, lab_dir() / f"{key}.failed.log")
            progress(f"the build log is kept at {lab_dir() / f'{key}.failed.log'}")
        shutil.rmtree(work, ignore_errors=True)
        raise


# Before the kernel is installed: its postinst would build Debian's initrd (tens of seconds of compression)
# that the lab never boots; update-initramfs is diverted to a no-op in the image.
NO_INITRD_HOOK = ('chroot "$1" dpkg-divert --quiet --local --rename --divert /usr/sbin/update-initramfs.lab-off '
                  '--add /usr/sbin/update-initramfs && ln -sf /bin/true "$1/usr/sbin/update-initramfs"')


# sid's Release file is valid for a week only (Valid-Until); a mirror that lags behind (this machine's did by 25
# days) is refused by apt without this.  The signature is still checked.
NO_VALID_UNTIL = "--aptopt=Acquire::Check-Valid-Until \"false\""


def _bootstrap(spec: ImageSpec, rootfs: Path, log: Path) -> None:
    _run(["mmdebstrap", "--mode=root", "--variant=minbase", f"--include={','.join(spec.packages)}",
          "--dpkgopt=force-unsafe-io", "--aptopt=Acquire::Retries \"3\"", f"--essential-hook={NO_INITRD_HOOK}",
          *([NO_VALID_UNTIL] if spec.packaged else []), spec.suite, str(rootfs), spec.mirror], "mmdebstrap", log)


def _configure(rootfs: Path, host: bool) -> None:
    (rootfs / "etc/hosts").write_text(GUEST_HOSTS)   # without it mariadb-install-db cannot look the host up
    (rootfs / "etc/hostname").write_text("lab\n")
    (rootfs / "etc/fstab").write_text("/dev/vda / ext4 rw 0 1\n")
    for d in ("mnt/lab", "mnt/src"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    wrapper = rootfs / "usr/local/bin/innotier"
    wrapper.write_text(f"#!/bin/sh\n# innotier from the checkout shared at /mnt/src (PYTHONPATH set by the lab init)\n"
                       f"exec {ENV_VENV}/bin/python -m tuner.cli \"$@\"\n")
    wrapper.chmod(0o755)
    # the bootstrapped image keeps Debian's initrd; the lab boots its own, so drop it (saves ~30 MiB)
    for p in (rootfs / "boot").glob("initrd.img-*"):
        p.unlink()
    shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    if host:
        host_mode.configure(rootfs)


def _guest_python(rootfs: Path) -> tuple[str, str]:
    """The image's Python (major.minor) and glibc (2.N): the wheels must fit them, not the host's."""
    out = subprocess.run(["chroot", str(rootfs), "python3", "-c",
                          "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.libc_ver()[1])"],
                         capture_output=True, text=True)
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 2:
        raise LabError(f"cannot run the image's python3 to learn its version: {out.stderr.strip()[-300:]}")
    return parts[0], parts[1]


def _download_wheels(spec: ImageSpec, dest: Path, log: Path, guest: tuple[str, str] = ("3.11", "2.36")) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    python, glibc = guest
    # Debian 12's python3 is 3.11 like the host's; a sid image has a newer one (its own cp tag and glibc)
    newer_glibc = ["--platform", f"manylinux_2_{glibc.split('.')[1]}_x86_64"] if python != "3.11" else []
    _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
          "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64", "--platform",
          "manylinux_2_17_x86_64", *newer_glibc, "--implementation", "cp", "--dest", str(dest), "pip", "setuptools",
          "wheel", *spec.requirements], "pip download of innotier's dependencies", log)


def _install_wheels(spec: ImageSpec, rootfs: Path, wheels: Path, log: Path) -> None:
    inside = rootfs / "tmp/wheels"
    shutil.copytree(wheels, inside)
    try:
        _run(["chroot", str(rootfs), "python3", "-m", "venv", ENV_VENV], "python3 -m venv in the image", log)
        _run(["chroot", str(rootfs), f"{ENV_VENV}/bin/pip", "install", "-q", "--no-index", "--find-links",
              "/tmp/wheels", "--no-compile", *spec.requirements], "offline pip install in the image", log)
        # byte-compile here, natively, with the guest's own python: under emulation every import of an
        # uncompiled module compiles it again at every CLI start (Ansible is never imported in the guest)
        _run(["chroot", str(rootfs), "python3", "-m", "compileall", "-q", "-j0", "-x", r"/ansible(_test)?/",
              ENV_VENV], "byte-compiling the image's venv", log)
    finally:
        shutil.rmtree(inside, ignore_errors=True)


# PID namespace: nothing the load started (mariadbd) outlives it; mount namespace: its mounts vanish with it;
# network namespace: the scratch server's port cannot collide with servers on this (shared) machine.  The
# tree is bound onto itself so the chroot's /proc/mounts has a "/" (the mover's probes look the datadir up)
GOLDEN_SHELL = r"""set -e
mount --make-rprivate /
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
mount --bind "$SRC" "$R/mnt/src"
mount -o remount,bind,ro "$R/mnt/src"
exec chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 INNOTIER_HOME="$GH" \
  PYTHONPATH=/mnt/src PYTHONDONTWRITEBYTECODE=1 sh -ec 'ip link set lo up; exec "$0" -c "$1"' "$PY" "$SCRIPT"
"""


def _load_golden(rootfs: Path, checkout: Path, log: Path) -> None:
    env = dict(os.environ, R=str(rootfs), SRC=str(checkout.resolve()), GH=GUEST_HOME,
               PY=f"{ENV_VENV}/bin/python", SCRIPT=GOLDEN_SCRIPT)
    out = _run(["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "sh", "-c", GOLDEN_SHELL],
               "loading the golden datadir in the image", log, env=env)
    if "golden " not in out:
        raise LabError(f"the golden datadir load printed no result; see {log}")
    shutil.rmtree(rootfs / GUEST_HOME.lstrip("/") / "sandboxes", ignore_errors=True)


# the package's postinst initializes the datadir in the build's chroot; where it did not, the same command runs
# natively here, in private mount, network and PID namespaces (as the golden load does)
INITIALIZE_SHELL = r"""set -e
mount --make-rprivate /
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
exec chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
"""


def _configure_packaged(rootfs: Path, server, log: Path) -> None:
    packaged_host.configure(rootfs, server)
    if packaged_host.needs_initialize(rootfs):
        _run(["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "sh", "-c", INITIALIZE_SHELL, "sh",
              *server.initialize], f"initializing {server.packages[0]}'s datadir", log, env=dict(os.environ, R=str(rootfs)))


def _kernel_release(rootfs: Path) -> str:
    releases = sorted(p.name for p in (rootfs / "lib/modules").iterdir() if p.is_dir())
    if not releases:
        raise LabError("the image has no kernel modules (lib/modules is empty); rebuild with --force")
    return releases[-1]


_MAGICS = ((b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b\x08", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"))


def extract_vmlinux(bzimage: bytes) -> bytes:
    """The ELF kernel inside a bzImage: find a compressed stream that decompresses to an ELF file
    (what the kernel's scripts/extract-vmlinux does with its list of magics)."""
    for magic, kind in _MAGICS:
        start = bzimage.find(magic)
        while start != -1:
            data = _decompress(bzimage[start:], kind)
            if data and data[:4] == b"\x7fELF":
                return data
            start = bzimage.find(magic, start + 1)
    raise LabError("no ELF kernel found inside vmlinuz (tried xz, gzip and zstd streams); "
                   "report the kernel package version")


def _decompress(blob: bytes, kind: str) -> bytes | None:
    try:
        if kind == "xz":
            return lzma.LZMADecompressor().decompress(blob)
        if kind == "gzip":
            return zlib.decompressobj(wbits=31).decompress(blob)
        proc = subprocess.run(["zstd", "-dc"], input=blob, capture_output=True)
        return proc.stdout or None
    except (lzma.LZMAError, zlib.error, OSError, EOFError):
        return None


def _extract_kernel(rootfs: Path, dest: Path) -> None:
    release = _kernel_release(rootfs)
    dest.write_bytes(extract_vmlinux((rootfs / "boot" / f"vmlinuz-{release}").read_bytes()))


def _module_files(rootfs: Path, release: str, log: Path) -> list[Path]:
    """The .ko files INITRAMFS_MODULES need, dependencies first (modprobe --show-depends on the image)."""
    out: list[Path] = []
    for mod in INITRAMFS_MODULES:
        text = _run(["modprobe", "-d", str(rootfs), "-S", release, "--show-depends", mod],
                    f"modprobe --show-depends {mod}", log)
        for line in text.splitlines():
            parts = line.split()
            if parts and parts[0] == "insmod":
                path = Path(parts[1])    # modprobe -d prints the path with the root directory in front
                if not str(path).startswith(str(rootfs)):
                    path = rootfs / parts[1].lstrip("/")
                if path not in out:
                    out.append(path)
    return out


def _initramfs(rootfs: Path, dest: Path, script: str, log: Path) -> None:
    release = _kernel_release(rootfs)
    tree = dest.parent / "initramfs"
    for d in ("bin", "proc", "sys", "dev", "modules", "newroot"):
        (tree / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(shutil.which("busybox") or "/bin/busybox", tree / "bin/busybox")
    order = []
    for ko in _module_files(rootfs, release, log):
        name = ko.name
        data = ko.read_bytes()
        if name.endswith(".xz"):
            data, name = lzma.decompress(data), name[:-3]
        elif name.endswith(".zst"):
            data, name = subprocess.run(["zstd", "-dc", str(ko)], capture_output=True, check=True).stdout, name[:-4]
        (tree / "modules" / name).write_bytes(data)
        order.append(name)
    (tree / "modules.order").write_text("\n".join(order) + "\n")
    init = tree / "init"
    init.write_text(script)
    init.chmod(0o755)
    files = subprocess.run(["find", "."], cwd=tree, capture_output=True, text=True, check=True).stdout
    cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=tree, input=files.encode(),
                          capture_output=True, check=True).stdout
    dest.write_bytes(gzip.compress(cpio))
    shutil.rmtree(tree)


def _root_image(rootfs: Path, dest: Path, log: Path) -> None:
    with open(dest, "wb") as fh:
        fh.truncate(ROOT_SIZE)
    _run(["mkfs.ext4", "-q", "-F", "-L", "innotier-lab", "-d", str(rootfs), str(dest)], "mkfs.ext4 -d", log)


def _package_versions(rootfs: Path, names: tuple[str, ...]) -> dict[str, str]:
    text = subprocess.run(["chroot", str(rootfs), "dpkg-query", "-W", "-f", "${Package} ${Version}\n", *names],
                          capture_output=True, text=True).stdout
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def _allocated(directory: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in directory.rglob("*") if p.is_file())


def _umount_under(rootfs: Path) -> None:
    """Nothing in the build mounts, but a killed chroot step may leave /proc behind; never leave a mount."""
    for line in reversed(Path("/proc/mounts").read_text().splitlines()):
        target = line.split()[1]
        if target.startswith(str(rootfs) + "/"):
            subprocess.run(["umount", "-l", target], check=False)
