"""A new sandbox's datadir: initialized by mariadb-install-db, ``mysqld --initialize-insecure`` or, for a
MariaDB tree, the install script's SQL fed to ``mariadbd --bootstrap``; then, on the first start, root's
random password, kept only in the 0600 client.cnf."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from tuner.core.durable import write_atomic
from tuner.core.errors import SandboxError
from tuner.core.sandbox.binaries import ServerBinaries
from tuner.core.sandbox.record import SandboxRecord
from tuner.core.server import ConnectionSpec, Flavor

# What mariadb-install-db feeds to `mariadbd --bootstrap`, in its order (root gets a normal password account).
MARIADB_BOOTSTRAP_SQL = ("mariadb_system_tables.sql", "mariadb_performance_tables.sql",
                         "mariadb_system_tables_data.sql", "fill_help_tables.sql",
                         "maria_add_gis_sp_bootstrap.sql", "mariadb_sys_schema.sql")


def initialize(sb: SandboxRecord, bins: ServerBinaries) -> None:
    stdin = None
    if bins.flavor == Flavor.MARIADB and bins.server and not bins.install_db:
        cmd, stdin = _mariadb_tree_bootstrap(sb, bins)
    elif bins.flavor == Flavor.MARIADB:
        cmd = [bins.install_db, f"--defaults-file={sb.cnf}", "--auth-root-authentication-method=normal",
               "--skip-test-db"]
        if bins.basedir:
            cmd.append(f"--basedir={bins.basedir}")
        if os.geteuid() == 0:
            cmd.append("--user=root")
    else:
        cmd = sb.launcher() + [bins.mysqld, f"--defaults-file={sb.cnf}", "--initialize-insecure"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, input=stdin)
    if out.returncode != 0:
        raise SandboxError(f"initializing the datadir of sandbox {sb.name} failed: {_failure_line(out)}; "
                           f"check the options given with --option")
    if stdin is not None:
        write_atomic(Path(sb.datadir) / "mariadb_upgrade_info", f"{bins.version}-MariaDB")


def _failure_line(out: subprocess.CompletedProcess) -> str:
    """The last line that says error, else the last line of output."""
    detail = [ln for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln or "error" in ln]
    if detail:
        return detail[-1].strip()
    last = (out.stderr or out.stdout).strip().splitlines()[-1:]
    return last[0].strip() if last else "?"


def _mariadb_tree_bootstrap(sb: SandboxRecord, bins: ServerBinaries) -> tuple[list[str], str]:
    """mariadb-install-db's work for a tree's server: its shell script cannot run the tree's helper binaries
    (they need the tree's loader), so its SQL goes to `mariadbd --bootstrap` directly, as the script does."""
    srv = sb.installed_server()
    share = srv.root / srv.dist.share_dir
    missing = [f for f in MARIADB_BOOTSTRAP_SQL if not (share / f).is_file()]
    if missing:
        raise SandboxError(f"server {srv.dist.name} lacks {', '.join(missing)} in {share}; reinstall it")
    sql = "create database if not exists mysql;\nuse mysql;\nSET @auth_root_socket=NULL;\n"
    sql += "".join((share / f).read_text() for f in MARIADB_BOOTSTRAP_SQL)
    cmd = sb.launcher() + [bins.mysqld, f"--defaults-file={sb.cnf}", "--bootstrap", "--log-warnings=0",
                           "--enforce-storage-engine=", "--max_allowed_packet=8M", "--net_buffer_length=16K"]
    return cmd, sql


def set_root_password(sb: SandboxRecord) -> None:
    """First start: give root a random password, stored only in the 0600 client.cnf."""
    password = secrets.token_urlsafe(18)
    conn = ConnectionSpec(socket=sb.socket, user="root").connect()
    cur = conn.cursor()
    cur.execute("ALTER USER 'root'@'localhost' IDENTIFIED BY %s", (password,))
    cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY %s", (password,))
    cur.execute("ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY %s", (password,))
    cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
    conn.close()
    write_atomic(sb.client_cnf, f"[client]\nuser=root\npassword={password}\nsocket={sb.socket}\n", mode=0o600)
    sb.needs_bootstrap = False
    sb.save()
