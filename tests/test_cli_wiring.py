"""Loud wiring: a CLI module that cannot be wired in stops start-up with its name."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tuner.cli import COMMANDS, REGISTRARS, build_parser
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


@pytest.mark.parametrize("argv", [["--help"], ["sandbox", "list"]])
def test_innotier_refuses_to_start_with_a_renamed_module(argv):
    """Even --help, which imports no CLI module, and a command of another module stop on a renamed one."""
    code = ("import sys, tuner.cli as c; c.COMMANDS = {**c.COMMANDS, 'renamed': c.Command('tuner.renamed_cli', 'x')}; "
            f"sys.exit(c.main({argv!r}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 70, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("innotier: CLI module tuner.renamed_cli failed to import")
    assert len(proc.stderr.strip().splitlines()) == 1


def _groups(parser):
    return parser._subparsers._group_actions[0]


def test_every_listed_module_registers_its_group():
    parser = build_parser()
    groups = set(_groups(parser).choices)
    assert {"server", "sandbox", "profile", "tiers", "move", "persist", "tpcc", "sweep", "exporter"} <= groups
    assert all(name.endswith("_cli") for name in REGISTRARS)


def test_the_table_names_exactly_what_each_module_registers():
    """COMMANDS (what --help lists without importing) and the modules' own register() never drift apart."""
    groups = _groups(build_parser())
    assert list(groups.choices) == list(COMMANDS)
    assert {a.dest: a.help for a in groups._choices_actions} == {n: c.help for n, c in COMMANDS.items()}
    for name, command in COMMANDS.items():
        real = _groups(build_parser(name)).choices[name]
        assert real.get_default("func") or real._subparsers is not None, name  # registered, not a placeholder


def _imported_after(argv: list[str]) -> set[str]:
    code = ("import sys, tuner.cli as c\ntry:\n    c.main(%r)\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sys.modules))" % (argv,))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(proc.stdout.split()[-1000:]) & (set(REGISTRARS) | {"tuner.core.sandbox", "tuner.tpcc.move_check"})


def test_help_imports_no_cli_module():
    assert _imported_after(["--help"]) == set()
    assert _imported_after(["--version"]) == set()


def test_a_command_imports_only_its_own_module(innotier_home):
    assert _imported_after(["sandbox", "list"]) == {"tuner.sandbox_cli", "tuner.core.sandbox", "tuner.tpcc.move_check"}


@pytest.mark.parametrize("argv, line", [
    (["sandbx", "list"], "innotier: unknown command 'sandbx'; did you mean 'sandbox'?"),
    (["tpcc", "rnu"], "innotier: unknown tpcc command 'rnu'; did you mean 'run'?"),
    (["qqq"], "innotier: unknown command 'qqq'; see --help for the list"),
])
def test_a_mistyped_command_gets_one_line(cli, argv, line):
    r = cli(*argv)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == line
