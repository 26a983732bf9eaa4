"""Persistence for volatile tiers: consistent copies in generations, all-or-nothing restore, systemd units.

A datadir (or redo, undo, ibdata) on tmpfs or zram is gone after a power loss or a reboot.  A plain rsync of
the live files is not a consistent copy (pages and redo change while they are read), so a sync is always an
online backup (``sync``: mariadb-backup, xtrabackup or CLONE LOCAL) or an offline copy of a server with no
process left (``server_process``).

Modules, by what they hold:

    config          persist.json: tier, backing, interval, how to reach and recognise the server
    locations       where the server keeps its InnoDB files, re-read at every sync and restore
    server_process  running / stopped / crashed, by the server's process (pid file, unit MainPID)
    generations     the generations on disk: seal, flip, prune, the ``current.json`` pointer
    sync            one consistent copy into a new generation; the sync at shutdown
    clone_staging   where the server's user writes a CLONE, and root's take-over of it (no link followed)
    confinement     the AppArmor rule for that staging directory (install adds it, uninstall removes it)
    missed_sync     the record of a sync at shutdown that did not happen (restore refuses a silent loss)
    restore         all locations from one generation, staged, checked, swapped
    status          the last copy's age and the RPO
    units           the systemd units, rendered and verified

Layout of the backing directory (on persistent storage)::

    persist.json              what is persisted: server, tier, locations as last seen, interval (install, sync)
    client.cnf                0600 [client] credentials for mariadb-backup (system servers; never argv)
    generations/<id>/data/    one consistent copy, prepared (a datadir mariadb-backup layout)
    generations/<id>/manifest.json, COMPLETE
    clone-staging/<id>/       a CLONE being written by the server's user (mode 0700, its own; empty between syncs)
    current.json              the pointer: which generation is the last complete one (atomic flip)
    sync-failed.json          the sync at the last shutdown did not happen (see missed_sync)

Recovery point: a power loss loses what was committed after the last complete sync's copy was taken.  With a
timer every ``interval`` and syncs taking ``d`` seconds, the worst case is ``interval + d``.
"""

from __future__ import annotations

from datadir_mover.persist.config import (PersistConfig, configure, load_config, parse_interval,
                                          require_tier_mounted, save_config)
from datadir_mover.persist.generations import OFFLINE_METHOD, Generation, current
from datadir_mover.persist.locations import Locations
from datadir_mover.persist.restore import restore, restore_needed
from datadir_mover.persist.server_process import ServerState
from datadir_mover.persist.server_process import state as server_state
from datadir_mover.persist.status import status
from datadir_mover.persist.sync import sync, sync_at_shutdown
from datadir_mover.persist.units import (disable_commands, enable_commands, innotier_exe, install_units, remove_units,
                                         render_units, unit_slug, verify_units)

__all__ = ["OFFLINE_METHOD", "Generation", "Locations", "PersistConfig", "ServerState", "configure", "current",
           "disable_commands", "enable_commands", "innotier_exe", "install_units", "load_config", "parse_interval", "remove_units", "render_units",
           "require_tier_mounted", "restore", "restore_needed", "save_config", "server_state", "status", "sync",
           "sync_at_shutdown", "unit_slug", "verify_units"]
