"""The server's flush settings through a move: saved before the pre-flush lowers them, put back after.

``preflush`` flushes the dirty pages with the settings lowered; this module keeps the move's
promise around it.  The server's own settings are saved in the journal directory
(``side_files.FLUSH_SETTINGS``) before they change, so a resumed SHUTDOWN (or a rollback)
restores those and not an earlier run's zeros.  Used by PRECOPY, SHUTDOWN and ROLLBACK.
"""

from __future__ import annotations

from typing import Any, Callable

from tuner.core.sandbox import SandboxState

from datadir_mover.move import preflush, side_files
from datadir_mover.move.journal import Journal
from datadir_mover.move.plan import Plan


def saved(journal: Journal) -> dict[str, str] | None:
    """The server's own settings as saved before a pre-flush changed them (None: none changed them)."""
    return journal.load_json(side_files.FLUSH_SETTINGS)


def flush_saving_settings(plan: Plan, journal: Journal, control, echo: Callable[[str], None],
                          data: dict[str, Any], limit_s: float = preflush.LIMIT_S) -> dict[str, str] | None:
    """Flush dirty pages at full speed while the server serves (``preflush``), its settings saved first; what
    it did goes into ``data["preflush"]``.  Returns the settings to put back (None: nothing was changed)."""
    spec = plan.connection_spec()
    settings = saved(journal)
    try:
        if settings is None:
            conn = spec.with_database(None).connect(connection_timeout=5)
            try:
                settings = preflush.read_settings(conn)
            finally:
                conn.close()
            journal.save_json(side_files.FLUSH_SETTINGS, settings)
        result = preflush.flush(spec, int(plan.server["page_size"]), limit_s, echo=echo)
    except Exception as exc:  # noqa: BLE001 - the flush only saves shutdown time: without it the stop flushes
        data["preflush"] = {"skipped": str(exc)}
        if settings is not None:
            put_back(plan, control, echo, settings)
        return settings
    data["preflush"] = result.to_dict()
    return settings


def put_back(plan: Plan, control, echo: Callable[[str], None], settings: dict[str, str] | None) -> bool | None:
    """Put the flush settings back (None: nothing to restore); a failure is said, not swallowed."""
    if settings is None:
        return None
    ok = preflush.restore(plan.connection_spec(), settings)
    if not ok and control.state() == SandboxState.RUNNING:
        echo(f"could not put the flush settings back on {control.describe()}; set them by hand: "
             + ", ".join(f"SET GLOBAL {k} = {v}" for k, v in settings.items()))
    return ok
