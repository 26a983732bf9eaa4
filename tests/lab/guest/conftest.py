"""In-guest fixtures (the helpers are in labhelpers.py)."""

import pytest

from labhelpers import wipe_md


@pytest.fixture
def clean_md():
    wipe_md()
    yield
    wipe_md()
