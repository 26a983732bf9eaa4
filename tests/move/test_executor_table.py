"""The executor's dispatch: every journal state has a handler in ``HANDLERS``, and only those states do; each
handler is a function of the step's module taking the move context, the read lock and the pass cache."""

from __future__ import annotations

import inspect

from datadir_mover.move.executor import HANDLERS
from datadir_mover.move.journal import STATES


def test_every_state_has_a_handler_and_no_handler_lacks_a_state():
    assert list(HANDLERS) == list(STATES)
    for state, handler in HANDLERS.items():
        assert inspect.isfunction(handler) and handler.__name__ == f"step_{state.lower()}", state
        assert list(inspect.signature(handler).parameters) == ["ctx", "lock", "cache"], state
