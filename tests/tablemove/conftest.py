"""Table-move tests: no TPC-C driver a test started outlives it (a failed assertion skips its `stop()`)."""

import pytest

from tmhelpers import Clients


@pytest.fixture(autouse=True)
def no_clients_left_running():
    yield
    for clients in list(Clients.RUNNING):
        clients.kill()
