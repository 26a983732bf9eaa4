"""AppArmor rules for relocated InnoDB files: render, validate without loading, apply, remove.

The server's profile (``/etc/apparmor.d/usr.sbin.mysqld`` for MySQL, ``usr.sbin.mariadbd``
for MariaDB) ends with ``#include <local/usr.sbin.NAME>``; site rules go in that local
file, which package upgrades leave alone (Ubuntu's mysqld profile ends that way).
For every new location a move adds ``/path/ r,`` and ``/path/** rwk,`` inside a block
marked with the move's id, so rollback removes exactly what the move added.

Debian's MariaDB package ships ``usr.sbin.mariadbd`` (and older ones ``usr.sbin.mysqld``)
*intentionally empty* to leave the server unconfined; then there is nothing to change
and the plan says so.  Validation never loads anything into the kernel:
``apparmor_parser -Q -K`` (skip kernel load, skip cache) runs on a staged copy of
/etc/apparmor.d with the new local file in it.  Loading (``apparmor_parser -r``) happens
only where AppArmor is usable in the kernel (enabled, securityfs mounted: ``kernel_state``); where it
is enabled but securityfs is not mounted, a move that needs a rule is refused with what to mount.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from tuner.core.errors import MoveError, ToolMissing
from tuner.core.durable import write_atomic

PROFILES = ("usr.sbin.mariadbd", "usr.sbin.mysqld")
BINARY_OF = {"usr.sbin.mariadbd": "/usr/sbin/mariadbd", "usr.sbin.mysqld": "/usr/sbin/mysqld"}
_BLOCK = re.compile(r"# BEGIN innotier (?P<id>\S+)\n.*?# END innotier (?P=id)\n", re.S)


@dataclass(frozen=True)
class ProfileInfo:
    name: str
    path: str
    exists: bool
    empty: bool  # only comments and blank lines (Debian's MariaDB package ships it so)
    includes_local: bool
    local_path: str


@dataclass
class AppArmorChange:
    """What a move does to AppArmor, decided at plan time."""

    action: str  # "apply" (write the local include and reload), "write" (write, AppArmor not active), "none"
    reason: str
    profile: str | None
    local_path: str | None
    rules: str  # the block added to the local include
    active: bool
    move_id: str
    retires: str | None = None  # a move back home: the finalized move whose block this one removes
    retired_rules: str = ""  # that block as it stood (put back if this move is rolled back)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "AppArmorChange":
        return cls(**d)


def _only_comments(text: str) -> bool:
    return all(not ln.strip() or ln.lstrip().startswith("#") and not ln.lstrip().startswith("#include")
               for ln in text.splitlines())


def detect_profiles(root: str = "/etc/apparmor.d") -> list[ProfileInfo]:
    out = []
    for name in PROFILES:
        p = Path(root, name)
        text = p.read_text(errors="replace") if p.is_file() else ""
        includes_local = bool(re.search(rf"^\s*#?include\s+<local/{re.escape(name)}>", text, re.M))
        out.append(ProfileInfo(name, str(p), p.is_file(), p.is_file() and _only_comments(text), includes_local,
                               str(Path(root, "local", name))))
    return out


SECURITYFS = "kernel/security"   # under /sys: where securityfs is mounted (apparmor_parser writes to its apparmor/)


def kernel_state(sys_root: str = "/sys") -> str:
    """AppArmor in the running kernel, as the mover needs it: can a profile be (re)loaded here?

    - "usable": enabled, and securityfs is mounted with AppArmor's interface (``apparmor/.replace``, what
      ``apparmor_parser -r`` writes to);
    - "unmounted": enabled in the kernel (the module parameter says Y) but securityfs is not mounted, so
      profiles already loaded keep confining the server while no reload can reach the kernel;
    - "off": not enabled (no AppArmor, or not in the kernel's LSM list).
    """
    interface = Path(sys_root, SECURITYFS, "apparmor")
    if (interface / ".replace").exists():
        return "usable"
    try:
        enabled = Path(sys_root, "module", "apparmor", "parameters", "enabled").read_text().strip().upper()
    except OSError:
        enabled = ""
    return "unmounted" if enabled.startswith("Y") else "off"


def active(sys_root: str = "/sys") -> bool:
    """The mover can load and reload profiles here (kernel_state "usable")."""
    return kernel_state(sys_root) == "usable"


def render_rules(paths: list[str], move_id: str) -> str:
    """The block a move adds: read on each directory, read/write/lock below it."""
    lines = [f"# BEGIN innotier {move_id}"]
    for p in sorted(set(paths)):
        d = p.rstrip("/")
        lines += [f"  {_quote(d + '/')} r,", f"  {_quote(d + '/**')} rwk,"]
    lines.append(f"# END innotier {move_id}")
    return "\n".join(lines) + "\n"


def _quote(path: str) -> str:
    """AppArmor paths with blanks must be quoted (apparmor.d(5))."""
    return f'"{path}"' if any(c.isspace() for c in path) else path


def with_block(existing: str, block: str, move_id: str) -> str:
    text = without_block(existing, move_id)
    if text and not text.endswith("\n"):
        text += "\n"
    return text + block


def without_block(existing: str, move_id: str) -> str:
    return "".join(part for part in _split_keep(existing, move_id))


def _split_keep(text: str, move_id: str):
    pos = 0
    for m in _BLOCK.finditer(text):
        if m.group("id") == move_id:
            yield text[pos:m.start()]
            pos = m.end()
    yield text[pos:]


def choose(profiles: list[ProfileInfo], flavor: str) -> ProfileInfo | None:
    """The profile that confines this server: the flavor's own first; None when none exists."""
    order = ("usr.sbin.mariadbd", "usr.sbin.mysqld") if flavor == "mariadb" else ("usr.sbin.mysqld", "usr.sbin.mariadbd")
    by_name = {p.name: p for p in profiles}
    existing = [by_name[n] for n in order if by_name[n].exists]
    non_empty = [p for p in existing if not p.empty]
    return (non_empty or existing or [None])[0]


def plan_change(paths: list[str], flavor: str, move_id: str, root: str = "/etc/apparmor.d",
                sys_root: str = "/sys", retire: str | None = None) -> AppArmorChange:
    """What the move does to AppArmor.  ``retire``: the finalized move a move back home undoes; its block
    leaves the local include and no new rule is added (the server ran confined there before that move)."""
    rules = render_rules(paths, move_id)
    is_active = active(sys_root)
    prof = choose(detect_profiles(root), flavor)
    if prof is None:
        return AppArmorChange("none", f"no MySQL/MariaDB AppArmor profile in {root}: the server is not confined",
                              None, None, rules, is_active, move_id)
    if prof.empty:
        return AppArmorChange("none", f"{prof.path} is intentionally empty (Debian's MariaDB package ships it so): "
                              "the server is not confined, nothing to change; the rules shown are what a "
                              "profile would need", prof.path, prof.local_path, rules, is_active, move_id)
    if not prof.includes_local:
        return AppArmorChange("none", f"{prof.path} does not include <local/{prof.name}>; add the rules shown to the "
                              "profile by hand and reload it (apparmor_parser -r)", prof.path, prof.local_path, rules,
                              is_active, move_id)
    if kernel_state(sys_root) == "unmounted":
        raise MoveError(f"AppArmor is enabled in this kernel but securityfs is not mounted at "
                        f"{Path('/sys', SECURITYFS)}, so {prof.name} cannot be reloaded with the new rules; mount it "
                        f"(`mount -t securityfs securityfs {Path('/sys', SECURITYFS)}`) and plan again; nothing was "
                        "changed")
    retired = _block_of(Path(prof.local_path), retire) if retire else ""
    if retired:
        verb = "reloaded" if is_active else "not loaded (AppArmor is not active in this kernel)"
        return AppArmorChange("apply" if is_active else "write",
                              f"back where move {retire} found the server: its rules leave {prof.local_path}, none "
                              f"is added (the profile confined the server there before), and the profile is {verb}",
                              prof.path, prof.local_path, "", is_active, move_id, retire, retired)
    if is_active:
        return AppArmorChange("apply", f"{prof.name} is confining the server: the rules go in {prof.local_path} "
                              "and the profile is reloaded", prof.path, prof.local_path, rules, True, move_id)
    return AppArmorChange("write", f"AppArmor is not active in this kernel: the rules go in {prof.local_path} "
                          "(validated, not loaded) and take effect when AppArmor is enabled", prof.path,
                          prof.local_path, rules, False, move_id)


def _block_of(local: Path, move_id: str) -> str:
    """The block ``move_id`` wrote into a local include, as it stands ("" when it is not there)."""
    return _block_in(local.read_text() if local.is_file() else "", move_id)


def _block_in(text: str, move_id: str) -> str:
    return next((m.group(0) for m in _BLOCK.finditer(text) if m.group("id") == move_id), "")


def local_text(existing: str, change: AppArmorChange) -> str:
    """The local include after the move: a retired move's block out, this move's block (if any) in."""
    text = without_block(existing, change.retires) if change.retires else existing
    return with_block(text, change.rules, change.move_id) if change.rules else text


def local_text_undone(existing: str, change: AppArmorChange) -> str:
    """The local include after the move is rolled back: its block out, a retired block back in."""
    text = without_block(existing, change.move_id)
    if change.retires and change.retired_rules and not _block_in(text, change.retires):
        text = with_block(text, change.retired_rules, change.retires)
    return text


def _parser() -> str:
    exe = shutil.which("apparmor_parser") or ("/usr/sbin/apparmor_parser"
                                              if Path("/usr/sbin/apparmor_parser").exists() else None)
    if not exe:
        raise ToolMissing("apparmor_parser not found; install the apparmor package (apt-get install apparmor)")
    return exe


def validate(change: AppArmorChange, root: str = "/etc/apparmor.d") -> str:
    """Parse the profile with the new local include on a staged copy of ``root``; never load it into the kernel.

    Where the real profile is empty (or missing), the rules are checked inside a minimal
    profile for the server binary, so their syntax is still proven.  Returns the
    command line that was run.
    """
    with tempfile.TemporaryDirectory(prefix="innotier-apparmor-") as tmp:
        stage = Path(tmp, "apparmor.d")
        shutil.copytree(root, stage, symlinks=True, ignore=shutil.ignore_patterns("cache", "cache.d"),
                        ignore_dangling_symlinks=True)
        (stage / "local").mkdir(exist_ok=True)
        if change.action in ("apply", "write") and change.profile:
            name = Path(change.profile).name
            local = stage / "local" / name
            existing = local.read_text() if local.exists() else ""
            local.write_text(local_text(existing, change))
            target = stage / name
        else:
            name = Path(change.profile).name if change.profile else PROFILES[0]
            (stage / "local" / "innotier-validate").write_text(change.rules)
            target = stage / "innotier-validate"
            target.write_text("#include <tunables/global>\n\n"
                              f"profile innotier-validate {BINARY_OF.get(name, '/usr/sbin/mariadbd')} {{\n"
                              "  #include <abstractions/base>\n"
                              "  #include <local/innotier-validate>\n}\n")
        argv = [_parser(), "-Q", "-K", "--base", str(stage), "-I", str(stage), str(target)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            detail = (r.stderr or r.stdout).strip().splitlines()
            raise MoveError(f"apparmor_parser rejected the rules for {change.profile or 'the server'}: "
                            f"{detail[-1] if detail else 'no message'}; nothing was changed")
        return " ".join(argv[:3] + ["--base", "<staged copy>", "-I", "<staged copy>", target.name])


def apply(change: AppArmorChange) -> None:
    """Write the local include (durably) and reload the profile where AppArmor is active."""
    if change.action not in ("apply", "write") or not change.local_path:
        return
    local = Path(change.local_path)
    existing = local.read_text() if local.exists() else ""
    new = local_text(existing, change)
    if new != existing:
        write_atomic(local, new, mode=0o644)
    if change.action == "apply":
        _reload(change)


def remove(change: AppArmorChange) -> None:
    """Remove the move's block (rollback); reload where active."""
    if change.action not in ("apply", "write") or not change.local_path:
        return
    local = Path(change.local_path)
    if not local.exists():
        return
    existing = local.read_text()
    new = local_text_undone(existing, change)
    if new != existing:
        write_atomic(local, new, mode=0o644)
        if change.action == "apply":
            _reload(change)


def _reload(change: AppArmorChange) -> None:
    r = subprocess.run([_parser(), "-r", "-T", "-W", str(change.profile)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise MoveError(f"reloading AppArmor profile {change.profile} failed: {r.stderr.strip()}; "
                        f"fix {change.local_path} and run `apparmor_parser -r {change.profile}`")
