"""Sandbox servers: private mariadbd/mysqld instances with their own datadir, socket, port, option file and log.

Layout of a sandbox (``$INNOTIER_HOME/sandboxes/NAME``)::

    sandbox.json    what the sandbox is (written durably)
    my.cnf          generated core options (paths, port, page size), ends with !includedir conf.d
    conf.d/         drop-ins: a profile (40-innotier-profile.cnf), placements (50-innotier-placement.cnf)
    client.cnf      0600 [client] file with the sandbox's generated root password
    data/           the datadir (unless --datadir)
    tmp/            tmpdir
    mysqld.sock, mysqld.pid, error.log

The package is split the way Patroni splits its postmaster:

    binaries   which server binaries to run (host, --basedir, an installed tree)
    process    the server process as /proc and the network see it (pid checks, liveness, ports)
    record     what a sandbox is: sandbox.json and the paths of its files
    config     my.cnf, the options the server will read, connection specs
    bootstrap  initializing a datadir, root's password on the first start
    lifecycle  ``Sandbox``: start, stop, state, ping, status, destroy
    provision  ``create`` and ``adopt``

Import from ``tuner.core.sandbox``; the names below are its interface.
"""

from tuner.core.paths import sandboxes_dir
from tuner.core.sandbox.binaries import ServerBinaries, binaries_for_server, find_binaries
from tuner.core.sandbox.bootstrap import MARIADB_BOOTSTRAP_SQL
from tuner.core.sandbox.lifecycle import (DESTROY_CLOSERS, STOP_MODES, Sandbox, SandboxState, list_sandboxes,
                                          on_destroy)
from tuner.core.sandbox.process import port_in_use, proc_state, proc_threads
from tuner.core.sandbox.provision import SOCKET_PATH_MAX, adopt, binaries_of, create, free_port
from tuner.core.sandbox.record import NAME_RE, validate_name
from tuner.core.units import page_size_label, parse_page_size

__all__ = [
    "DESTROY_CLOSERS", "MARIADB_BOOTSTRAP_SQL", "NAME_RE", "SOCKET_PATH_MAX", "STOP_MODES", "Sandbox",
    "SandboxState", "ServerBinaries", "adopt", "binaries_for_server", "binaries_of", "create", "find_binaries",
    "free_port", "list_sandboxes", "on_destroy", "page_size_label", "parse_page_size", "port_in_use",
    "proc_state", "proc_threads", "sandboxes_dir", "validate_name",
]
