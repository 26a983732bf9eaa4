"""A cell's settings as a profile: the sweep never writes server options itself.

Every cell becomes a ``profiles.model.Profile`` (the spec's base profile, if any, overlaid with the
cell's page size, flush method, doublewrite, buffer pool, redo size and other options), which the
profiles code validates, lints for the target server, renders and writes into the sandbox
(``40-innotier-profile.cnf``).  Placement is not part of the cell's profile: the sweep places
components itself (tuner/sweep/placement.py) and the mover's placement drop-in says where they are.
"""

from __future__ import annotations

from typing import Any

from tuner.core.errors import InnotierError, SweepError
from tuner.core.server import Flavor, Version
from profiles.model import FIELD_OPTIONS, load_profile, profile_from_mapping
from profiles.lint import lint_options
from profiles.render import render_options
from profiles.apply import apply_profile_to_sandbox

# spec setting -> profile field
FIELDS = {"page_size": "page_size", "flush_method": "flush_method", "doublewrite": "doublewrite",
          "buffer_pool_size": "buffer_pool_size", "buffer_pool_instances": "buffer_pool_instances",
          "log_file_size": "redo_capacity"}
# spec setting -> server option passed as a profile option
OPTION_SETTINGS = {"flush_log_at_trx_commit": "innodb_flush_log_at_trx_commit", "io_capacity": "innodb_io_capacity"}


def _base_mapping(spec) -> dict[str, Any]:
    if not spec.profile:
        return {}

    try:
        base = load_profile(spec.profile)
    except InnotierError as exc:
        raise SweepError(f"profile {spec.profile!r} of sweep {spec.name}: {exc}") from None
    if base.placements:
        raise SweepError(f"profile {base.name} places components ({', '.join(base.placements)}); a sweep places "
                         "them itself with placement: -- use a profile without placements")
    d = base.to_dict()
    d.pop("source", None)
    d["options"] = d.pop("extra", {}) or {}
    d.pop("placements", None)
    return {k: v for k, v in d.items() if v not in (None, {}, [], "")}


def cell_profile(spec, cell) -> Any:
    """The cell's profile (validated by the profiles code; errors name the cell)."""
    d = _base_mapping(spec)
    d["name"] = f"sweep-{spec.name.lower()}-{cell.config_key}"[:63]
    d["description"] = f"sweep {spec.name}, cell {cell.label}"
    options = dict(d.get("options") or {})
    for setting, value in cell.settings.items():
        if setting in FIELDS:
            d[FIELDS[setting]] = value
        elif setting in OPTION_SETTINGS:
            options[OPTION_SETTINGS[setting]] = str(value)
    for name, value in (cell.settings.get("options") or {}).items():
        owner = FIELD_OPTIONS.get(name)
        if owner:
            raise SweepError(f"cell {cell.label}: option {name} is a profile field; set it with "
                             f"{_setting_for(owner)}: in the spec instead of options:")
        options[name] = value
    d["options"] = options
    d.pop("flavor", None)
    try:
        return profile_from_mapping(d, f"sweep {spec.name} cell {cell.label}")
    except InnotierError as exc:
        raise SweepError(f"cell {cell.label}: {exc}") from None


def _setting_for(field: str) -> str:
    for s, f in FIELDS.items():
        if f == field:
            return s
    return field


def lint_cell_options(spec, cell, flavor: Flavor, version: Version, tier_paths: list[str] | None = None) -> list[str]:
    """Render and lint the cell's profile for this server: errors raise SweepError, warnings are returned.

    ``tier_paths``: existing directories the cell's files go to, so the linter can probe them (O_DIRECT).
    """
    profile = cell_profile(spec, cell)
    try:
        rendered = render_options(profile, flavor, version)
    except InnotierError as exc:
        raise SweepError(f"cell {cell.label}: {exc}") from None
    findings = []
    for path in tier_paths or [None]:
        findings += lint_options(rendered, flavor, version, tier_path=path)
    notes: list[str] = []
    for f in findings:
        if f.severity == "error":
            raise SweepError(f"cell {cell.label}: {f.option}: {f.reason}; {f.fix}")
        text = f"cell {cell.label}: {f.option}: {f.reason} ({f.fix})"
        if f.severity == "warning" and text not in notes:
            notes.append(text)
    return notes


def apply_cell_profile(sb, spec, cell) -> str:
    """Write the cell's profile into the sandbox's conf.d; returns the rendered option text."""
    profile = cell_profile(spec, cell)
    try:
        apply_profile_to_sandbox(sb, profile)
    except InnotierError as exc:
        raise SweepError(f"cell {cell.label}: applying its profile failed: {exc}") from None
    return profile
