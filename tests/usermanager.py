"""A real systemd manager that loads unit files, where systemd is not PID 1 (this machine, CI).

``systemd --user`` parses units exactly as the system manager does (the same loader, the same
``systemctl show`` properties); it only refuses to start where the host was not booted with systemd
(``/run/systemd/system`` missing).  So it runs in a private mount namespace (``unshare -m``) with a
directory bound over ``/run/systemd`` that has ``system/`` in it, and the ``inaccessible/`` nodes PID 1 would
have made (``ProtectHome=yes`` and ``InaccessiblePaths=`` mount them over what they hide): nothing outside
the namespace sees that.  Units it starts get their real mount namespace from it (root's manager may).
Its units come from ``XDG_CONFIG_HOME/systemd/user``; clients reach it through its private socket in
``XDG_RUNTIME_DIR`` (``systemctl --user``).  Nothing is started: units are only loaded, shown and reloaded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from waiting import wait_for

SHOW_PROPS = ("ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "BindPaths",
              "BindReadOnlyPaths", "TemporaryFileSystem", "PrivateTmp", "RootDirectory", "RootImage", "DynamicUser",
              "MainPID", "ActiveState")

_START = """set -e
mkdir -p "$1/fakerun/system" "$1/fakerun/inaccessible/dir"
touch "$1/fakerun/inaccessible/reg"
chmod 0000 "$1/fakerun/inaccessible/dir" "$1/fakerun/inaccessible/reg"
mount --bind "$1/fakerun" /run/systemd
exec /lib/systemd/systemd --user --log-target=console --log-level=warning
"""


class UserManager:
    def __init__(self, base: Path):
        self.base = base
        self.units = base / "config" / "systemd" / "user"
        self.runtime = base / "runtime"
        self.units.mkdir(parents=True)
        self.runtime.mkdir(mode=0o700)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=str(self.runtime), XDG_CONFIG_HOME=str(base / "config"),
                        HOME=str(base))
        self.env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "UserManager":
        log = open(self.base / "manager.log", "wb")
        self.proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", _START, "sh",
                                      str(self.base)], env=self.env, stdout=log, stderr=log, start_new_session=True)
        wait_for(lambda: (self.runtime / "systemd" / "private").is_socket() or self.proc.poll() is not None,
                 timeout=30, what="systemd --user's private socket")
        if self.proc.poll() is not None:
            raise RuntimeError(f"systemd --user exited: {(self.base / 'manager.log').read_text()[-500:]}")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)

    def systemctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["systemctl", "--user", *args], env=self.env, capture_output=True, text=True,
                              timeout=60, check=True)

    def install(self, unit_file: Path, name: str) -> None:
        shutil.copy(unit_file, self.units / name)
        self.reload()

    def reload(self) -> None:
        self.systemctl("daemon-reload")

    def show(self, unit: str) -> str:
        return self.systemctl("show", unit, "-p", ",".join(SHOW_PROPS)).stdout
