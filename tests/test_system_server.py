"""The system server found where its package put it (tuner.core.system_server), not where packages used to.

Debian sid's MariaDB moved its socket to /run/mariadbd (and its datadir to /var/lib/mariadb, compiled in); the
option files of both sid packages and of trixie's MariaDB are recorded (tests/fixtures/recorded/distro-packages/option-files) and laid
out as a root tree.  The option-file reader is held against the real ``my_print_defaults``; the running-server
path reads a real sandbox server's /proc entries, seen once as it is (no server unit: not a system server) and
once copied with the cgroup of a packaged unit.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from datadir_mover.lab import packaged_host
from datadir_mover.move import control
from tuner.core import system_server
from tuner.core.errors import ServerError
from tuner.core.server import model_from_variables

MARIADB_SID = "sid-mariadb-server-11.8.9+ds-4"
MYSQL_SID = "sid-mysql-server-9.7.4-2"
MARIADB_TRIXIE = "trixie-mariadb-server-11.8.9+ds-0+deb13u1"


@pytest.fixture
def short_tmp():
    """A temporary directory with a short path: a unix socket's path must fit in 108 bytes."""
    d = Path(tempfile.mkdtemp(prefix="innotier-ss-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def package_tree(fixtures_dir: Path, dest: Path, name: str) -> Path:
    """The package's /etc/mysql under ``dest``, with the links its `links` file records."""
    src = fixtures_dir / "distro-packages" / "option-files" / name
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("links"))
    for line in (src / "links").read_text().splitlines():
        link, _, target = line.partition(" -> ")
        (dest / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, dest / link)
    return dest


def listen(path: Path) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen()
    return s


def test_sid_mariadbs_option_files_name_its_moved_socket_and_no_datadir(fixtures_dir, tmp_path):
    root = package_tree(fixtures_dir, tmp_path / "root", MARIADB_SID)
    read = system_server.option_files(str(root))
    conf, server_d = "/etc/mysql/conf.d", "/etc/mysql/mariadb.conf.d"
    assert read.files == ("/etc/mysql/my.cnf", f"{conf}/mysql.cnf", f"{conf}/mysqldump.cnf",
                          f"{server_d}/50-client.cnf", f"{server_d}/50-mariadb-clients.cnf",
                          f"{server_d}/50-mysqld_safe.cnf", f"{server_d}/50-server.cnf", f"{server_d}/60-galera.cnf")
    assert read.includedirs == (conf, server_d)
    assert read.options["socket"] == "/run/mariadbd/mysqld.sock" and read.origins["socket"] == "/etc/mysql/my.cnf"
    assert read.options["pid_file"] == "/run/mariadbd/mysqld.pid"
    assert "datadir" not in read.options            # a comment in 50-server.cnf: compiled in
    assert "nice" not in read.options and "quick" not in read.options   # [mysqld_safe], [mysqldump]: not the server's
    assert control.system_conf_dir(str(root)) == root / "etc/mysql/mariadb.conf.d"
    # the lab's image build initializes a datadir only where the package's postinst left none
    assert packaged_host.needs_initialize(root)
    (root / "var/lib/mariadb/mysql").mkdir(parents=True)
    assert not packaged_host.needs_initialize(root)


def test_trixies_mariadb_keeps_the_old_socket_and_datadir(fixtures_dir, tmp_path):
    """Debian 13's 11.8.9 is sid's server before the move to /run/mariadbd and /var/lib/mariadb: the same files,
    the socket and pid file under /run/mysqld, the datadir a comment (compiled in: /var/lib/mysql)."""
    root = package_tree(fixtures_dir, tmp_path / "root", MARIADB_TRIXIE)
    read = system_server.option_files(str(root))
    assert read.includedirs == ("/etc/mysql/conf.d", "/etc/mysql/mariadb.conf.d")
    assert read.options["socket"] == "/run/mysqld/mysqld.sock" and read.origins["socket"] == "/etc/mysql/my.cnf"
    assert read.options["pid_file"] == "/run/mysqld/mysqld.pid" and "datadir" not in read.options
    assert "log_error" not in read.options   # the server's errors go to the unit's journal
    assert control.system_conf_dir(str(root)) == root / "etc/mysql/mariadb.conf.d"
    assert packaged_host.package_datadirs(root) == packaged_host.PACKAGE_DATADIRS
    (root / "var/lib/mysql/mysql").mkdir(parents=True)
    assert not packaged_host.needs_initialize(root)


def test_sid_mysqls_option_files_set_neither_socket_nor_datadir(fixtures_dir, tmp_path):
    root = package_tree(fixtures_dir, tmp_path / "root", MYSQL_SID)
    read = system_server.option_files(str(root))
    assert read.includedirs == ("/etc/mysql/conf.d", "/etc/mysql/mysql.conf.d")
    assert "/etc/mysql/mysql.conf.d/mysqld.cnf" in read.files
    assert read.options["log_error"] == "/var/log/mysql/error.log" and read.options["user"] == "mysql"
    assert "socket" not in read.options and "datadir" not in read.options
    assert control.system_conf_dir(str(root)) == root / "etc/mysql/mysql.conf.d"


def test_the_reader_agrees_with_my_print_defaults(tmp_path):
    """Quotes, comments (with and without a blank), `loose-`, bare options, groups not the server's, !include,
    !includedir (its *.cnf only, in name order), the last value winning: as the real my_print_defaults reads it."""
    if not shutil.which("my_print_defaults"):
        pytest.fail("my_print_defaults is missing: bootstrap installs mariadb-client")
    d, extra = tmp_path / "conf.d", tmp_path / "extra.cnf"
    d.mkdir()
    (d / "20-b.cnf").write_text("[server]\nport = 3308\n")
    (d / "10-a.cnf").write_text("[mariadbd]\nsocket = /run/b/two.sock\n")
    (d / "README").write_text("[mysqld]\nport = 1\n")
    extra.write_text("[galera]\nwsrep_on = OFF\n")
    main = tmp_path / "my.cnf"
    main.write_text("[client]\nsocket = /tmp/client.sock\n"
                    "[client-server]\nsocket = /run/a/one.sock   # the shared socket\nport=3307\n"
                    "# a comment\n; another\n"
                    "[mysqld]\ndatadir = \"/srv/my data\"\nloose-innodb-buffer-pool-size = 256M\n"
                    "skip-name-resolve\ntmpdir=/var/tmp#no blank before this comment\n"
                    f"!includedir {d}\n!include {extra}\n[mysqld_safe]\nnice = 0\n")
    groups = system_server.SERVER_GROUPS
    r = subprocess.run(["my_print_defaults", f"--defaults-file={main}", *groups], capture_output=True, text=True,
                       check=True)
    theirs = {}
    for arg in r.stdout.splitlines():
        key, _, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        theirs[key[len("loose_"):] if key.startswith("loose_") else key] = value
    ours = system_server.option_files("/", files=(str(main),), groups=groups)
    assert ours.options == theirs
    assert ours.options["socket"] == "/run/b/two.sock" and ours.options["datadir"] == "/srv/my data"
    assert ours.files == (str(main), str(d / "10-a.cnf"), str(d / "20-b.cnf"), str(extra))


def test_the_socket_the_option_files_name_is_found_and_no_other(fixtures_dir, short_tmp):
    root = package_tree(fixtures_dir, short_tmp / "m", MARIADB_SID)
    no_processes = short_tmp / "proc"
    no_processes.mkdir()
    with pytest.raises(ServerError) as nothing:
        system_server.find_socket(str(root), str(no_processes))
    line = str(nothing.value)
    assert "\n" not in line and line.startswith("no system server found: no mariadbd or mysqld")
    assert "its option file /etc/mysql/my.cnf sets socket = /run/mariadbd/mysqld.sock, which is not there" in line
    assert line.endswith("name the server with --socket PATH (or --sandbox NAME, --host H --port N)")
    # where the package used to put it: another server's (a co-installed MySQL's), not this one's
    with listen(root / "run/mysqld/mysqld.sock"):
        with pytest.raises(ServerError, match="not there"):
            system_server.find_socket(str(root), str(no_processes))
    (root / "run/mariadbd").mkdir(parents=True)
    (root / "run/mariadbd/mysqld.sock").write_text("a plain file")   # not a socket: not found
    with pytest.raises(ServerError, match="not there"):
        system_server.find_socket(str(root), str(no_processes))
    (root / "run/mariadbd/mysqld.sock").unlink()
    with listen(root / "run/mariadbd/mysqld.sock"):
        found = system_server.find_socket(str(root), str(no_processes))
    assert found == system_server.FoundSocket(str(root / "run/mariadbd/mysqld.sock"),
                                              "socket = /run/mariadbd/mysqld.sock in /etc/mysql/my.cnf")


def test_a_package_that_sets_no_socket_is_found_at_the_known_ones(fixtures_dir, short_tmp):
    root = package_tree(fixtures_dir, short_tmp / "m", MYSQL_SID)
    no_processes = short_tmp / "proc"
    no_processes.mkdir()
    with pytest.raises(ServerError) as nothing:
        system_server.find_socket(str(root), str(no_processes))
    assert "set no socket" in str(nothing.value) and ", ".join(system_server.SOCKETS) in str(nothing.value)
    with listen(root / "run/mysqld/mysqld.sock"):
        found = system_server.find_socket(str(root), str(no_processes))
    assert found == system_server.FoundSocket(str(root / "run/mysqld/mysqld.sock"), "known")


def _copy_process(pid: int, dest: Path, cgroup: str, comm: str | None = None, x_socket: bool = False) -> None:
    """A process's /proc entries the finder reads (comm, fds, the unix table), its cgroup given; ``x_socket``: one
    more listening socket as MySQL's X Plugin has (/run/mysqld/mysqlx.sock)."""
    src = Path("/proc", str(pid))
    (dest / "fd").mkdir(parents=True)
    (dest / "net").mkdir()
    (dest / "comm").write_text(comm or (src / "comm").read_text())
    (dest / "cgroup").write_text(cgroup)
    (dest / "net" / "unix").write_text((src / "net" / "unix").read_text())
    for fd in (src / "fd").iterdir():
        try:
            os.symlink(os.readlink(fd), dest / "fd" / fd.name)
        except FileNotFoundError:   # closed meanwhile
            pass
    if x_socket:   # sorts before the sandbox's socket: left out by its name, not by its place
        with open(dest / "net" / "unix", "a") as f:
            f.write("0000000000000000: 00000002 00000000 00010000 0001 01 4294967295 /a/mysqlx.sock\n")
        os.symlink("socket:[4294967295]", dest / "fd" / "4095")


def test_the_running_units_socket_is_found_from_the_process_and_a_sandbox_is_not_a_system_server(shared_sandbox,
                                                                                                  tmp_path):
    pid = shared_sandbox.running_pid()
    assert system_server.listening_sockets(pid) == (shared_sandbox.socket,)
    # as it runs here, in no server unit: not taken for the system server
    assert pid not in [s.pid for s in system_server.running_servers()]
    proc, empty = tmp_path / "proc", tmp_path / "root"
    empty.mkdir()
    # the same process where a lab's or CI's unit started it: still no server unit
    _copy_process(pid, proc / str(pid), "0::/system.slice/innotier-lab.service\n")
    assert system_server.running_servers(str(proc)) == []
    shutil.rmtree(proc)
    # where systemd runs it as the package's unit: found, its socket taken from the process
    _copy_process(pid, proc / str(pid), "0::/system.slice/mariadb.service\n", x_socket=True)
    assert system_server.listening_sockets(pid, str(proc)) == ("/a/mysqlx.sock", shared_sandbox.socket)
    found = system_server.find_socket(str(empty), str(proc))
    assert found == system_server.FoundSocket(shared_sandbox.socket, f"mariadb.service (pid {pid})")
    # a process of another name in that unit (a pre-start script) is not the server
    _copy_process(pid, proc / "4000000", "0::/system.slice/mysql.service\n", comm="sh\n")
    assert system_server.find_socket(str(empty), str(proc)) == found
    # two system servers: refused, the caller names one
    _copy_process(pid, proc / "4000001", "0::/system.slice/mysql.service\n")
    with pytest.raises(ServerError) as two:
        system_server.find_socket(str(empty), str(proc))
    assert str(two.value).startswith("several system servers run (") and "mysql.service: " in str(two.value)
    assert f"mariadb.service: {shared_sandbox.socket}" in str(two.value)
    assert str(two.value).endswith("name one with --socket PATH")


def test_move_plan_without_a_server_named_says_what_it_tried(cli, tmp_path):
    try:
        found = system_server.find_socket()
    except ServerError:
        found = None
    if found is not None:
        pytest.skip(f"a system server runs here ({found.socket}): the refusal needs a host without one")
    target = tmp_path / "new"
    proc = cli("move", "plan", "datadir", "--to", str(target))
    assert proc.returncode == ServerError.exit_code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("innotier: no system server found: "), proc.stderr
    assert "/etc/mysql/my.cnf" in lines[0] and "--socket PATH" in lines[0]
    assert not target.exists()


def test_a_model_without_a_datadir_is_refused_not_guessed():
    with pytest.raises(ServerError, match="name no datadir"):
        model_from_variables({"version": "11.8.9-MariaDB-4"})
