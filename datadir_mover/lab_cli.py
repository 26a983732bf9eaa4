"""`innotier lab build|run|shell|status`: a VM with real PMEM (fsdax/devdax) and md RAID kernel drivers.

A DBA rehearses a relocation onto persistent memory or a RAID layout before touching production:
`innotier lab run -- innotier tiers create pmem ...` then the whole `move apply` flow, inside a VM whose kernel
has the nvdimm and md drivers, against emulated NVDIMMs and virtual disks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from datadir_mover.lab import host
from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm
from tuner.core.cliutil import print_json
from tuner.core.errors import LabError, UsageError
from tuner.core.paths import innotier_home
from tuner.core.units import parse_size

ABOUT = ("A lab VM (qemu, Debian 12 kernel) with emulated NVDIMMs and virtual disks, so PMEM/DAX and md RAID "
         "tiers and relocations onto them can be rehearsed with the real kernel drivers. " + vm.NOT_FOR_SPEED + ".")
CHECKOUT = Path(__file__).resolve().parent.parent   # the directory holding tuner/, datadir_mover/, ...


def register(sub) -> None:
    p = sub.add_parser("lab", help="a VM with real PMEM/DAX and md RAID drivers to rehearse tiers and moves",
                       description=ABOUT)
    s = p.add_subparsers(dest="lab_cmd", metavar="SUBCOMMAND")
    s.required = True

    b = s.add_parser("build", help="build the lab image once (cached by content under innotier's cache)")
    b.add_argument("--force", action="store_true", help="rebuild even when the cache has this image")
    b.add_argument("--init", choices=host.INITS, default="lab",
                   help="systemd: an image that also boots like a real server (systemd, AppArmor enforcing, "
                        "mariadb.service); it serves the fast init too")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_build)

    for name, helptext in (("run", "boot the lab, run COMMAND inside, return its exit code and output"),
                           ("shell", "boot the lab with an interactive shell on the serial console")):
        r = s.add_parser(name, help=helptext, description=ABOUT)
        r.add_argument("--pmem", action="append", metavar="SIZE",
                       help="one emulated NVDIMM of SIZE (a multiple of 16M); repeat for more (default: one of 2G)")
        r.add_argument("--no-pmem", action="store_true", help="no NVDIMM")
        r.add_argument("--disks", default="4x512M", metavar="NxSIZE", help="fresh virtual disks (default 4x512M)")
        r.add_argument("--memory", default="1536M", help="guest RAM (default 1536M)")
        r.add_argument("--timeout", type=float, default=900 if name == "run" else 3600, metavar="S",
                       help="power the VM off after S seconds")
        r.add_argument("--source", metavar="DIR", default=str(CHECKOUT),
                       help="innotier checkout shared read-only at /mnt/src and run from there (default: this one)")
        r.add_argument("--keep", action="store_true", help="keep the run's disks and NVDIMM files")
        r.add_argument("--init", choices=host.INITS, default="lab",
                       help="lab: the fast init (default); systemd: host mode, COMMAND runs as a unit once "
                            "mariadb.service is up, AppArmor enforcing (needs `lab build --init systemd`)")
        if name == "run":
            r.add_argument("--json", action="store_true", help="print the result as JSON (output in output.log)")
            r.add_argument("command", nargs="+", metavar="-- COMMAND", help="command to run inside the guest")
        r.set_defaults(func=cmd_run if name == "run" else cmd_shell)

    t = s.add_parser("status", help="the cached image for this checkout and the accelerator that would be used")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_status)


def _progress(quiet: bool = False):
    return (lambda m: None) if quiet else (lambda m: print(f"innotier: {m}", file=sys.stderr, flush=True))


def cmd_build(args) -> int:
    img = lab_image.build(lab_image.default_spec(CHECKOUT, host=args.init == "systemd"), CHECKOUT, force=args.force, progress=_progress())
    if args.json:
        print_json(img)
    else:
        print(f"{img.directory}  kernel {img.kernel_release}  built in {img.build_seconds} s  "
              f"{(img.size_bytes or 0) / 2**20:.0f} MiB")
    return 0


def _spec_from_args(args, command: tuple[str, ...], interactive: bool) -> vm.VmSpec:
    source = Path(args.source).resolve()
    if not (source / "tuner" / "cli.py").is_file():
        raise UsageError(f"--source {source} is not an innotier checkout (no tuner/cli.py); give the checkout's path")
    pmem = () if args.no_pmem else tuple(vm.parse_pmem(p) for p in (args.pmem or ["2G"]))
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive, in seconds, like 900")
    if interactive and args.init == "systemd":
        raise UsageError("`lab shell --init systemd` is not offered; use `innotier lab run --init systemd -- CMD`")
    return vm.VmSpec(command=command, pmem=pmem, disks=vm.parse_disks(args.disks),
                     memory=parse_size(args.memory, "--memory"), timeout=args.timeout, source=source,
                     interactive=interactive, init=args.init)


def _image(init: str = "lab") -> lab_image.Image:
    """The cached image for this checkout; the host-mode image serves the fast init too."""
    plain, host_spec = lab_image.default_spec(CHECKOUT), lab_image.default_spec(CHECKOUT, host=True)
    img = lab_image.find_image(host_spec) or (lab_image.find_image(plain) if init == "lab" else None)
    if img is not None:
        return img
    if init == "systemd" and lab_image.find_image(plain):
        raise LabError(f"the cached lab image {plain.key()} has no systemd host mode; run `innotier lab build "
                       "--init systemd` first (a second image, about 3-4 minutes, once)")
    flag = " --init systemd" if init == "systemd" else ""
    raise LabError(f"the lab image {(host_spec if flag else plain).key()} is not built on this machine; run "
                   f"`innotier lab build{flag}` first (about 3-4 minutes, once)")


def _run_dir() -> Path:
    return innotier_home() / "lab" / "runs" / time.strftime("%Y%m%d-%H%M%S")


def cmd_run(args) -> int:
    command = tuple(args.command)
    spec = _spec_from_args(args, command, interactive=False)
    run_dir = _run_dir()
    echo = None if args.json else (lambda line: print(line, flush=True))
    try:
        result = vm.run(spec, _image(spec.init), run_dir, echo=echo, progress=_progress())
    finally:
        if not args.keep:
            vm.cleanup(run_dir)
    if args.json:
        print_json(result)
    else:
        print(f"innotier: lab: exit code {result.exit_code} after {result.total_seconds:.0f} s "
              f"(boot {result.boot_seconds} s, {result.accelerator}); output and console in {run_dir}",
              file=sys.stderr)
    if result.timed_out:
        raise LabError(f"the lab VM hit the time limit of {spec.timeout:.0f} s; raise --timeout or look at "
                       f"{run_dir / 'console.log'}")
    if result.exit_code is None:
        raise LabError(f"the lab VM stopped before the command finished; look at {run_dir / 'console.log'}")
    return result.exit_code


def cmd_shell(args) -> int:
    if not sys.stdin.isatty():
        raise UsageError("`lab shell` needs a terminal; use `innotier lab run -- COMMAND` from scripts")
    spec = _spec_from_args(args, (), interactive=True)
    run_dir = _run_dir()
    print("innotier: lab shell: Ctrl-A X powers the VM off; `exit` ends the shell", file=sys.stderr)
    try:
        result = vm.run(spec, _image(), run_dir, progress=_progress())
    finally:
        if not args.keep:
            vm.cleanup(run_dir)
    return result.exit_code or 0


def cmd_status(args) -> int:
    spec = lab_image.default_spec(CHECKOUT)
    img = lab_image.find_image(spec)
    accel, why = vm.choose_accelerator()
    data = {"key": spec.key(), "built": img is not None, "image": img.to_dict() if img else None,
            "accelerator": accel, "accelerator_reason": why, "blockers": lab_image.host_blockers(),
            "note": vm.NOT_FOR_SPEED}
    if args.json:
        print_json(data)
        return 0
    print(f"image {spec.key()}: " + (f"built at {img.directory} (kernel {img.kernel_release})" if img
                                      else "not built; run `innotier lab build`"))
    print(f"accelerator: {accel} ({why})")
    for b in data["blockers"]:
        print(f"cannot build here: {b}")
    print(f"note: {vm.NOT_FOR_SPEED}")
    return 0
