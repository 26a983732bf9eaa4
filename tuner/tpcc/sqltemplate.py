"""One SQL text, two renderings: a stored-procedure statement and a client-side prepared statement.

Each transaction module writes its SQL once, as a template whose inputs are
named fields (``{w_id}``) and whose SELECT targets are ``{into}``.  Inside a
stored procedure the fields become the procedure's parameters and local
variables (``p_w_id``, ``v_o_id``) and ``{into}`` becomes ``INTO v_a, v_b``;
on the client they become ``?`` placeholders, bound in order, and ``{into}``
disappears (the rows come back to the client).  The two execution modes thus
run the same statements by construction, not by keeping two copies in step.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

_FORMATTER = string.Formatter()


def fields(template: str) -> list[str]:
    """Field names in the order they appear (repeats kept)."""
    return [name for _, name, _, _ in _FORMATTER.parse(template) if name is not None]


@dataclass(frozen=True)
class ClientStatement:
    sql: str  # with ? placeholders
    params: tuple[str, ...]  # the field bound to each placeholder, in order

    def args(self, values: dict) -> list:
        return [values[p] for p in self.params]


def client(template: str) -> ClientStatement:
    names = [n for n in fields(template) if n != "into"]
    sql = template.format(into="", **{n: "?" for n in names})
    return ClientStatement(sql=sql, params=tuple(names))


def procedure(template: str, variables: dict[str, str], into: tuple[str, ...] = ()) -> str:
    """The statement as it reads inside the procedure body (fields mapped to p_/v_ names)."""
    names = set(fields(template)) - {"into"}
    missing = names - set(variables)
    if missing:
        raise KeyError(f"no procedure variable for {sorted(missing)}")
    into_sql = (" INTO " + ", ".join(into)) if into else ""
    return template.format(into=into_sql, **{n: variables[n] for n in names})
