"""Small shared vocabulary: a topic partition, time stamps and numbers as cutover prints them, durable renames.

Defined once here so every package says them the same way (the JSON contracts depend on
the time formats).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")

#: A Kafka topic partition: (topic, partition).
TP = tuple[str, int]

#: Seconds any one wait on a cluster, the catalog or the storage may take: the one default of every
#: command's --timeout.
NETWORK_TIMEOUT = 30.0


class Stop(threading.Event):
    """A request for a clean stop, and what the work would finish before it stops (said when asked)."""

    def __init__(self) -> None:
        super().__init__()
        self.describe: Callable[[], str | None] = lambda: None

    def in_flight(self) -> str | None:
        return self.describe()


def in_flight(stop: threading.Event, what: Callable[[], str | None] | None) -> None:
    """Say what a clean stop would finish at any moment from now (None: nothing); a plain Event ignores it."""
    if isinstance(stop, Stop):
        stop.describe = what or (lambda: None)


def exact(value: float) -> str:
    """A number as the user set it, never rounded: 1048576 for an integral float, else Python's shortest
    exact form (12.345678). `%g` shows six significant digits (1.04858e+06): a value someone compares
    with what they configured must not be shown that way."""
    number = float(value)  # a plan's Duration is a float too: shown as its number
    return str(int(number)) if number.is_integer() else repr(number)


def iso_seconds(ts: float | None) -> str | None:
    """Epoch seconds as ISO 8601 in UTC to the second ("2026-11-23T05:00:00+00:00"); None stays None."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds") if ts else None


def iso_z(ts: float | None = None) -> str:
    """Epoch seconds (default: now) as "2026-11-23T05:00:00Z"."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def iso_millis_z(ts: float) -> str:
    """Epoch seconds as "2026-11-23T05:00:00.123Z"."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def fsync_dir(folder: Path) -> None:
    """Make a new or renamed entry in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every entry of a JSON-lines record, oldest first; none when the file is not there. A line that does
    not parse (a torn last line: its writer died while writing it) is left out."""
    import json

    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def replace_file(path: Path, text: str) -> None:
    """Write `text` over `path` whole or not at all: a temporary file beside it, fsynced, renamed over it,
    and the rename made durable."""
    tmp = path.with_name(f".{path.name}.cutover.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def settled(read: Callable[[], _T], missing: Callable[[_T], list[str]], timeout: float,
            step: float = 0.2) -> tuple[_T, list[str]]:
    """Read until nothing is `missing` from what was read, or `timeout` seconds pass: a KRaft broker answers
    describes from its metadata image, which takes an instant to hold what its controller just accepted.
    Returns the last read and what it still misses (empty when it settled)."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        lacking = missing(got)
        if not lacking or time.monotonic() >= deadline:
            return got, lacking
        time.sleep(step)
