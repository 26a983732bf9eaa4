"""Loud wiring: a CLI module that cannot be wired in stops start-up with its name."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tuner.cli import REGISTRARS, build_parser
from tuner.core.cliutil import register_modules
from tuner.core.errors import CliWiringError


def _sub():
    return argparse.ArgumentParser(prog="t").add_subparsers()


def test_a_missing_module_is_named():
    with pytest.raises(CliWiringError, match=r"CLI module tuner\.no_such_cli failed to import \(ModuleNotFoundError"):
        register_modules(_sub(), ["tuner.server_cli", "tuner.no_such_cli"])


def test_a_module_whose_import_breaks_is_named(tmp_path, monkeypatch):
    (tmp_path / "broken_cli.py").write_text("import tuner.core.no_such_helper\n\ndef register(sub):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(CliWiringError) as err:
        register_modules(_sub(), ["broken_cli"])
    # the message names the CLI module, not only the helper it failed on
    assert "CLI module broken_cli failed to import" in str(err.value)
    assert "tuner.core.no_such_helper" in str(err.value)


def test_a_module_without_register_is_named(tmp_path, monkeypatch):
    (tmp_path / "noreg_cli.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(CliWiringError, match="CLI module noreg_cli has no register"):
        register_modules(_sub(), ["noreg_cli"])


def test_innotier_refuses_to_start_with_a_renamed_module():
    code = ("import sys, tuner.cli as c; c.REGISTRARS = c.REGISTRARS + ('tuner.renamed_cli',); "
            "sys.exit(c.main(['--help']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 70, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("innotier: CLI module tuner.renamed_cli failed to import")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_every_listed_module_registers_its_group():
    parser = build_parser()
    groups = set(parser._subparsers._group_actions[0].choices)
    assert {"server", "sandbox", "profile", "tiers", "move", "persist", "tpcc", "sweep", "exporter"} <= groups
    assert all(name.endswith("_cli") for name in REGISTRARS)
