"""The options that follow a moved datadir: what the server keeps in it by an absolute path.

A path relative to the datadir follows it by itself.  An absolute one inside the old datadir does not: after the
start on the target the server would go on writing there (a binary log, Aria's log, the slow log ...), which makes
the source look changed or grown to the proof and to finalize's source check (a move failed for nothing, and the
operator sent to rollback), and after finalize the server writes into a directory the DBA believes retired.  So a
datadir move writes each such option's new value into the placement drop-in beside ``datadir`` (the plan's
``also_options``): journaled with the plan, undone by rollback (the drop-in's text before) and by the way home
(``homecoming``: the options a finalized move added leave the drop-in again).

Per option, what the server does with the path and so what a move does:

- InnoDB's own directories (``innodb_data_home_dir``, ``innodb_log_group_home_dir``, ``innodb_undo_directory``,
  ``innodb_doublewrite_dir``, MySQL's ``innodb_temp_tablespaces_dir``) and the files the server writes while it
  runs (``log_bin``, ``log_bin_index``, ``relay_log``, ``relay_log_index``, ``master_info_file``,
  ``relay_log_info_file``, MariaDB's ``aria_log_dir_path``, ``log_tc``, ``log_error``, ``slow_query_log_file``,
  ``general_log_file``, ``pid_file``): follow.  Their files are in the datadir, so they were copied with it.
- ``secure_file_priv``: follows.  The server only reads and writes there on demand, but it checks the directory at
  every start: left pointing into the old datadir, the first restart after finalize would fail.
- ``relay_log`` on MySQL while a replication channel's applier position names a relay log by an absolute path
  inside the datadir: refused at planning, in one line.  MySQL keeps that position in a table
  (``mysql.slave_relay_log_info``), which the move cannot rename as it renames the index files, so the replica
  would read and purge the old datadir's relay logs.  The fix: ``RESET REPLICA`` once the applier caught up (with
  GTID auto-positioning nothing is lost), or a relay log name relative to the datadir.  MariaDB keeps it in
  ``relay-log.info``, a file ``log_indexes`` renames.
- ``socket``: stays, said in one line.  Clients (and the mover, which reconnects after the start) find the server
  by that name; a ``.sock`` in the datadir is neither copied nor compared, and finalize leaves the directory
  holding it.
- ``innodb_temp_data_file_path`` (``ibtmp1:12M:autoextend``): stays.  Its path is relative to
  ``innodb_data_home_dir``, which follows; ``ibtmp*`` is neither copied nor compared.

Which value the server was *given* is read from its option files (the sandbox's my.cnf and conf.d, a system server's
option files), not from SHOW VARIABLES: the server resolves ``log_bin = binlog`` to ``/var/lib/mysql/binlog``
itself, and only a value given absolute needs a line of its own.  An option the server's variables show outside
the old datadir is left alone.

The binary and relay log indexes then name their files by absolute names in the old datadir: ``log_indexes``
renames those in the target's copy before the start.
"""

from __future__ import annotations

import os

from tuner.core import system_server
from tuner.core.errors import MoveError
from tuner.core.sandbox.config import effective_options
from tuner.core.server import ConnectionSpec, Flavor, ServerModel

# option as given in an option file -> the server variable that shows where it resolved (None: the option's own)
FOLLOW = {
    "innodb_data_home_dir": None, "innodb_log_group_home_dir": None, "innodb_undo_directory": None,
    "innodb_doublewrite_dir": None, "innodb_temp_tablespaces_dir": None,
    "log_bin": "log_bin_basename", "log_bin_index": None, "relay_log": "relay_log_basename",
    "relay_log_index": None, "master_info_file": None, "relay_log_info_file": None,
    "aria_log_dir_path": None, "log_tc": None,
    "log_error": None, "slow_query_log_file": None, "general_log_file": None, "pid_file": None,
    "secure_file_priv": None,
}
# SHOW VARIABLES shows these as they were given (empty or ``./`` when unset), so they are read from there
INNODB_DIRS = ("innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory", "innodb_doublewrite_dir")


def configured_options(control, etc_root: str = "/") -> dict[str, str]:
    """The [mysqld] options the server was started with, as its option files give them ({} when unreadable)."""
    sandbox = getattr(control, "sandbox", None)
    if control.kind == "sandbox" and sandbox is not None:
        return effective_options(sandbox())
    return dict(system_server.option_files(etc_root).options)


def inside(path: str, directory: str) -> bool:
    real, top = os.path.normpath(path), os.path.normpath(directory)
    return real == top or real.startswith(top + os.sep)


def _rerooted(path: str, source: str, target: str) -> str:
    moved = os.path.join(target, os.path.relpath(os.path.normpath(path), os.path.normpath(source)))
    moved = os.path.normpath(moved)
    return moved + "/" if path.endswith("/") and moved != "/" else moved


def follow(model: ServerModel, configured: dict[str, str], source: str, target: str) -> dict[str, str]:
    """option -> its new value, for each option given an absolute path inside ``source`` (the old datadir)."""
    out = {}
    for var in INNODB_DIRS:  # SHOW VARIABLES gives these as configured
        v = (model.variables.get(var) or "").strip()
        if os.path.isabs(v) and inside(v, source):
            out[var] = _rerooted(v, source, target).rstrip("/") or target
    for option, shown in FOLLOW.items():
        if option in out:
            continue
        given = (configured.get(option) or "").strip()
        if not os.path.isabs(given) or not inside(given, source):
            continue
        now = (model.variables.get(shown or option) or "").strip()
        if option == "log_bin" and model.variables.get("log_bin", "ON").upper() == "OFF":
            continue  # given but switched off later (skip-log-bin): a line of ours would switch it on
        if now and os.path.isabs(now) and not inside(now, source):
            continue  # the server resolved it elsewhere (a later file or argument): not ours to change
        out[option] = _rerooted(given, source, target)
    return out


def notes(model: ServerModel, configured: dict[str, str], followed: dict[str, str], source: str) -> list[str]:
    """One line per follower (old -> new), and for a socket left in the datadir."""
    lines = [f"{k} = {configured.get(k) or model.variables.get(k)} -> {v} (an absolute path inside the datadir: "
             "follows it)" for k, v in sorted(followed.items())]
    sock = (model.variables.get("socket") or model.socket or "").strip()
    if os.path.isabs(sock) and inside(sock, source):
        lines.append(f"socket = {sock} stays (clients find the server by it); finalize leaves {os.path.dirname(sock)} "
                     "holding it: set socket outside the datadir to retire the directory whole")
    return lines


def check_replica_position(spec: ConnectionSpec, model: ServerModel, configured: dict[str, str], source: str) -> None:
    """Refuse (MySQL) when an applier position names a relay log by an absolute path inside ``source``."""
    given = (configured.get("relay_log") or "").strip()
    if model.flavor == Flavor.MARIADB or not (os.path.isabs(given) and inside(given, source)):
        return
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT Channel_name, Relay_log_name FROM mysql.slave_relay_log_info")
        rows = [(str(ch), str(name)) for ch, name in cur.fetchall()]
    finally:
        conn.close()
    named = [f"channel '{ch}' at {name}" for ch, name in rows if os.path.isabs(name) and inside(name, source)]
    if named:
        raise MoveError(f"relay_log = {given} is inside the datadir and the replica's applier position names its "
                        f"relay logs there ({'; '.join(named)}, kept in mysql.slave_relay_log_info, which a move "
                        "cannot rename): a replica started on the target would read and purge them in the old datadir; "
                        "let the applier catch up, run STOP REPLICA and RESET REPLICA (with GTID auto-positioning "
                        "nothing is lost), then plan the move again")
