"""Waiting for the server the mover starts: until it accepts connections, or for one a killed mover started
that is still initializing (instead of starting it twice).  Used by START and ROLLBACK."""

from __future__ import annotations

import time

from tuner.core.errors import InnotierError, MoveError
from tuner.core.sandbox import SandboxState, port_in_use

from datadir_mover.move.stepbase import MoveContext, MoveHalted


def wait_for_starting_server(ctx: MoveContext, timeout: float = 120.0) -> bool:
    """True: a server another (killed) mover started is up now; False: nothing is starting, start it."""
    if ctx.plan.control["kind"] != "sandbox":
        return False
    sb = ctx.control.sandbox()
    deadline = time.monotonic() + timeout
    while port_in_use(sb.port) or sb.running_pid():
        if ctx.control.state() == SandboxState.RUNNING and sb._ping():
            return True
        if time.monotonic() > deadline:
            raise MoveHalted(f"port {sb.port} of {ctx.control.describe()} is busy but the server does not answer; "
                             "check it and run `innotier move resume` again")
        time.sleep(0.2)
    return False


def wait_accepting(ctx: MoveContext, timeout: float = 120.0) -> None:
    spec = ctx.plan.connection_spec()
    deadline = time.monotonic() + timeout
    while True:
        try:
            spec.with_database(None).connect(connection_timeout=2).close()
            return
        except InnotierError:
            if time.monotonic() > deadline:
                raise MoveError(f"{ctx.control.describe()} does not accept connections after start; see its "
                                "error log") from None
            time.sleep(0.2)
