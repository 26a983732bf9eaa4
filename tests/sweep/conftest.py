"""Sweep tests: helpers to run the real CLI in the background and to write small specs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def write_spec(tmp_path):
    """write_spec(text) -> path of a spec file in the test's tmp dir."""

    def write(text: str, name: str = "spec.yaml") -> str:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text))
        return str(p)

    return write


def popen_cli(*args: str) -> subprocess.Popen:
    """The real `innotier` command line as a background process (unbuffered, its own process group)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO))


@pytest.fixture
def background_cli():
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        p = popen_cli(*args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
