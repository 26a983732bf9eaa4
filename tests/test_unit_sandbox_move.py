"""The unit drop-in inside a real move: written at SWITCH, shown in the plan, removed by the rollback.

A system server cannot be stopped and started here (systemd is not PID 1), so the move is a sandbox's
tmpdir move whose plan carries the unit change Debian 12's mariadb.service needs for a target under /home
(decided from its recorded ``systemctl show``); the drop-in goes to a live systemd manager's unit directory
and ``daemon-reload`` reloads that manager, so the effective settings are read back from systemd.  The fault:
the server's first start on the new path fails; the mover rolls back by itself and the drop-in must go.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from datadir_mover import unit_sandbox
from datadir_mover.move import plan as planmod
from datadir_mover.move.control import SandboxControl
from datadir_mover.move.executor import Executor
from tuner.core.errors import MoveError
from usermanager import UserManager

BOOKWORM = "bookworm-mariadb-server-10.11.19-0+deb12u1.mariadb.service"


@pytest.mark.root
def test_switch_writes_the_dropin_and_the_rollback_after_a_failed_start_removes_it(clone, mv_tiers, fixtures_dir,
                                                                                   tmp_path, monkeypatch):
    manager = UserManager(tmp_path / "um").start()
    try:
        manager.install(fixtures_dir / "distro-packages" / BOOKWORM, "mariadb.service")
        monkeypatch.setattr(unit_sandbox, "daemon_reload", manager.reload)
        sb = clone("distro-unit-move")
        target = os.path.join(mv_tiers["tmpfs"], "distro-tmpdir")
        plan = planmod.build(planmod.MoveRequest("tmpdir", target, probe=False), sb.connection_spec())
        assert plan.unit_change().action == "none"      # a sandbox is no unit: nothing to open
        # the change Debian 12's unit needs for a target under /home, in the plan (so in the journal)
        packaged = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
        change = unit_sandbox.plan_change(packaged, "/home/db/mysql", plan.move_id, units_root=str(manager.units))
        plan.unit_sandbox = change.to_dict()
        plan.steps = planmod.steps_of(plan)
        shown = planmod.render(plan)
        assert "systemd unit mariadb.service: ProtectHome=yes hides /home/db/mysql" in shown
        assert "ProtectHome=tmpfs" in shown and "BindPaths=/home/db/mysql" in shown
        assert f"systemd: write {change.dropin_path}, systemctl daemon-reload" in shown

        real_start = SandboxControl.start
        calls = []

        def start_fails_once(self):
            calls.append(Path(change.dropin_path).exists())
            if len(calls) == 1:
                raise MoveError("injected: the server did not start on the new path")
            return real_start(self)

        monkeypatch.setattr(SandboxControl, "start", start_fails_once)
        ex = Executor.create(plan)
        ex.background_proof = False
        with pytest.raises(MoveError) as failed:
            ex.run()
        assert calls[0] is True, "the drop-in was not in place when the server started on the new path"
        assert ex.journal.phase == "rolled_back", str(failed.value)
        assert not Path(change.dropin_path).exists()
        after = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
        assert after.properties == packaged.properties      # systemd sees the unit as the package shipped it
        assert sb.state().value == "running" and not Path(target).exists()
    finally:
        manager.stop()
