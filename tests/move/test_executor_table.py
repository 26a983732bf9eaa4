"""The executor's dispatch: every journal state has a handler in ``HANDLERS``, and only those states do."""

from __future__ import annotations

from datadir_mover.move.executor import HANDLERS, Executor
from datadir_mover.move.journal import STATES


def test_every_state_has_a_handler_and_no_handler_lacks_a_state():
    assert list(HANDLERS) == list(STATES)
    for state, handler in HANDLERS.items():
        assert callable(handler) and getattr(Executor, handler.__name__) is handler, state
