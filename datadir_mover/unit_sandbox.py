"""systemd's sandboxing of the server's unit: can the server reach a move's target, and the drop-in that lets it.

A unit's sandboxing (systemd.exec(5)) builds the server's own mount namespace: ``ProtectSystem=`` makes
``/usr``, ``/boot``, ``/efi`` (``full``: and ``/etc``; ``strict``: everything) read-only, ``ProtectHome=``
hides ``/home``, ``/root`` and ``/run/user`` (``yes``), makes them read-only or puts an empty tmpfs there,
``ReadOnlyPaths=``, ``InaccessiblePaths=``, ``TemporaryFileSystem=`` do the same for any path, and
``PrivateTmp=`` gives the service its own ``/tmp`` and ``/var/tmp``.  Debian 12's ``mariadb.service`` sets
``ProtectSystem=full`` and ``ProtectHome=true``: a datadir moved under ``/home`` fails at the server's start
with every permission and AppArmor rule right.

The mover reads the unit's effective settings (``systemctl show``, drop-ins included) before it stops
anything and decides, for the target, the narrowest change that lets the server read and write it:

- read-only there (``ProtectSystem=``, ``ProtectHome=read-only``, ``ReadOnlyPaths=``): ``ReadWritePaths=TARGET``
  (the deeper mount wins);
- hidden by ``ProtectHome=yes``: ``ProtectHome=tmpfs`` and ``BindPaths=TARGET`` (a ``ReadWritePaths=`` below an
  inaccessible path is dropped by systemd; ``tmpfs`` keeps the rest of ``/home`` hidden);
- under a tmpfs (``ProtectHome=tmpfs``, ``TemporaryFileSystem=``): ``BindPaths=TARGET``;
- hidden by ``InaccessiblePaths=``, private (``PrivateTmp=``), or a unit with its own root
  (``RootDirectory=``/``RootImage=``): refused in one line naming the setting (opening those is the DBA's call).

The change is a drop-in ``/etc/systemd/system/UNIT.d/99-innotier-MOVE.conf`` written at SWITCH (then
``systemctl daemon-reload``), removed by rollback and by the move back home, which retires the drop-in of
the move it undoes.  ``--no-systemd-changes`` refuses a move that needs one, in one line naming the setting.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tuner.core.durable import fsync_dir, write_atomic
from tuner.core.errors import MoveError

PROPERTIES = ("ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "BindPaths",
              "BindReadOnlyPaths", "TemporaryFileSystem", "PrivateTmp", "RootDirectory", "RootImage", "DynamicUser")
UNITS_ROOT = "/etc/systemd/system"
PROTECT_SYSTEM = {"yes": ("/usr", "/boot", "/efi"), "true": ("/usr", "/boot", "/efi"),
                  "full": ("/usr", "/boot", "/efi", "/etc"), "strict": ("/",)}
HOME_DIRS = ("/home", "/root", "/run/user")
_BIND = re.compile(r"-?(?P<src>.+?):(?P<dst>.+?):(?:rbind|norbind)(?:\s+|$)")


@dataclass(frozen=True)
class Mount:
    """One of the unit's settings as it applies to a path: what the server sees there."""

    path: str
    kind: str  # read-only, read-write, inaccessible, tmpfs, bind, bind-ro, private
    setting: str  # the setting that makes it, as a DBA writes it (ProtectHome=yes)


@dataclass(frozen=True)
class Sandboxing:
    """A unit's effective sandboxing, from ``systemctl show``."""

    unit: str
    properties: dict[str, str]

    def mounts(self) -> list[Mount]:
        p = self.properties
        out: list[Mount] = []
        ps = p.get("ProtectSystem", "no")
        out += [Mount(d, "read-only", f"ProtectSystem={ps}") for d in PROTECT_SYSTEM.get(ps, ())]
        ph = p.get("ProtectHome", "no")
        kind = {"yes": "inaccessible", "true": "inaccessible", "read-only": "read-only", "tmpfs": "tmpfs"}.get(ph)
        out += [Mount(d, kind, f"ProtectHome={ph}") for d in HOME_DIRS] if kind else []
        for prop, kind in (("ReadOnlyPaths", "read-only"), ("ReadWritePaths", "read-write"),
                           ("InaccessiblePaths", "inaccessible")):
            out += [Mount(d, kind, f"{prop}={d}") for d in _paths(p.get(prop, ""))]
        out += [Mount(e.split(":")[0], "tmpfs", f"TemporaryFileSystem={e}")
                for e in shlex.split(p.get("TemporaryFileSystem", ""))]
        for prop, kind in (("BindPaths", "bind"), ("BindReadOnlyPaths", "bind-ro")):
            out += [Mount(m.group("dst"), kind, f"{prop}={m.group('dst')}") for m in _BIND.finditer(p.get(prop, ""))]
        if p.get("PrivateTmp", "no") in ("yes", "true"):
            out += [Mount(d, "private", "PrivateTmp=yes") for d in ("/tmp", "/var/tmp")]
        return out


def _paths(value: str) -> list[str]:
    """A path list as `systemctl show` prints it: blank-separated, quoted where blanks are inside, ``-``/``+``."""
    return [v.lstrip("-+") for v in shlex.split(value)]


def parse_show(unit: str, text: str) -> Sandboxing:
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    return Sandboxing(unit, props)


def read(unit: str, systemctl: tuple[str, ...] = ("systemctl",)) -> Sandboxing:
    """The unit's effective sandboxing, as systemd has loaded it (drop-ins included)."""
    r = subprocess.run([*systemctl, "show", unit, "-p", ",".join(PROPERTIES)], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise MoveError(f"`systemctl show {unit}` failed ({r.stderr.strip()}); check the unit's name (--service)")
    return parse_show(unit, r.stdout)


def _under(path: str, parent: str) -> bool:
    return parent == "/" or path == parent or path.startswith(parent.rstrip("/") + "/")


@dataclass(frozen=True)
class Reach:
    """What the server sees at a path: ``kind`` of the deciding mount (``None``: the host's own)."""

    kind: str | None
    setting: str | None


def reach(sb: Sandboxing, path: str) -> Reach:
    """What the server sees at ``path`` in its namespace (systemd's rules, namespace.c):
    below an inaccessible path everything is dropped, the deepest other mount wins."""
    path = os.path.normpath(path)
    above = [m for m in sb.mounts() if _under(path, m.path)]
    hidden = [m for m in above if m.kind == "inaccessible"]
    if hidden:
        top = min(hidden, key=lambda m: len(m.path))
        return Reach("inaccessible", top.setting)
    if not above:
        return Reach(None, None)
    deepest = max(above, key=lambda m: (len(m.path.rstrip("/")), m.kind in ("bind", "read-write")))
    return Reach(deepest.kind, deepest.setting)


@dataclass
class UnitChange:
    """What a move does to the unit's sandboxing, decided at plan time (kept in the plan, so in the journal)."""

    action: str  # "dropin" (write it and daemon-reload), "none"
    reason: str
    unit: str | None
    dropin_path: str | None
    settings: list[str] = field(default_factory=list)  # the drop-in's [Service] lines
    move_id: str = ""
    retires: str | None = None  # a move back home: the finalized move whose drop-in this one removes
    retired_path: str | None = None
    retired_text: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "UnitChange":
        return cls(**d) if d else cls("none", "not a systemd unit", None, None)

    def dropin_text(self) -> str:
        return (f"# innotier move {self.move_id}: lets {self.unit}'s server reach its new path\n"
                "# removed by `innotier move rollback` of that move and by the move back home\n"
                "[Service]\n" + "".join(f"{s}\n" for s in self.settings))


def _quoted(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def needed(sb: Sandboxing, target: str) -> tuple[list[str], str]:
    """(the drop-in lines that let the server read and write ``target``, why); refuses what it will not open."""
    r = reach(sb, target)
    t = _quoted(os.path.normpath(target))
    if r.kind in (None, "read-write", "bind"):
        return [], f"the server can write {target} ({r.setting or 'no setting of the unit covers it'})"
    if r.kind in ("read-only", "bind-ro"):
        return [f"ReadWritePaths={t}"], f"{r.setting} makes {target} read-only for the server"
    if r.kind == "inaccessible" and r.setting.startswith("ProtectHome="):
        return (["ProtectHome=tmpfs", f"BindPaths={t}"],
                f"{r.setting} hides {target} from the server (a ReadWritePaths= below it would be dropped)")
    if r.kind == "tmpfs":
        return [f"BindPaths={t}"], f"{r.setting} puts an empty tmpfs over {target} for the server"
    if r.kind == "private":
        raise MoveError(f"{sb.unit} has {r.setting}: the server has its own /tmp and /var/tmp and never sees "
                        f"{target}; choose a target outside /tmp and /var/tmp; nothing was changed")
    raise MoveError(f"{sb.unit} has {r.setting}, which hides {target} from the server; innotier does not lift it; "
                    f"choose another target or remove that setting from the unit; nothing was changed")


def plan_change(sb: Sandboxing | None, target: str, move_id: str, allow: bool = True,
                units_root: str = UNITS_ROOT, retire: str | None = None) -> UnitChange:
    """What the move does to the unit.  ``allow`` False (``--no-systemd-changes``): a needed drop-in is refused.
    ``retire``: the finalized move a move back home undoes (its drop-in, if it wrote one, goes)."""
    if sb is None:
        return UnitChange("none", "not a systemd unit: no sandboxing to check", None, None, move_id=move_id)
    root = sb.properties.get("RootDirectory") or sb.properties.get("RootImage")
    if root:
        raise MoveError(f"{sb.unit} runs the server in its own root (RootDirectory/RootImage={root}); innotier "
                        "moves files of the host's tree only; nothing was changed")
    settings, why = needed(sb, target)
    dropin = Path(units_root, f"{sb.unit}.d", f"99-innotier-{move_id}.conf")
    old = Path(units_root, f"{sb.unit}.d", f"99-innotier-{retire}.conf") if retire else None
    retired = old.read_text() if old and old.is_file() else ""
    if settings and not allow:
        raise MoveError(f"{why}, and --no-systemd-changes forbids the drop-in that would let it write there "
                        f"({'; '.join(settings)} in {dropin}); allow it, or choose another target; nothing was "
                        "changed")
    change = UnitChange("dropin" if settings or retired else "none", why, sb.unit,
                        str(dropin) if settings else None, settings, move_id)
    if retired:
        change.retires, change.retired_path, change.retired_text = retire, str(old), retired
        change.reason += f"; move {retire}'s drop-in {old} goes (the server ran here before it)"
    elif settings:
        change.reason += f": drop-in {dropin} with {'; '.join(settings)}"
    return change


def daemon_reload() -> None:
    r = subprocess.run(["systemctl", "daemon-reload"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise MoveError(f"`systemctl daemon-reload` failed: {r.stderr.strip()}; run it, then `innotier move resume`")


def apply(change: UnitChange, reload: Callable[[], None] | None = None) -> None:
    """Write the drop-in (durably), remove a retired one, and have systemd reload its units."""
    if change.action != "dropin":
        return
    if change.dropin_path:
        p = Path(change.dropin_path)
        p.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        write_atomic(p, change.dropin_text(), mode=0o644)
    _unlink(change.retired_path)
    (reload or daemon_reload)()


def remove(change: UnitChange, reload: Callable[[], None] | None = None) -> None:
    """Undo ``apply`` (rollback): the move's drop-in goes, a retired one comes back."""
    if change.action != "dropin":
        return
    _unlink(change.dropin_path)
    if change.retired_path and change.retired_text and not Path(change.retired_path).exists():
        write_atomic(Path(change.retired_path), change.retired_text, mode=0o644)
    (reload or daemon_reload)()


def _unlink(path: str | None) -> None:
    if path and Path(path).exists():
        Path(path).unlink()
        fsync_dir(Path(path).parent)
