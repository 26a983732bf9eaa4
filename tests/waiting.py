"""Waiting on a condition with a deadline: the one way tests synchronise with real processes.

A bare sleep either wastes time or, on a busy machine, is too short; a loop without a deadline can hang CI.
`wait_for` polls a condition until it holds or the deadline passes, and then fails naming what it waited for.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline (an AssertionError, so pytest reports it as a failure)."""


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Return the first truthy value of condition(); raise WaitTimeout after `timeout` seconds.

    `what` names the awaited state in the failure message ("the exporter serves tpmC").
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"waited {timeout:g} s for {what}; it did not happen")
        time.sleep(interval)
