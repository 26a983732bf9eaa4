"""In-guest fixtures (the helpers are in labhelpers.py)."""

import os
from pathlib import Path

import pytest

from datadir_mover.lab.image import GUEST_HOME
from labhelpers import wipe_md

IMAGE_HOME = Path(GUEST_HOME)   # INNOTIER_HOME when the image was built: the golden copy is there


@pytest.fixture(scope="session", autouse=True)
def image_golden(innotier_home):
    """The session's private INNOTIER_HOME sees the golden datadir the image carries (loaded at build time),
    so the moves and the sweep (a subprocess with the same INNOTIER_HOME) clone it instead of loading one."""
    if (IMAGE_HOME / "golden").is_dir() and not (innotier_home / "golden").exists():
        os.symlink(IMAGE_HOME / "golden", innotier_home / "golden")


@pytest.fixture
def clean_md():
    wipe_md()
    yield
    wipe_md()
