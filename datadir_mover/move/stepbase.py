"""What every step of the executor shares: the halt, the callback types, a server model without a connection."""

from __future__ import annotations

from typing import Callable

from tuner.core.errors import MoveError
from tuner.core.server import ServerModel, model_from_variables

from datadir_mover.move.plan import Plan

Echo = Callable[[str], None]
ProgressFactory = Callable[[str, int], Callable[[int], None]]  # (description, total bytes) -> advance(n)


class MoveHalted(MoveError):
    """The move stopped where it is, on purpose; the journal is kept for resume or rollback."""


def quiet(_: str) -> None:
    pass


def no_progress(_: str, __: int) -> Callable[[int], None]:
    return lambda n: None


def model_stub(plan: Plan) -> ServerModel:
    """Enough of the server model to name a component's files without connecting (rollback, finalize)."""
    s = plan.server
    return model_from_variables({"version": s["version"], "version_comment": s["flavor"],
                                 "datadir": s["datadir"], "innodb_page_size": s["page_size"],
                                 "innodb_data_file_path": s.get("data_file_path", "ibdata1:12M:autoextend"),
                                 "innodb_undo_tablespaces": s.get("undo_tablespaces", "")})
