"""AppArmor rules for relocated InnoDB files: find the confining profile, render, validate without loading,
apply, remove.

The profile is found, not assumed: every profile file in /etc/apparmor.d is read, and the one whose
attachment matches the server binary confines it, whatever the file and profile are called (Debian sid's
MySQL 9.7 ships ``usr.sbin.mysqld``, attached to ``/usr/sbin/mysqld``; sid's MariaDB 11.8 ships
``mariadbd``, ``profile mariadbd /usr/sbin/mariadbd``).  Site rules go in the local file the profile
includes (``#include <local/usr.sbin.mysqld>``, ``include if exists <local/mariadbd>``), which package
upgrades leave alone.  For every new location a move adds ``/path/ r,`` and ``/path/** rwk,`` inside a
block marked with the move's id, so rollback removes exactly what the move added; it never deletes the
local file, because a plain ``#include`` of a missing file does not parse (MySQL's profile).  A profile
with no local include is refused in one line naming the include to add.

Debian's MariaDB up to trixie ships ``usr.sbin.mariadbd`` *intentionally empty* to leave the server
unconfined; then there is nothing to change and the plan says so.  Whether the profile is enforced comes
from the kernel's list (``/sys/kernel/security/apparmor/profiles``): a profile that is not loaded is not
confining the server, so its rules are written but it is not loaded (loading it would confine a server
that runs unconfined).  Validation never loads anything into the kernel: ``apparmor_parser -Q -K`` (skip
kernel load, skip cache) runs on a staged copy of /etc/apparmor.d with the new local file in it.  Loading
(``apparmor_parser -r``) happens only where AppArmor is usable in the kernel (enabled, securityfs mounted:
``kernel_state``); where it is enabled but securityfs is not mounted, a move that needs a rule is refused
with what to mount.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from tuner.core.errors import MoveError, ToolMissing
from tuner.core.durable import write_atomic

# where each flavor's server binary is, most likely first (MariaDB's package keeps a mysqld symlink)
BINARIES = {"mariadb": ("/usr/sbin/mariadbd", "/usr/sbin/mysqld"), "mysql": ("/usr/sbin/mysqld",),
            "percona": ("/usr/sbin/mysqld",)}
# files apparmor_parser's loader skips in /etc/apparmor.d (apparmor.d(5), rc.apparmor.functions)
_SKIPPED = ("*.dpkg-new", "*.dpkg-old", "*.dpkg-dist", "*.dpkg-bak", "*.dpkg-remove", "*.pacsave", "*.pacnew",
            "*.rpmnew", "*.rpmsave", "*~", ".*", "README")
_BLOCK = re.compile(r"# BEGIN innotier (?P<id>\S+)\n.*?# END innotier (?P=id)\n", re.S)
# a profile's head: `profile NAME [ATTACHMENT] [flags=(...)] {` or `ATTACHMENT [flags=(...)] {` (an absolute path)
_HEAD = re.compile(r"^\s*(?:profile\s+(?P<name>\S+)(?:\s+(?P<attach>/\S+))?|(?P<path>/\S+))"
                   r"(?:\s+flags\s*=\s*\([^)]*\))?\s*\{", re.M)
_LOCAL_INCLUDE = re.compile(r"^\s*(?P<line>#?include\s+(?:if\s+exists\s+)?<(?P<rel>local/[^>]+)>)", re.M)


@dataclass(frozen=True)
class ProfileInfo:
    """The profile attached to the server binary, as its file declares it."""

    name: str  # the profile's name (the attachment path when the file gives no name)
    path: str  # the file that declares it
    attachment: str
    include_line: str | None  # its site-rule include, verbatim (None: it has none)
    local_path: str | None  # the file that include reads


@dataclass
class AppArmorChange:
    """What a move does to AppArmor, decided at plan time."""

    action: str  # "apply" (write the local include and reload), "write" (write, not loaded), "none"
    reason: str
    profile: str | None  # the profile's file
    local_path: str | None
    rules: str  # the block added to the local include
    active: bool
    move_id: str
    retires: str | None = None  # a move back home: the finalized move whose block this one removes
    retired_rules: str = ""  # that block as it stood (put back if this move is rolled back)
    profile_name: str | None = None
    include_line: str | None = None
    mode: str = "unknown"  # the kernel's word for it: enforce, complain, not loaded; unknown without securityfs

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "AppArmorChange":
        return cls(**d)


def _only_comments(text: str) -> bool:
    return all(not ln.strip() or ln.lstrip().startswith("#") and not ln.lstrip().startswith("#include")
               for ln in text.splitlines())


def _glob_matches(attachment: str, binary: str) -> bool:
    """AppArmor's attachment globbing, as far as a server binary needs it: ``{a,b}`` alternatives, ``*``, ``**``,
    ``?`` and ``[...]`` (fnmatch's ``*`` crosses ``/``, which only widens ``*`` to ``**``)."""
    m = re.search(r"\{([^{}]*)\}", attachment)
    if m:
        return any(_glob_matches(attachment[:m.start()] + alt + attachment[m.end():], binary)
                   for alt in m.group(1).split(","))
    return fnmatch.fnmatchcase(binary, attachment.replace("**", "*"))


def _blank_comments(text: str) -> str:
    """The text with its comment lines blanked (same length): braces and heads in comments do not count."""
    return re.sub(r"(?m)^[ \t]*#(?!include\b).*$", lambda m: " " * len(m.group(0)), text)


def _top_profiles(text: str):
    """(name, attachment, body) of each top-level profile in a profile file (child profiles stay in the body)."""
    code = _blank_comments(text)
    pos = 0
    while True:
        m = _HEAD.search(code, pos)
        if not m:
            return
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        attach = m.group("attach") or m.group("path") or ""
        yield m.group("name") or attach, attach, text[m.end():i]
        pos = i


def _outer(body: str) -> str:
    """A profile's body with its child profiles' text blanked (same length): their includes are not its own."""
    code, out, depth = _blank_comments(body), list(body), 0
    for i, c in enumerate(code):
        depth += c == "{"
        if depth and c not in "\n":
            out[i] = " "
        depth -= c == "}" and depth > 0
    return "".join(out)


def profile_files(root: str) -> list[Path]:
    base = Path(root)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir()
                  if p.is_file() and not any(fnmatch.fnmatch(p.name, pat) for pat in _SKIPPED))


def find_profile(binaries, root: str = "/etc/apparmor.d") -> ProfileInfo | None:
    """The profile whose attachment matches one of ``binaries`` (in their order), whatever its file's name."""
    declared = []
    for f in profile_files(root):
        text = f.read_text(errors="replace")
        if _only_comments(text):
            continue
        declared += [(name, attach, body, f) for name, attach, body in _top_profiles(text) if attach]
    for binary in binaries:
        for name, attach, body, f in declared:
            if _glob_matches(attach, binary):
                inc = _LOCAL_INCLUDE.search(_outer(body))
                return ProfileInfo(name, str(f), attach, inc.group("line") if inc else None,
                                   str(Path(root, inc.group("rel"))) if inc else None)
    return None


def empty_stubs(binaries, root: str = "/etc/apparmor.d") -> list[str]:
    """Profile files named after a server binary that hold only comments (Debian's MariaDB up to trixie)."""
    names = {n for b in binaries for n in (b.lstrip("/").replace("/", "."), Path(b).name)}
    return [str(p) for p in profile_files(root) if p.name in names and _only_comments(p.read_text(errors="replace"))]


def loaded_mode(name: str, sys_root: str = "/sys") -> str:
    """The kernel's mode for profile ``name``: enforce, complain, ...; "not loaded"; "unknown" without its list."""
    listing = Path(sys_root, SECURITYFS, "apparmor", "profiles")
    try:
        lines = listing.read_text().splitlines()
    except OSError:
        return "unknown"
    for ln in lines:
        m = re.match(r"^(?P<name>.+) \((?P<mode>[^)]+)\)$", ln.strip())
        if m and m.group("name") == name:
            return m.group("mode")
    return "not loaded"


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


def plan_change(paths: list[str], flavor: str, move_id: str, root: str = "/etc/apparmor.d",
                sys_root: str = "/sys", retire: str | None = None, binary: str | None = None) -> AppArmorChange:
    """What the move does to AppArmor.  ``binary``: the running server's executable when known (the kernel
    attaches a profile to the resolved path; else the flavor's usual ones, MariaDB's old ``mysqld`` too).  ``retire``: the finalized move a move back home undoes; its block leaves the local include
    and no new rule is added (the server ran confined there before that move)."""
    rules = render_rules(paths, move_id)
    is_active = active(sys_root)
    binaries = [binary] if binary else list(BINARIES.get(flavor, BINARIES["mysql"]))
    prof = find_profile(binaries, root)
    if prof is None:
        stubs = empty_stubs(binaries, root)
        why = (f"{stubs[0]} is intentionally empty (Debian's MariaDB package ships it so): the server is not "
               "confined, nothing to change; the rules shown are what a profile would need" if stubs else
               f"no profile in {root} attaches to {binaries[0]}: the server is not confined, nothing to change")
        return AppArmorChange("none", why, stubs[0] if stubs else None, None, rules, is_active, move_id)
    if prof.include_line is None:
        inc = f"include if exists <local/{Path(prof.path).name}>"
        raise MoveError(f"AppArmor profile {prof.name} ({prof.path}) has no include for site rules, so innotier has "
                        f"nowhere to put {' and '.join(ln.strip() for ln in rules.splitlines()[1:-1])}; add the "
                        f"line `{inc}` before the profile's closing brace and plan again; nothing was changed")
    mode = loaded_mode(prof.name, sys_root)
    facts = dict(profile_name=prof.name, include_line=prof.include_line, mode=mode)
    if kernel_state(sys_root) == "unmounted":
        raise MoveError(f"AppArmor is enabled in this kernel but securityfs is not mounted at "
                        f"{Path('/sys', SECURITYFS)}, so {prof.name} cannot be reloaded with the new rules; mount it "
                        f"(`mount -t securityfs securityfs {Path('/sys', SECURITYFS)}`) and plan again; nothing was "
                        "changed")
    loaded = is_active and mode != "not loaded"
    where = f"profile {prof.name} ({prof.path}, {mode}) reads site rules through `{prof.include_line}`"
    if not is_active:
        how = "AppArmor is not active in this kernel: not loaded (validated only; it takes effect when enabled)"
    elif not loaded:
        how = ("the profile is not loaded in the kernel, so it is not confining the server: written, not loaded "
               "(loading it would confine a server that runs unconfined)")
    else:
        how = "the profile is reloaded"
    action = "apply" if loaded else "write"
    retired = _block_of(Path(prof.local_path), retire) if retire else ""
    if retired:
        return AppArmorChange(action, f"{where}; back where move {retire} found the server: its rules leave "
                              f"{prof.local_path}, none is added (the profile confined the server there before); "
                              f"{how}", prof.path, prof.local_path, "", is_active, move_id, retire, retired, **facts)
    return AppArmorChange(action, f"{where}: the rules go in {prof.local_path}; {how}", prof.path, prof.local_path,
                          rules, is_active, move_id, **facts)


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

    Where no profile confines the server, the rules are checked inside a minimal profile for the server
    binary, so their syntax is still proven.  Returns the command line that was run.
    """
    with tempfile.TemporaryDirectory(prefix="innotier-apparmor-") as tmp:
        stage = Path(tmp, "apparmor.d")
        shutil.copytree(root, stage, symlinks=True, ignore=shutil.ignore_patterns("cache", "cache.d"),
                        ignore_dangling_symlinks=True)
        (stage / "local").mkdir(exist_ok=True)
        if change.action in ("apply", "write") and change.profile and change.local_path:
            local = stage / Path(change.local_path).relative_to(root)
            local.parent.mkdir(parents=True, exist_ok=True)
            existing = local.read_text() if local.exists() else ""
            local.write_text(local_text(existing, change))
            target = stage / Path(change.profile).relative_to(root)
        else:
            (stage / "local" / "innotier-validate").write_text(change.rules)
            target = stage / "innotier-validate"
            target.write_text("#include <tunables/global>\n\n"
                              "profile innotier-validate /usr/sbin/innotier-validate {\n"
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
