"""Shared by the profile tests (tests/profiles, tests/servers): apply a profile to a sandbox and boot it."""

from __future__ import annotations

from tuner.core.server import fetch_variables


def boot_with_profile(sb, profile):
    """Stop the sandbox if running, write the profile drop-in, start it; return (drop-in path, variables, new log)."""
    from profiles.apply import apply_profile_to_sandbox
    from tuner.core import sandbox as sbx

    if sb.state() == sbx.SandboxState.RUNNING:
        sb.stop()
    path = apply_profile_to_sandbox(sb, profile)
    offset = sb.error_log.stat().st_size if sb.error_log.exists() else 0
    sb.start()
    conn = sb.connection_spec().connect()
    try:
        variables = {k.lower(): v for k, v in fetch_variables(conn).items()}
    finally:
        conn.close()
    with open(sb.error_log, "rb") as fh:
        fh.seek(offset)
        return path, variables, fh.read().decode(errors="replace")
