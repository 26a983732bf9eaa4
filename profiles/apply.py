"""Apply a profile to a sandbox: the same renderer as `innotier profile generate`, written as the sandbox's profile drop-in.

The page size is fixed when a datadir is initialized, so a profile whose page size differs from
the sandbox's (or from an explicitly given --page-size) is refused before anything is created or
written.  Placements move data files; a profile cannot do that safely, so profiles with placements
are refused here (use `innotier move`).
"""

from __future__ import annotations

from profiles.model import Profile, load_profile
from profiles.render import header_for, render, render_option_file
from tuner.core.durable import write_atomic
from tuner.core.errors import ProfileError
from tuner.core.server import Version
from tuner.core.units import PAGE_SIZES, parse_page_size

PROFILE_DROP_IN = "40-innotier-profile.cnf"


def load_profile_for_sandbox(name_or_path: str, page_size: str | int | None, explicit_page_size: bool) -> Profile:
    """Load and check a profile for a sandbox whose page size is ``page_size`` (given explicitly, or existing)."""
    profile = load_profile(name_or_path)
    if profile.placements:
        comps = ", ".join(sorted(profile.placements))
        raise ProfileError(f"profile {profile.name} places files ({comps}); a sandbox keeps its files in place, so apply "
                           "placements with `innotier move` and use a profile without placements here")
    if explicit_page_size and page_size is not None and profile.page_size is not None:
        have = parse_page_size(page_size)
        if have != profile.page_size:
            raise ProfileError(
                f"profile {profile.name} needs {PAGE_SIZES[profile.page_size]} pages but the sandbox has (or was asked for) "
                f"{PAGE_SIZES[have]}; page size is fixed when the datadir is initialized, so create a sandbox for it "
                f"with `innotier sandbox create NAME --page-size {PAGE_SIZES[profile.page_size]} --profile {profile.name}`")
    return profile


def render_for_sandbox(sb, profile: Profile) -> str:
    if profile.page_size is not None and profile.page_size != sb.page_size:
        raise ProfileError(
            f"profile {profile.name} needs {PAGE_SIZES[profile.page_size]} pages but sandbox {sb.name} was initialized "
            f"with {PAGE_SIZES.get(sb.page_size, sb.page_size)}; page size is fixed at initialization, so create a new "
            f"sandbox with `innotier sandbox create NAME --page-size {PAGE_SIZES[profile.page_size]}`")
    rendered = render(profile, sb.flavor, Version.parse(sb.version))
    return render_option_file(rendered.options, header_for(profile, rendered))


def apply_profile_to_sandbox(sb, profile: Profile):
    """Render for the sandbox's flavor/version and write conf.d/40-innotier-profile.cnf durably; returns the path."""
    text = render_for_sandbox(sb, profile)  # everything is validated before the write
    sb.conf_d.mkdir(parents=True, exist_ok=True)
    return write_atomic(sb.conf_d / PROFILE_DROP_IN, text, mode=0o644)
