"""Sizes and durations: parse 4k / 512M / 1G / 1.5GiB / 4096 into bytes and 500ms / 30s / 5m / 1.5h into
seconds, and format them back."""

from __future__ import annotations

import re

from tuner.core.errors import UsageError

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes from ``4k``, ``512M``, ``1G``, ``1.5GiB`` or a plain integer; binary units as MySQL uses."""
    if isinstance(text, bool):
        raise UsageError(f"{what} {text!r} is not a size; write it like 512M or 4G")
    if isinstance(text, int):
        if text < 0:
            raise UsageError(f"{what} {text} is negative; give a positive size like 512M")
        return text
    s = str(text).strip()
    if s.startswith("-"):
        raise UsageError(f"{what} {s!r} is negative; give a positive size like 512M")
    m = _SIZE_RE.match(s)
    if not m:
        raise UsageError(f"{what} {s!r} is not a size; write it like 4k, 512M or 4G")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value != int(value):
        raise UsageError(f"{what} {s!r} is not a whole number of bytes; write it like 1536M")
    return int(value)


def format_size(n: int) -> str:
    """The shortest exact form: 4096 -> 4K, 1073741824 -> 1G, 1000 -> 1000."""
    for unit in ("P", "T", "G", "M", "K"):
        mult = _UNITS[unit.lower()]
        if n and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def human_size(n: float) -> str:
    """Rounded, for people: 1.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


PAGE_SIZES = {4096: "4k", 8192: "8k", 16384: "16k", 32768: "32k", 65536: "64k"}


def page_size_label(n: int) -> str:
    """innodb_page_size the one way people read it everywhere: 4k, 8k, 16k, 32k, 64k."""
    return PAGE_SIZES.get(n, str(n))


def size_with_bytes(n: int) -> str:
    """A byte count for people with the raw value beside it: ``128M (134217728 bytes)``."""
    short = format_size(n)
    return f"{short if short != str(n) else human_size(n)} ({n} bytes)"


def parse_page_size(text: str | int) -> int:
    """innodb_page_size: one of 4k, 8k, 16k, 32k, 64k (or the byte value)."""
    try:
        n = parse_size(text, "page size")
    except UsageError:
        n = -1
    if n in (4, 8, 16, 32, 64):  # "16" means 16k as the server accepts
        n *= 1024
    if n not in PAGE_SIZES:
        raise UsageError(f"page size {text!r} is not valid; InnoDB accepts 4k, 8k, 16k, 32k or 64k")
    return n


_DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|sec|s|min|m|h)?\s*$", re.IGNORECASE)


def parse_duration(text: str | int | float, what: str = "duration") -> float:
    """Seconds from ``500ms``, ``30``, ``30s``, ``5m``, ``5min``, ``1.5h`` (a bare number is seconds).

    The one grammar for every duration a user writes (options, spec files, intervals); callers
    add their own bounds.
    """
    if isinstance(text, bool):
        raise UsageError(f"{what} {text!r} is not a duration; write it like 30s, 5m or 1.5h")
    if isinstance(text, (int, float)):
        if text < 0:
            raise UsageError(f"{what} {text} is negative; give a duration like 30s or 5m")
        return float(text)
    s = str(text).strip()
    m = _DURATION_RE.match(s)
    if not m:
        hint = "; it is negative" if s.startswith("-") else ""
        raise UsageError(f"{what} {s!r} is not a duration{hint}; write it like 500ms, 30s, 5m or 1.5h")
    unit = m.group(2).lower() if m.group(2) else None
    return float(m.group(1)) * _DURATION_UNITS[unit]


def format_duration(seconds: float, compact: bool = False) -> str:
    """Whole seconds for people: "42 s", "3 min 05 s", "2 h 07 min"; ``compact`` gives "42s", "3m05s", "2h07m"."""
    s = int(round(seconds))
    sec, minute, hour = ("s", "m", "h") if compact else (" s", " min", " h")
    sep = "" if compact else " "
    if s < 60:
        return f"{s}{sec}"
    if s < 3600:
        return f"{s // 60}{minute}{sep}{s % 60:02d}{sec}"
    return f"{s // 3600}{hour}{sep}{(s % 3600) // 60:02d}{minute}"
