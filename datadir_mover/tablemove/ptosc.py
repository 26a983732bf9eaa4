"""pt-online-schema-change as the copier for MariaDB: fill a shadow table, leave the swap to innotier.

Run as ``--alter ENGINE=InnoDB`` (a rebuild that changes nothing but where the file is) with
``--no-swap-tables --no-drop-new-table --no-drop-triggers``: the tool creates the shadow (named by
``--new-table-name``, unique to the move), copies the
rows in chunks and keeps it in step through triggers on the original, then stops.  innotier proves the two
equal and swaps them with its own atomic RENAME (``steps.py``).

Where the new table goes, in percona-toolkit 3.2.1 (read from its source, checked with ``--print --dry-run``):
- ``--data-dir DIR`` appends ``DATA DIRECTORY = 'DIR'`` to the shadow's CREATE TABLE *only when*
  ``--remove-data-dir`` is not on the command line: the code tests whether the option was given, so the
  default TRUE that ``--help`` lists is never read (and ``--no-remove-data-dir`` is refused as an unknown
  option).  The way in passes ``--data-dir`` alone.
- the shadow's CREATE TABLE is the original's SHOW CREATE TABLE, so a table on a tier keeps its ``DATA
  DIRECTORY`` through a plain run: the way home must pass ``--remove-data-dir``, which strips it.
Credentials go in a 0600 defaults file, never in argv.

The triggers are created under ``LOCK TABLES t WRITE, shadow WRITE`` (a ``--plugin``, ``PLUGIN``): created
on a busy table in MariaDB 10.11, they failed concurrent client statements with ``1146 Table '<shadow>'
doesn't exist`` within half a second, though the shadow existed (by hand, without the tool: 3 and 8 failed
transactions in 12 and 8 create-and-drop cycles under TPC-C; with the lock, 0).  The lock waits for the
clients' statements and holds them for the three CREATE TRIGGERs; each then reopens the table whole.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tuner.core.durable import write_atomic
from tuner.core.errors import MoveError, ToolMissing

TOOL = "pt-online-schema-change"
# Every DDL statement on the live table waits at most this long (seconds: lock_wait_timeout is whole seconds)
# for its exclusive metadata lock, then gives up and is retried: while it waits, every new client statement on
# the table waits behind it, so the wait is the stall clients see
DDL_LOCK_WAIT_S = 1
# How often and how long the plugin tries for the table lock before it gives the run up (a busy table's
# clients hold it between their statements; each try waits lock_wait_timeout = DDL_LOCK_WAIT_S)
LOCK_TRIES, LOCK_PAUSE_S = 60, 0.5
PLUGIN = r"""package pt_online_schema_change_plugin;
# written by innotier (datadir_mover/tablemove/ptosc.py): the triggers are created under LOCK TABLES
use strict;
sub new { my ($class, %args) = @_; return bless { %args }, $class; }
sub init { my ($self, %args) = @_; $self->{orig} = $args{orig_tbl}->{name}; }
sub after_alter_new_table { my ($self, %args) = @_; $self->{new} = $args{new_tbl}->{name}; }
sub before_create_triggers {
   my ($self) = @_;
   my $dbh = $self->{cxn}->dbh();
   for my $try (1 .. @TRIES@) {
      return if eval { $dbh->do("LOCK TABLES $self->{orig} WRITE, $self->{new} WRITE") or die $dbh->errstr; 1 };
      die "innotier: LOCK TABLES $self->{orig} WRITE: $@" unless $@ =~ /Lock wait timeout/;
      select(undef, undef, undef, @PAUSE@);
   }
   die "innotier: LOCK TABLES $self->{orig} WRITE: no lock in @TRIES@ tries\n";
}
sub after_create_triggers { my ($self) = @_; $self->{cxn}->dbh()->do("UNLOCK TABLES"); }
1;
""".replace("@TRIES@", str(LOCK_TRIES)).replace("@PAUSE@", str(LOCK_PAUSE_S))
CREATED = re.compile(r"Created new table (?P<db>[^.\s]+)\.(?P<table>\S+) OK\.")
TIMEOUT_S = 6 * 3600
# Each chunk's LOCK IN SHARE MODE holds the rows a client may be waiting to update, so a shorter chunk is a shorter
# wait (the copy takes a little longer); 0.02 s against the tool's 0.5 s (docs/table-moves.md, Figures)
CHUNK_S = 0.02


@dataclass(frozen=True)
class CopyResult:
    new_table: str
    seconds: float
    output_tail: list[str]


def tool() -> str:
    exe = shutil.which(TOOL)
    if not exe:
        raise ToolMissing(f"{TOOL} not found; install percona-toolkit (apt-get install percona-toolkit)")
    return exe


def argv(defaults_file: str, schema: str, table: str, data_dir: str | None, shadow: str,
         plugin: str | None = None, pause_s: float = 0.0) -> list[str]:
    """The command line: ``data_dir`` None moves the table home (the datadir); ``shadow`` the copy's name;
    ``plugin`` the file ``PLUGIN`` was written to; ``pause_s`` a pause after each chunk (its redo spread out)."""
    where = ["--data-dir", data_dir] if data_dir else ["--remove-data-dir"]
    return [tool(), f"--defaults-file={defaults_file}", "--alter", "ENGINE=InnoDB", *where,
            *(["--plugin", plugin] if plugin else []),
            f"--new-table-name={shadow}",
            "--no-swap-tables", "--no-drop-new-table", "--no-drop-triggers", "--no-drop-old-table",
            "--recursion-method=none", "--no-check-replication-filters", "--tries", "create_triggers:60:0.5,copy_rows:20:0.5",
            # its trigger DDL waits at most DDL_LOCK_WAIT_S for the metadata lock, then retries
            "--set-vars", f"innodb_lock_wait_timeout=1,lock_wait_timeout={DDL_LOCK_WAIT_S}",
            "--chunk-time", f"{CHUNK_S:g}", *(["--sleep", f"{pause_s:g}"] if pause_s else []),
            "--print", "--execute", f"D={schema},t={table}"]


def run(defaults_file: str, schema: str, table: str, data_dir: str | None, shadow: str, log: Path,
        echo=lambda m: None, pause_s: float = 0.0) -> CopyResult:
    """Run the tool; its whole output goes to ``log`` (0600: no credentials are in it, they are in the
    defaults file) so a failure can be read after the fact."""
    plugin = log.with_name("pt-osc-plugin.pl")
    write_atomic(plugin, PLUGIN, mode=0o600)
    cmd = argv(defaults_file, schema, table, data_dir, shadow, str(plugin), pause_s)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    write_atomic(log, proc.stdout + proc.stderr, mode=0o600)
    out = (proc.stdout + proc.stderr).splitlines()
    if proc.returncode != 0:
        last = next((ln.strip() for ln in reversed(out) if ln.strip()), "no output")
        raise MoveError(f"{TOOL} failed on {schema}.{table} (exit {proc.returncode}): {last} (all of it in {log}); "
                        "the table was not swapped: `innotier table-move resume` runs it again, `innotier "
                        "table-move back` removes what it left")
    m = next((CREATED.search(ln) for ln in out if CREATED.search(ln)), None)
    if m is None:
        raise MoveError(f"{TOOL} did not say which shadow table it created for {schema}.{table}; its output ends "
                        f"with {out[-1] if out else 'nothing'!r}")
    new = m.group("table").strip("`")
    if new != shadow:
        raise MoveError(f"{TOOL} created {schema}.{new}, not {shadow} as asked; drop it and its triggers (`innotier "
                        "table-move back`) and check the tool's version (percona-toolkit 3.2.1 is known to work)")
    echo(f"{TOOL} filled {schema}.{new} in {time.monotonic() - t0:.1f} s")
    return CopyResult(new, time.monotonic() - t0, out[-8:])


def trigger_names(schema: str, table: str) -> tuple[str, ...]:
    """The triggers pt-online-schema-change puts on the original (pt_osc_<db>_<table>_ins/upd/del)."""
    return tuple(f"pt_osc_{schema}_{table}_{op}" for op in ("ins", "upd", "del"))
