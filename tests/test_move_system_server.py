"""A move of a system server (found without --sandbox) where innotier cannot drive it.

A server reached through its client option file is not a sandbox, so the mover takes it for the distro's
server under systemd.  On this machine systemd is not PID 1, so `move plan` and `move apply` refuse with
one line naming each command to run by hand, and change nothing.  The host-mode lab test drives the same
move for real where systemd is PID 1 (tests/lab/).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from datadir_mover.move.control import SYSTEM_PLACEMENT, system_conf_dir, systemd_is_pid1
from tuner.core.errors import MoveError

pytestmark = pytest.mark.root


@pytest.mark.parametrize("verb", ["plan", "apply"])
def test_system_server_move_without_systemd_names_the_commands_to_run_by_hand(verb, shared_sandbox, cli, tmp_path):
    if systemd_is_pid1():
        pytest.skip("systemd is PID 1 here: innotier drives the system server (the host-mode lab test)")
    target = tmp_path / "newdata"
    dropin = system_conf_dir() / SYSTEM_PLACEMENT
    before = dropin.read_text() if dropin.exists() else None
    proc = cli("move", verb, "datadir", "--defaults-file", str(shared_sandbox.client_cnf), "--to", str(target),
               *(["--yes"] if verb == "apply" else []))
    assert proc.returncode == MoveError.exit_code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("innotier: systemd is not PID 1 here") and "run by hand: systemctl stop mariadb" in line
    assert f"from {shared_sandbox.datadir} to {target} with `cp -a`" in line
    assert f"`datadir={target}` to {dropin}" in line and f"`{target}/** rwk,`" in line
    assert line.endswith("systemctl start mariadb.service") or "systemctl start mysql.service" in line
    assert not target.exists() and (dropin.read_text() if dropin.exists() else None) == before
    assert Path(shared_sandbox.datadir, "ibdata1").exists()
