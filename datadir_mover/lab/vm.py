"""Boot the lab image with emulated NVDIMMs and virtual disks, run one command inside, return what it said.

spec (VmSpec) -> plan (the qemu argv, printable) -> run -> result (VmResult).

- NVDIMMs: ``-machine pc,nvdimm=on`` and one ``memory-backend-file`` per NVDIMM with a 128 KiB label area.
  The backing file is the namespace size + 128 KiB: with a file of exactly 2 GiB the region is 2 GiB - 128 KiB,
  misaligned to the 16 MiB region alignment, and the namespace stays raw ("DAX unsupported by block device").
  The guest init runs ``ndctl init-labels`` on them first, as a freshly installed DIMM would need.
- Disks: fresh sparse files per run (virtio, /dev/vdb, /dev/vdc, ...); the root image is never written:
  every run writes to its own qcow2 overlay.
- Shares (9p): the run directory at /mnt/lab (the init script, the command, out/), and read-only at /mnt/src
  a snapshot of the checkout taken when the run starts (innotier runs from it: PYTHONPATH=/mnt/src), so
  editing the checkout while a long run goes on cannot change the code under the guest's feet.  The
  snapshot is byte-compiled on the host: compiling ~100 modules at every CLI start under emulation costs
  seconds each time.
- Accelerator: KVM only when the CPU has vmx/svm and the host is not kvm-pvm (whose /dev/kvm runs a stock
  guest kernel ~140x slower than TCG and then dies with "emulation failure"); otherwise TCG.  qemu's own
  KVM-then-TCG fallback is never used, and qemu always runs under a time limit.

Emulated devices prove that the code paths work against the real md and pmem drivers; their speed says
nothing about real hardware.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from datadir_mover.lab import host as host_mode
from datadir_mover.lab.image import Image
from tuner.core.errors import LabError, UsageError
from tuner.core.units import parse_size

LABEL_SIZE = 128 << 10
PMEM_ALIGN = 16 << 20
MIN_DISK = 16 << 20
READY_MARK = "innotier-lab: running"
DONE_MARK = "innotier-lab: exit "
# terminal control sequences on the serial console, which are not text: when the lab unit opens /dev/ttyS0,
# systemd 257 (Debian 13) resets the terminal (ESC[!p ESC]104 BEL ESC[?7h) and systemd 262 (sid) asks for its
# name (ESC P+q6E616D65 ESC\ ESC7 ESC8 ...), both on the line of READY_MARK; both colour their status lines.
# The marks are read from the line without them: CSI, then the strings (DCS, OSC, SOS, PM, APC) up to BEL or
# ST, then the other escapes (ESC 7, ESC 8, ESC c, ESC ( B)
TERMINAL_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[P\]X^_][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")
NOT_FOR_SPEED = ("emulated devices: the lab proves that code paths work against the real md and pmem drivers; "
                 "its speed figures say nothing about real hardware")
SNAPSHOT_IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", ".pytest_cache", "*.egg-info")
GUEST_MODULES = ("nfit", "nd_pmem", "nd_btt", "dax_pmem", "device_dax", "md_mod", "raid0", "raid1", "raid456",
                 "raid10", "loop", "xfs", "f2fs", "zram")

# The guest's init for one run, written by the host for each run: PID 1 under the fast init; under systemd
# (host mode) the ExecStart of innotier-lab.service, which runs after mariadb.service is up.
FAST_PREAMBLE = r"""#!/bin/sh
# innotier lab: the guest's init for one run (PID 1).  Written by the host for each run.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -o remount,rw /
mount -t tmpfs -o mode=0755 tmpfs /run
# /tmp stays on the root image: sandboxes and their clones do not fit in a RAM-sized tmpfs
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
# a host-mode image carries a confining mariadbd profile for its systemd boots; this init loads no AppArmor
# policy (no securityfs), so the run's overlay gets Debian's profile back as shipped (empty: not confined)
P=/etc/apparmor.d/usr.sbin.mariadbd
[ -f "$P.debian" ] && cp "$P.debian" "$P"
"""
SYSTEMD_PREAMBLE = r"""#!/bin/sh
# innotier lab (host mode): the run's command as innotier-lab.service, systemd is PID 1.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
"""
RUN_BODY = r"""mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro src /mnt/src
hostname lab
ip link set lo up
for m in @MODULES@; do modprobe -q "$m"; done
# a freshly installed NVDIMM has no namespace labels: initialise them so namespaces can be created
if [ -n "$(ls /sys/bus/nd/devices 2>/dev/null | grep '^nmem')" ]; then
  ndctl disable-region all >/dev/null 2>&1
  ndctl init-labels -f all >/dev/null 2>&1
  ndctl enable-region all >/dev/null 2>&1
fi
. /mnt/lab/env.sh
cd /mnt/src
echo "@READY@ $(uname -r)"
if [ -n "$LAB_INTERACTIVE" ]; then
  setsid -c sh /mnt/lab/cmd.sh <>/dev/ttyS0 >&0 2>&1; echo $? > /mnt/lab/out/rc
else
  { sh /mnt/lab/cmd.sh; echo $? > /mnt/lab/out/rc; } 2>&1 | tee /mnt/lab/out/output.log
fi
echo "@DONE@$(cat /mnt/lab/out/rc)"
"""
FAST_END = "sync\nbusybox poweroff -f\n"
# a real shutdown (the server stops cleanly); the target directly: `systemctl poweroff` asks logind over
# D-Bus first, which a minimal image does not run
SYSTEMD_END = "sync\nsystemctl --no-block start poweroff.target\n"
# How a host-mode boot ends (VmSpec.end): a clean power-off, a real reboot (the whole shutdown; qemu runs with
# -no-reboot, so it exits at the kernel's restart and the host boots the same disks again with fresh_disks=False),
# or a power cut: the guest does nothing more, not even a sync, and the host SIGKILLs qemu at the done mark.
ENDS = {"poweroff": SYSTEMD_END, "reboot": "sync\nsystemctl --no-block reboot\n", "cut": "exec sleep infinity\n"}


def guest_init(init: str, end: str = "poweroff") -> str:
    text = (FAST_PREAMBLE + RUN_BODY + FAST_END) if init == "lab" else (SYSTEMD_PREAMBLE + RUN_BODY + ENDS[end])
    return text.replace("@MODULES@", " ".join(GUEST_MODULES)).replace("@READY@", READY_MARK) \
        .replace("@DONE@", DONE_MARK)


@dataclass(frozen=True)
class VmSpec:
    command: tuple[str, ...]
    pmem: tuple[int, ...] = (2 << 30,)         # namespace sizes in bytes, one NVDIMM each
    disks: tuple[int, ...] = (512 << 20,) * 4   # virtual disk sizes in bytes
    memory: int = 1536 << 20
    cpus: int = 2
    timeout: float = 900.0
    source: Path = Path(".")                    # the checkout; a snapshot of it is shared read-only at /mnt/src
    env: tuple[tuple[str, str], ...] = ()
    interactive: bool = False
    init: str = "lab"                           # "systemd": host mode (the image must be built with it)
    end: str = "poweroff"                       # host mode only: "poweroff", "reboot" or "cut" (see ENDS)


@dataclass
class VmResult:
    exit_code: int | None                 # the command's, None if it never finished
    output: str
    accelerator: str
    boot_seconds: float | None            # qemu start to the command starting
    total_seconds: float
    run_dir: Path
    timed_out: bool = False
    console_tail: list[str] = field(default_factory=list)
    cut_after_done_seconds: float | None = None   # end="cut": the done mark to qemu's SIGKILL, host clock

    def to_dict(self) -> dict:
        return {"exit_code": self.exit_code, "accelerator": self.accelerator, "boot_seconds": self.boot_seconds,
                "total_seconds": self.total_seconds, "run_dir": str(self.run_dir), "timed_out": self.timed_out,
                "note": NOT_FOR_SPEED}


def parse_pmem(text: str) -> int:
    size = parse_size(text, "--pmem")
    if size < PMEM_ALIGN or size % PMEM_ALIGN:
        raise UsageError(f"--pmem {text} must be a multiple of 16M (the NVDIMM region alignment), like 512M or 2G")
    return size


def parse_disks(text: str) -> tuple[int, ...]:
    m = re.match(r"^(\d+)x(\S+)$", text.strip())
    if not m or int(m.group(1)) < 0 or int(m.group(1)) > 8:
        raise UsageError(f"--disks {text!r} is not COUNTxSIZE with 0-8 disks; write it like 4x512M")
    size = parse_size(m.group(2), "--disks")
    if size < MIN_DISK:
        raise UsageError(f"--disks {text}: each disk must be at least 16M; write it like 4x512M")
    return (size,) * int(m.group(1))


def choose_accelerator() -> tuple[str, str]:
    """("kvm" | "tcg", why)."""
    if not os.path.exists("/dev/kvm"):
        return "tcg", "no /dev/kvm"
    if os.path.exists("/sys/module/kvm_pvm"):
        return "tcg", "/dev/kvm is kvm-pvm, which cannot run a stock guest kernel at a usable speed"
    flags = Path("/proc/cpuinfo").read_text()
    if not re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M):
        return "tcg", "the CPU has no vmx/svm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "/dev/kvm is not accessible to this user"
    return "kvm", "hardware virtualisation (vmx/svm) available"


def qemu_argv(spec: VmSpec, image: Image, run_dir: Path, accel: str) -> list[str]:
    ram_mib = spec.memory >> 20
    pmem_total = sum(p + LABEL_SIZE for p in spec.pmem)
    maxmem_mib = ram_mib + ((pmem_total + (1 << 30) - 1) >> 30) * 1024 + 1024
    machine = "pc,nvdimm=on" if spec.pmem else "pc"
    argv = ["qemu-system-x86_64", "-machine", machine, "-nodefaults", "-no-user-config",
            "-m", f"{ram_mib}M" + (f",slots={len(spec.pmem)},maxmem={maxmem_mib}M" if spec.pmem else ""),
            "-smp", str(spec.cpus), "-nic", "none", "-display", "none", "-no-reboot",
            "-kernel", str(image.kernel), "-initrd", str(image.initramfs),
            # nowatchdog, no RCU stall reports: under TCG on a loaded host the vCPU threads are not always
            # scheduled, which the guest's lockup detectors report as soft lockups (an artefact, not a fault)
            "-append", "console=ttyS0 root=/dev/vda rw quiet loglevel=4 panic=-1 8250.nr_uarts=1 nowatchdog "
                       "rcupdate.rcu_cpu_stall_suppress=1" + (f" {host_mode.CMDLINE}" if spec.init == "systemd" else ""),
            "-drive", f"file={run_dir / 'root.qcow2'},if=virtio,format=qcow2,cache=unsafe"]
    if accel == "kvm":
        argv += ["-accel", "kvm", "-cpu", "host"]
    else:
        argv += ["-accel", "tcg,thread=multi", "-cpu", "max"]
    for i, _ in enumerate(spec.disks):
        argv += ["-drive", f"file={run_dir / f'disk{i}.img'},if=virtio,format=raw,cache=unsafe"]
    for i, _ in enumerate(spec.pmem):
        argv += ["-object", f"memory-backend-file,id=nvmem{i},share=on,mem-path={run_dir / f'nvdimm{i}.img'},"
                            f"size={spec.pmem[i] + LABEL_SIZE}",
                 "-device", f"nvdimm,id=nvdimm{i},memdev=nvmem{i},label-size={LABEL_SIZE}"]
    argv += ["-virtfs", f"local,path={run_dir / 'share'},mount_tag=lab,security_model=none",
             "-virtfs", f"local,path={run_dir / 'src'},mount_tag=src,security_model=none,readonly=on"]
    argv += ["-serial", "mon:stdio" if spec.interactive else "stdio"]
    return argv


def prepare(spec: VmSpec, image: Image, run_dir: Path) -> None:
    """The run directory: overlay, fresh sparse disks and NVDIMM files, the share with init, command, env."""
    run_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(image.root),
                    str(run_dir / "root.qcow2")], check=True)
    for i, size in enumerate(spec.disks):
        _sparse(run_dir / f"disk{i}.img", size)
    for i, size in enumerate(spec.pmem):
        _sparse(run_dir / f"nvdimm{i}.img", size + LABEL_SIZE)
    shutil.copytree(spec.source, run_dir / "src", symlinks=True, ignore=SNAPSHOT_IGNORE)
    _byte_compile(run_dir / "src")
    write_share(spec, run_dir)


def write_share(spec: VmSpec, run_dir: Path) -> None:
    """The share for one boot: init, env and command (a boot again of the same machine rewrites only these)."""
    share = run_dir / "share"
    (share / "out").mkdir(parents=True, exist_ok=True)
    (share / "out" / "rc").unlink(missing_ok=True)
    init = share / "init"
    init.write_text(guest_init(spec.init, spec.end))
    init.chmod(0o755)
    env = {"INNOTIER_IN_LAB": "1", "PYTHONPATH": "/mnt/src", "PYTHONDONTWRITEBYTECODE": "1",
           "LAB_OUT": "/mnt/lab/out", "INNOTIER_HOME": "/root/innotier", **({"LAB_INTERACTIVE": "1"} if spec.interactive else {}), **dict(spec.env)}
    (share / "env.sh").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))
    (share / "cmd.sh").write_text(shlex.join(spec.command) + "\n" if spec.command else "exec /bin/bash -l\n")


def _byte_compile(tree: Path) -> None:
    """Byte-compile the snapshot here (natively, about a second) so the guest never compiles it under emulation.

    The guest runs Python 3.11 like the host's; pycs of another version carry another cache tag and are
    simply not used.  ``unchecked-hash``: the snapshot never changes during a run, so no source check."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j0", "--invalidation-mode", "unchecked-hash",
                    "-x", r"/(\.git|\.venv|tests/fixtures)/", str(tree)], capture_output=True, check=False)


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)


def run(spec: VmSpec, image: Image, run_dir: Path, *, echo: Callable[[str], None] | None = None,
        progress: Callable[[str], None] = lambda m: print(m, file=sys.stderr), fresh_disks: bool = True,
        stop: threading.Event | None = None) -> VmResult:
    """Boot, run spec.command, power off; the result carries the command's exit code and output.

    fresh_disks=False boots the machine of an earlier run in run_dir again (host mode): its root overlay, disks,
    NVDIMM files and source snapshot as that run left them, as after a reboot or a power cut.  ``stop``, once
    set (by the thread that started a run in another), ends it within a second: qemu killed, no exit code."""
    if shutil.which("qemu-system-x86_64") is None:
        raise LabError("qemu-system-x86_64 is not installed; run scripts/bootstrap.sh (apt-get install qemu-system-x86)")
    if spec.init == "systemd" and not image.host:
        raise LabError(f"the lab image {image.key} has no systemd host mode; run `innotier lab build --init systemd` "
                       "and boot that image")
    if spec.end != "poweroff" and spec.init != "systemd":
        raise UsageError(f"a lab boot ending in {spec.end} needs host mode (--init systemd)")
    accel, why = choose_accelerator()
    if fresh_disks:
        prepare(spec, image, run_dir)
    elif not (run_dir / "root.qcow2").exists():
        raise LabError(f"{run_dir} holds no earlier run's disks to boot again; boot it with fresh disks first")
    else:
        write_share(spec, run_dir)
    argv = qemu_argv(spec, image, run_dir, accel)
    (run_dir / "qemu.argv").write_text(shlex.join(argv) + "\n")
    progress(f"lab: booting {image.kernel_release or 'the lab kernel'} with {accel.upper()} ({why}); "
             f"{len(spec.pmem)} NVDIMM(s), {len(spec.disks)} disk(s); time limit {spec.timeout:.0f} s")
    progress(f"lab: {NOT_FOR_SPEED}")
    if spec.interactive:
        return _run_interactive(argv, spec, run_dir, accel)
    return _run_captured(argv, spec, run_dir, accel, echo, progress, stop)


def console_line(raw: bytes) -> str:
    """One line of the serial console as text: decoded, without terminal control sequences or a trailing CR."""
    return TERMINAL_CONTROL.sub("", raw.decode(errors="replace")).rstrip("\r")


def _run_captured(argv, spec, run_dir, accel, echo, progress, stop=None) -> VmResult:
    started = time.monotonic()
    deadline = started + spec.timeout
    console: list[str] = []
    boot = cut = done_at = None
    done = timed_out = stopped = False
    with open(run_dir / "console.log", "w") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        buf = b""
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if stop is not None and stop.is_set():
                    stopped = True
                    break
                ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    line = console_line(raw)
                    log.write(line + "\n")
                    console.append(line)
                    if line.startswith(READY_MARK) and boot is None:
                        boot = time.monotonic() - started
                        progress(f"lab: guest up after {boot:.1f} s; running: {shlex.join(spec.command)}")
                    elif line.startswith(DONE_MARK):
                        done, done_at = True, time.monotonic()
                        if spec.end == "cut":   # the power cut: no shutdown, nothing more written by the guest
                            os.killpg(proc.pid, signal.SIGKILL)
                            cut = time.monotonic()
                            progress("lab: power cut (qemu SIGKILLed at the done mark)")
                            break
                    elif boot is not None and not done and echo:
                        echo(line)
                if cut is not None:
                    break
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    total = time.monotonic() - started
    out_dir = run_dir / "share" / "out"
    rc_text = (out_dir / "rc").read_text().strip() if (out_dir / "rc").exists() else ""
    output = (out_dir / "output.log").read_text(errors="replace") if (out_dir / "output.log").exists() else ""
    result = VmResult(exit_code=int(rc_text) if rc_text.isdigit() else None, output=output, accelerator=accel,
                      boot_seconds=round(boot, 1) if boot is not None else None, total_seconds=round(total, 1),
                      run_dir=run_dir, timed_out=timed_out, console_tail=console[-30:],
                      cut_after_done_seconds=None if cut is None else round(cut - done_at, 3))
    if stopped:
        progress("lab: stopped before the end (qemu killed)")
    elif timed_out:
        progress(f"lab: time limit of {spec.timeout:.0f} s reached; qemu killed (console: {run_dir / 'console.log'})")
    elif result.exit_code is None:
        progress(f"lab: the guest stopped without running the command to its end; console: {run_dir / 'console.log'}")
    return result


def _run_interactive(argv, spec, run_dir, accel) -> VmResult:
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, timeout=spec.timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    rc = run_dir / "share" / "out" / "rc"
    code = int(rc.read_text().strip()) if rc.exists() and rc.read_text().strip().isdigit() else None
    return VmResult(exit_code=code, output="", accelerator=accel, boot_seconds=None,
                    total_seconds=round(time.monotonic() - started, 1), run_dir=run_dir, timed_out=timed_out)


def cleanup(run_dir: Path) -> None:
    """Drop the big per-run files (overlay, disks, NVDIMM backing files); keep share/out and the logs."""
    for pattern in ("root.qcow2", "disk*.img", "nvdimm*.img"):
        for p in run_dir.glob(pattern):
            p.unlink()
    shutil.rmtree(run_dir / "src", ignore_errors=True)
