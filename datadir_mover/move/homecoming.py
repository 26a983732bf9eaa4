"""Moving back home: after finalize the way back is a new move to the place a finalized move left.

Rollback ends at COMMIT (the server has run on the target since, and finalize removed the source), so a
component goes back by a new move whose target is the source of the newest finalized move of the same
component on the same server, from that move's target.  Such a move undoes what the earlier one changed on
the host instead of adding to it:

- the placement option file gets back the values it had before the earlier move: a line the earlier move
  added is removed (the server then reads the component's place from its own configuration again, where it
  was), and a drop-in left with no option at all is removed;
- the earlier move's block leaves the AppArmor profile's local include: the server ran confined at home
  before that move, so home needs no rule of innotier's (``apparmor.plan_change(retire=...)``).

Rolling the move back home back (before its COMMIT) puts both back as they were.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from datadir_mover.move import placement
from datadir_mover.move.journal import all_journals


@dataclass(frozen=True)
class Homecoming:
    move_id: str  # the finalized move this one undoes
    options_before: dict[str, str | None]  # its options' values before it (None: not set in the drop-in)
    apparmor_applied: bool  # it wrote a block into the profile's local include


def find(server_key: str, component: str, source: str, target: str, datadir: str) -> Homecoming | None:
    """The newest finalized move of ``component`` on this server from ``target`` to ``source``, if any.

    For a component other than the datadir, only while the datadir is where it was then: an option the
    earlier move replaced may have been relative to it (redo's default ``./``), so removing the line would
    not bring the component back to ``target`` once the datadir has moved."""
    for journal in all_journals():  # newest first
        if journal.phase != "finalized":
            continue
        p = journal.plan()
        if (p.get("server_key"), p.get("component")) != (server_key, component):
            continue
        then = (p.get("server") or {}).get("datadir") or ""
        if component != "datadir" and os.path.realpath(then) != os.path.realpath(datadir):
            continue
        if os.path.realpath(p["source_dir"]) != os.path.realpath(target) or \
                os.path.realpath(p["target_dir"]) != os.path.realpath(source):
            continue
        had = placement.parse(p.get("placement_before"))
        names = [p["variable"], *sorted((p.get("also_options") or {}))]
        return Homecoming(move_id=p["move_id"], options_before={n: had.get(n) for n in names},
                          apparmor_applied=(p.get("apparmor") or {}).get("action") in ("apply", "write"))
    return None


def placement_after(current: str | None, home: Homecoming) -> str | None:
    """The drop-in's text after the move back home; None when no option is left in it (the file goes)."""
    opts = placement.parse(current)
    for name, value in home.options_before.items():
        if value is None:
            opts.pop(name, None)
        else:
            opts[name] = value
    return placement.render(opts) if opts else None
