"""Provisioning plans: a list of exact commands, printable before anything runs (--dry-run).

A ``Plan`` is built from validated arguments and the host's state, without side
effects.  ``render()`` prints it as the shell commands it will run (``$N`` stands
for the zram device number the kernel hands out at apply time).  ``apply_plan``
is the only place that changes the machine: it runs the steps in order, and if a
step fails it undoes the steps already done, in reverse, so a failed create
leaves the host as it was.  A plan with ``blockers`` (no DAX device, no md
driver, not root) is never applied: the caller prints it and the reason.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable

from tuner.core.errors import TierError

Action = Callable[[dict], None]


@dataclass
class Step:
    summary: str                     # what it does, for people
    command: str                     # the exact command (shell syntax), as printed by --dry-run
    action: Action | None = None     # None: a manual step (kernel parameter, reboot) innotier never runs
    undo: Action | None = None
    undo_command: str | None = None

    @property
    def manual(self) -> bool:
        return self.action is None


@dataclass
class Plan:
    title: str
    steps: list[Step] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)   # why it cannot be applied on this host
    notes: list[str] = field(default_factory=list)

    @property
    def applicable(self) -> bool:
        return not self.blockers and not any(s.manual for s in self.steps)

    def render(self) -> str:
        lines = [f"# plan: {self.title}"]
        for i, step in enumerate(self.steps, 1):
            tag = " (manual: innotier does not run this)" if step.manual else ""
            lines.append(f"# {i}. {step.summary}{tag}")
            lines.append(step.command)
        for note in self.notes:
            lines.append(f"# note: {note}")
        for blocker in self.blockers:
            lines.append(f"# cannot apply here: {blocker}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "steps": [{"summary": s.summary, "command": s.command, "manual": s.manual,
                       "undo_command": s.undo_command} for s in self.steps],
            "blockers": list(self.blockers),
            "notes": list(self.notes),
            "applicable": self.applicable,
        }


def substitute(text: str, state: dict) -> str:
    for key, value in state.items():
        text = text.replace(f"${key}", str(value))
    return text


def run_argv(argv: list[str], state: dict | None = None, input: str | None = None) -> str:
    """Run a command (``$N`` substituted); raise TierError with its last stderr line on failure."""
    argv = [substitute(a, state or {}) for a in argv]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL, timeout=300)
    except FileNotFoundError:
        raise TierError(f"{argv[0]} is not installed; install it and retry") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        raise TierError(f"`{render_argv(argv)}` failed: {detail}")
    return proc.stdout


def render_argv(argv: list[str]) -> str:
    """shlex.join, except that ``$N`` stays outside the quotes so the printed command runs in a shell."""
    def one(arg: str) -> str:
        return "$N".join(shlex.quote(part) if part else "" for part in arg.split("$N"))
    return " ".join(one(a) for a in argv)


def command_step(summary: str, argv: list[str], undo_argv: list[str] | None = None) -> Step:
    return Step(
        summary=summary,
        command=render_argv(argv),
        action=lambda state: run_argv(argv, state) and None,
        undo=(lambda state: run_argv(undo_argv, state) and None) if undo_argv else None,
        undo_command=render_argv(undo_argv) if undo_argv else None,
    )


def write_step(summary: str, path: str, value: str, undo: Action | None = None,
               undo_command: str | None = None) -> Step:
    """Write a value into a sysfs attribute (``echo value > path``)."""

    def action(state: dict) -> None:
        target, text = substitute(path, state), substitute(value, state)
        try:
            with open(target, "w") as fh:
                fh.write(text)
        except OSError as exc:
            raise TierError(f"writing {text!r} to {target} failed: {exc.strerror}") from None

    return Step(summary=summary, command=f"echo {shlex.quote(value)} > {path}", action=action,
                undo=undo, undo_command=undo_command)


def manual_step(summary: str, command: str) -> Step:
    return Step(summary=summary, command=command, action=None)


@dataclass
class ApplyResult:
    state: dict
    executed: list[str]


def apply_plan(plan: Plan, echo: Callable[[str], None] | None = None) -> ApplyResult:
    """Run every step; on failure undo the done steps in reverse and raise TierError."""
    if plan.blockers:
        raise TierError(f"cannot {plan.title} on this host: {plan.blockers[0]}")
    manual = [s for s in plan.steps if s.manual]
    if manual:
        raise TierError(f"cannot {plan.title} automatically: step '{manual[0].summary}' must be done by hand first")
    state: dict = {}
    done: list[Step] = []
    executed: list[str] = []
    for step in plan.steps:
        shown = substitute(step.command, state)
        if echo:
            echo(f"+ {shown}")
        try:
            step.action(state)  # type: ignore[misc]
        except BaseException as exc:
            undo_errors = _undo(done, state, echo)
            suffix = f" (undo also failed: {undo_errors[0]})" if undo_errors else " (the steps already done were undone)"
            if isinstance(exc, TierError):
                raise TierError(f"{step.summary} failed: {exc}{suffix}") from exc
            raise
        executed.append(substitute(step.command, state))
        done.append(step)
    return ApplyResult(state=state, executed=executed)


def _undo(done: list[Step], state: dict, echo) -> list[str]:
    errors = []
    for step in reversed(done):
        if step.undo is None:
            continue
        if echo and step.undo_command:
            echo(f"- {substitute(step.undo_command, state)}")
        try:
            step.undo(state)
        except Exception as exc:  # keep undoing the rest
            errors.append(str(exc))
    return errors
