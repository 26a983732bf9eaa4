"""tuner.core.sandbox is a package now; every name callers imported from the module stays importable there."""

from __future__ import annotations

import tuner.core.sandbox as sbx

# what any module, test or bench imports from tuner.core.sandbox (grep before removing one)
NAMES = ("Sandbox", "SandboxState", "ServerBinaries", "STOP_MODES", "DESTROY_CLOSERS", "MARIADB_BOOTSTRAP_SQL",
         "NAME_RE", "SOCKET_PATH_MAX", "adopt", "binaries_for_server", "binaries_of", "create", "find_binaries",
         "free_port", "list_sandboxes", "on_destroy", "page_size_label", "parse_page_size", "port_in_use",
         "proc_state", "proc_threads", "sandboxes_dir", "validate_name")


def test_every_name_of_the_old_module_is_still_there():
    assert [n for n in NAMES if not hasattr(sbx, n)] == []
    assert set(NAMES) == set(sbx.__all__)


def test_ping_is_public_and_the_old_private_name_still_answers():
    assert callable(sbx.Sandbox.ping) and sbx.Sandbox._ping is sbx.Sandbox.ping


def test_a_saved_record_loads_as_a_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("INNOTIER_HOME", str(tmp_path))  # a home of its own: the session's holds other sandboxes
    from tuner.core.sandbox.record import SandboxRecord
    from tuner.core.server import Flavor

    d = sbx.sandboxes_dir() / "rec"
    d.mkdir(parents=True)
    rec = SandboxRecord(name="rec", dir=str(d), datadir=str(d / "data"), port=1, socket=str(d / "s.sock"),
                        mysqld="/usr/sbin/mariadbd", install_db=None, flavor=Flavor.MARIADB, version="10.11.6",
                        version_string="x", page_size=16384, options={"a": "1"})
    rec.save()
    sb = sbx.Sandbox.load("rec")
    assert isinstance(sb, sbx.Sandbox) and sb.to_dict() == rec.to_dict()
    assert [s.name for s in sbx.list_sandboxes()] == ["rec"]
    assert sb.state() == sbx.SandboxState.STOPPED and sb.ping() is False
