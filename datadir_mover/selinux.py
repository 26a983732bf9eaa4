"""SELinux: the file-context commands a relocation needs on hosts that enforce it (RHEL and derivatives).

innotier prints these commands rather than running them: labelling policy is the
administrator's call.  Types from the MySQL manual ("Configuring the SELinux
file context", 8.7.4) and mysqld_selinux(8): data files ``mysqld_db_t``, temporary
directory ``mysqld_tmp_t``.  tmpfs and DAX mounts do not keep labels across mounts:
mount them with ``context=system_u:object_r:mysqld_db_t:s0`` instead (common practice, not
from the manual).
"""

from __future__ import annotations

import shlex
from pathlib import Path

TYPE_OF = {"tmpdir": "mysqld_tmp_t"}  # everything else InnoDB writes is mysqld_db_t
DEFAULT_TYPE = "mysqld_db_t"
VOLATILE_FS = ("tmpfs", "ramfs")


def enforcing(selinuxfs: str = "/sys/fs/selinux") -> bool | None:
    """True enforcing, False permissive, None when SELinux is not enabled on this host."""
    p = Path(selinuxfs, "enforce")
    try:
        return p.read_text().strip() == "1"
    except OSError:
        return None


def file_context_type(component: str) -> str:
    return TYPE_OF.get(component, DEFAULT_TYPE)


def commands(component: str, path: str, fstype: str | None = None) -> list[str]:
    """The semanage/restorecon commands that label ``path`` for the server."""
    t = file_context_type(component)
    p = path.rstrip("/")
    spec = shlex.quote(f"{p}(/.*)?")
    cmds = [f"semanage fcontext -a -t {t} {spec}", f"restorecon -Rv {shlex.quote(p)}"]
    if fstype in VOLATILE_FS:
        cmds.append(f"# {fstype} keeps no labels across mounts: mount it with "
                    f"-o context=system_u:object_r:{t}:s0")
    return cmds

