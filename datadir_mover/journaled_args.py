"""What the command lines of the journaled commands (`innotier move`, `innotier table-move`) share: the
options that name one journaled operation (--id, --yes, --json), the confirmation before a change, and the
progress lines on standard error.  One copy, so the two commands ask and answer in the same words."""

from __future__ import annotations

import sys
from typing import Callable

from tuner.core.errors import MoveError, UsageError

RESUME_ID_HELP = "the move (default: the only unfinished one)"
STATUS_ID_HELP = "one move (default: all, newest first)"


def add_journal_args(parser, id_help: str, asks_first: bool = False) -> None:
    """--id (which operation; ``id_help`` says the default), --yes when the command asks before a change, --json."""
    parser.add_argument("--id", help=id_help)
    if asks_first:
        add_yes(parser)
    parser.add_argument("--json", action="store_true")


def add_yes(parser) -> None:
    """--yes: the answer to ``confirm``'s question, given in advance (scripts, no terminal)."""
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on the terminal unless --yes; without a terminal, refuse in one line naming --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question.rstrip('?')} needs confirmation; standard input is not a terminal, so pass --yes")
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise MoveError("not confirmed; nothing was changed")


def echo(quiet: bool) -> Callable[[str], None]:
    """Progress lines "innotier: ..." on standard error; none with --json (quiet)."""
    def say(msg: str) -> None:
        if not quiet:
            print(f"innotier: {msg}", file=sys.stderr)
    return say
