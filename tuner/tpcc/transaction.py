"""One TPC-C transaction run to its end inside a terminal: attempts, deadlock retries, the recorded outcome."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from tuner.tpcc import delivery, new_order, order_status, payment, stock_level
from tuner.tpcc.session import Rollback, Session, classify

MODULES = {m.OP: m for m in (new_order, payment, order_status, delivery, stock_level)}
MAX_RETRIES = 100  # retries of one transaction (deadlock / lock-wait timeout) before it counts as an error


def describe(exc: BaseException) -> str:
    errno = getattr(exc, "errno", None)
    msg = getattr(exc, "msg", None) or str(exc)
    return f"{errno} {msg}" if errno else msg


def execute(session: Session, mod, x, procedures: bool):
    """One attempt of one transaction; returns its output: the statements' tuple, or None for a procedure whose
    result set is not needed; Delivery: the districts it skipped (clause 2.7.4.2), in both modes."""
    if procedures:
        if mod is delivery:
            return delivery.call(session, x)
        return session.call(mod.call_sql(x))
    return mod.run_statements(session, x)


def _attempt(session: Session, mod, x, procedures: bool) -> tuple[str, str | None, Any]:
    """One attempt: (commit | rollback | retry | error | lost, error message or None, output when committed)."""
    try:
        return "commit", None, execute(session, mod, x, procedures)
    except Rollback:
        return "rollback", None, None
    except Exception as exc:  # classified here; nothing is swallowed
        outcome = classify(exc)
        message = None if outcome == "rollback" else describe(exc)
        if outcome != "lost" and not procedures:
            try:
                session.rollback()
            except Exception:  # the connection may be broken; the next statement will tell
                pass
        return outcome, message, None


def run_transaction(session: Session, mod, x, procedures: bool, max_retries: int,
                    record: Callable[[str, float, str], None], stop: threading.Event | None = None,
                    on_commit: Callable[[str, Any], None] | None = None) -> tuple[str, str | None]:
    """Run one transaction to its end and record it; return (outcome, error message or None).

    Outcomes: commit, rollback (New-Order's unused item), error, or lost (the
    connection is gone; recorded as an error).  A deadlock or lock-wait timeout
    is retried with the same input up to ``max_retries`` times, each retry counted
    as it happens; when they run out the transaction is an error.  The latency
    recorded for the final outcome runs from the first attempt.  ``on_commit(op, output)`` gets a
    committed transaction's output (``execute``), after it is recorded.
    """
    op = mod.OP
    perf = time.perf_counter
    t0 = perf()
    retries = 0
    while True:
        outcome, message, output = _attempt(session, mod, x, procedures)
        if outcome == "lost":
            record(op, perf() - t0, "error")
            return "lost", message
        if outcome != "retry":
            record(op, perf() - t0, outcome)
            if outcome == "commit" and on_commit is not None:
                on_commit(op, output)
            return outcome, message
        if retries >= max_retries:
            record(op, perf() - t0, "error")
            return "error", f"retries exhausted ({retries}): {message}"
        retries += 1
        record(op, 0.0, "retry")
        if stop is not None and stop.is_set():
            return "abandoned", None  # the run ended while this one was being retried (after the window)
