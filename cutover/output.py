"""Results go to stdout, as text for people or JSON for automation; nothing else does.

Commands build a plain result (dicts, lists, scalars) and hand it to `emit` with a
text renderer. JSON output is the result itself, so its keys are the contract.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import click


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


def progress(message: str) -> None:
    """A progress or log line for people: always stderr, never stdout, never a known secret."""
    from cutover.secrets import scrub

    click.echo(scrub(message), err=True)


def table(rows: list[list[str]], header: list[str] | None = None, indent: str = "  ") -> str:
    """Left-aligned columns, for text renderers."""
    all_rows = ([header] if header else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]))]
    lines = [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in all_rows]
    return "\n".join(lines)
