"""Which copy is good: asked before a step removes or overwrites one, so no recovery step removes the only one.

After a crash the operator runs `move rollback` (it removes the target and starts the server
on the source) or `move resume` (it starts the server on the target).  Either is right only
when the copy it keeps is whole:

- the source is whole when it is present and, by the fingerprint taken at VERIFY
  (``source_fingerprint.py``), as it was at the stop or moved on (a server ran on it: it is
  the newest); before VERIFY there is no fingerprint and a present source is the live one;
- the target is whole once VERIFY is done (every byte read back and compared), and from then
  on until the server starts on it (``target_check.py`` reads it again where the mover cannot
  vouch for it).

``for_rollback`` refuses in one line, before anything is removed, when the source is gone or
not as at the stop: it names the good copy and the command that uses it (the verified target:
`innotier move resume`; none known whole: restore the source, nothing is removed).
``for_resume`` lets a resume carry on onto the verified target when the source is gone or an
older copy (it says so), and refuses when the source moved on (starting on the target would
lose the writes the source took).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tuner.core.errors import MoveError

from datadir_mover.move import proof as proofmod
from datadir_mover.move import source_fingerprint
from datadir_mover.move.journal import Journal, State
from datadir_mover.move.plan import Plan
from datadir_mover.move.source_fingerprint import SourceState
from datadir_mover.move.stepbase import MoveHalted


@dataclass(frozen=True)
class SourceCheck:
    state: SourceState
    why: str
    fingerprinted: bool  # False: VERIFY not done, nothing to compare with beyond presence

    @property
    def whole(self) -> bool:
        return self.state in (SourceState.SAME, SourceState.AHEAD)


def check_source(journal: Journal, plan: Plan, moved_only: bool = False) -> SourceCheck:
    found = source_fingerprint.state_of(journal, plan, moved_only)
    if found is not None:
        return SourceCheck(found[0], found[1], True)
    why = source_fingerprint.gone_why(plan)
    return SourceCheck(SourceState.GONE if why else SourceState.SAME, why or "", False)


def for_rollback(journal: Journal, plan: Plan) -> None:
    """Refuse in one line, with nothing removed, when going back to the source would lose the only good copy."""
    started = journal.began(State.START)
    src = check_source(journal, plan, moved_only=started)
    if src.whole:
        return
    what = f"the source {plan.source_dir} is {src.state.value} ({src.why})"
    if journal.done(State.VERIFY) and os.path.isdir(plan.target_dir):
        on = "the server runs on" if started else "the verified copy is"
        raise MoveError(f"{what}, so rolling back would remove the only good copy: {on} the target "
                        f"{plan.target_dir}; nothing was removed; carry the move forward onto it with `innotier move "
                        f"resume --id {plan.move_id}` (or bring the source back as it was and roll back again)")
    target = "is gone" if not os.path.isdir(plan.target_dir) else "was never verified"
    raise MoveError(f"{what} and the copy on the target {plan.target_dir} {target}, so neither is known whole; "
                    f"nothing was removed: bring the source back (remount it, or restore it from a backup), then run "
                    f"`innotier move rollback --id {plan.move_id}` again")


def for_resume(journal: Journal, plan: Plan, echo, moved_only: bool = False) -> None:
    """Before SWITCH and START: refuse when the source moved on; carry on onto the verified target when the source
    is gone or older, saying so."""
    src = check_source(journal, plan, moved_only)
    if src.state == SourceState.SAME or not src.fingerprinted:
        return
    if src.state == SourceState.AHEAD:
        proofmod.invalidate(journal, src.why)  # even the offline path's proof, recorded at VERIFY
        raise MoveHalted(f"the source {plan.source_dir} changed after the copy was verified ({src.why}): a server ran "
                         f"on it and took writes the target does not have; starting on the target would lose them, "
                         f"so run `innotier move rollback --id {plan.move_id}` and move again")
    echo(f"the source {plan.source_dir} is {src.state.value} ({src.why}): the verified copy on {plan.target_dir} is "
         f"the good one; carrying the move forward onto it")
