"""tuner.core.units: sizes, page sizes and durations."""

from __future__ import annotations

import re

import pytest

from tuner.core.errors import UsageError
from tuner.core.units import format_duration, format_size, human_size, parse_duration, parse_page_size, parse_size


@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), ("4k", 4096), ("4K", 4096), ("512M", 512 << 20), ("1G", 1 << 30), ("1.5GiB", 3 << 29),
    ("2T", 2 << 40), (" 16 k ", 16384), ("8kb", 8192), (0, 0), (12345, 12345),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, message", [
    ("-1G", "negative"), (-5, "negative"), ("lots", "is not a size"), ("4X", "is not a size"),
    ("1.3k", "whole number of bytes"), (True, "is not a size"),
])
def test_parse_size_refuses_with_the_fix(text, message):
    with pytest.raises(UsageError, match=message) as err:
        parse_size(text, "--size")
    assert str(err.value).startswith("--size ")
    assert "write it like" in str(err.value) or "give a positive size" in str(err.value)


@pytest.mark.parametrize("n", [0, 1, 1000, 4096, 512 << 20, 3 << 29, 1 << 40, (1 << 30) + 1])
def test_format_size_round_trips(n):
    assert parse_size(format_size(n)) == n


def test_format_size_is_the_shortest_exact_form():
    assert [format_size(n) for n in (4096, 1 << 30, 1000, 1536 << 20)] == ["4K", "1G", "1000", "1536M"]


def test_human_size():
    assert [human_size(n) for n in (512, 1536, 3 << 29, 5 << 40)] == ["512 B", "1.5 KiB", "1.5 GiB", "5.0 TiB"]


@pytest.mark.parametrize("text, expected", [("4k", 4096), ("16K", 16384), ("16", 16384), (65536, 65536),
                                            ("64k", 65536)])
def test_parse_page_size(text, expected):
    assert parse_page_size(text) == expected


@pytest.mark.parametrize("text", ["2k", "128k", "x", "0"])
def test_parse_page_size_refuses(text):
    with pytest.raises(UsageError, match="InnoDB accepts 4k, 8k, 16k, 32k or 64k"):
        parse_page_size(text)


@pytest.mark.parametrize("seconds, spaced, compact", [
    (0, "0 s", "0s"), (42.4, "42 s", "42s"), (59.6, "1 min 00 s", "1m00s"), (65, "1 min 05 s", "1m05s"),
    (3599, "59 min 59 s", "59m59s"), (3600, "1 h 00 min", "1h00m"), (7620, "2 h 07 min", "2h07m"),
    (90000, "25 h 00 min", "25h00m"),
])
def test_format_duration(seconds, spaced, compact):
    assert format_duration(seconds) == spaced
    assert format_duration(seconds, compact=True) == compact


@pytest.mark.parametrize("text, expected", [
    (30, 30.0), (1.5, 1.5), ("30", 30.0), ("30s", 30.0), ("30 sec", 30.0), ("500ms", 0.5), ("5ms", 0.005),
    ("5m", 300.0), ("5min", 300.0), ("1.5h", 5400.0), (" 2H ", 7200.0),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, message", [
    ("soon", "'soon' is not a duration; write it like 500ms, 30s, 5m or 1.5h"),
    ("-5s", "is not a duration; it is negative"),
    (-3, "is negative"),
    (True, "is not a duration"),
    ("5d", "is not a duration"),
])
def test_parse_duration_refuses_with_the_fix(text, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_duration(text, "--interval")
