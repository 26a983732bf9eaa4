"""Wiring CLI modules into one parser: each named module adds its sub-commands with ``register(sub)``.

Kept apart from ``cliutil`` (which pulls in the sandbox and the server model) so that ``innotier --help``
imports nothing but argparse and this.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util

from tuner.core.errors import CliWiringError, UsageError


def _import_failed(name: str, exc: BaseException) -> CliWiringError:
    return CliWiringError(f"CLI module {name} failed to import ({type(exc).__name__}: {exc}); "
                          "fix it or remove it from tuner.cli.COMMANDS")


def register_modules(sub, module_names) -> None:
    """Let each named module add its sub-commands (``module.register(sub)``).

    A module that fails to import, or has no ``register``, stops start-up with an
    error naming it: a broken or renamed CLI module must not vanish from --help.
    """
    for name in module_names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise _import_failed(name, exc) from exc
        if not callable(getattr(module, "register", None)):
            raise CliWiringError(f"CLI module {name} has no register(sub) function; "
                                 "add one or remove it from tuner.cli.COMMANDS")
        module.register(sub)


def require_modules(module_names) -> None:
    """Every named module exists (found without importing it): a renamed one stops even ``--help``."""
    for name in module_names:
        try:
            found = importlib.util.find_spec(name)
        except Exception as exc:
            raise _import_failed(name, exc) from exc
        if found is None:
            raise _import_failed(name, ModuleNotFoundError(f"No module named {name!r}"))


def did_you_mean(word: str, choices) -> str:
    """'; did you mean X?' for the closest choice, or a pointer to --help when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else "; see --help for the list"


class CommandParser(argparse.ArgumentParser):
    """An argparse parser whose sub-command groups answer a mistyped sub-command with one line."""

    def _check_value(self, action, value):
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            group = " ".join(self.prog.split()[1:])  # "innotier sandbox" -> "sandbox"; "" at the top
            what = f"{group} command" if group else "command"
            raise UsageError(f"unknown {what} {value!r}{did_you_mean(value, action.choices)}")
        return super()._check_value(action, value)
