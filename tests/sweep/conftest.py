"""Sweep tests: helpers to run the real CLI in the background and to write small specs."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from cli_procs import popen_cli, reap_group


@pytest.fixture
def write_spec(tmp_path):
    """write_spec(text) -> path of a spec file in the test's tmp dir."""

    def write(text: str, name: str = "spec.yaml") -> str:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text))
        return str(p)

    return write


@pytest.fixture
def background_cli():
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        p = popen_cli(*args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        reap_group(p)
