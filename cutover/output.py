"""Results go to stdout, as text for people or JSON for automation; nothing else does.

Commands build a result (a typed value with `as_dict()`, or plain data) and hand it to
`emit` with a text renderer; JSON output is its `as_dict()`, so those keys are the
contract. Everything else that core modules say goes through `progress`: stderr by
default, any sink a front end sets (`set_reporter`), never a known secret.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any


class Format(StrEnum):
    TEXT = "text"
    JSON = "json"


def emit(result: Any, fmt: Format, render_text: Callable[[Any], str]) -> None:
    """Write one result to stdout in the chosen format: a typed result's `as_dict()` as JSON, or the text
    its renderer makes of it."""
    if fmt is Format.JSON:
        data = result.as_dict() if hasattr(result, "as_dict") else result
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    else:
        text = render_text(result)
        if text:
            sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


def to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


_reporter: Callable[[str], None] = to_stderr


def set_reporter(sink: Callable[[str], None]) -> Callable[[str], None]:
    """Send progress lines to `sink` from now on; returns the sink it replaces."""
    global _reporter
    before, _reporter = _reporter, sink
    return before


def progress(message: str) -> None:
    """A progress or log line for people: stderr (or the reporter set), never stdout, never a known secret."""
    from cutover.secrets import scrub

    _reporter(scrub(message))


def table(rows: list[list[str]], header: list[str] | None = None, indent: str = "  ") -> str:
    """Left-aligned columns, for text renderers."""
    all_rows = ([header] if header else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]))]
    lines = [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in all_rows]
    return "\n".join(lines)
