"""Options shared by commands: --plan, --output, --timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from cutover.output import Format

F = TypeVar("F", bound=Callable[..., Any])


def output_option(f: F) -> F:
    return click.option(
        "--output", "-o", "fmt", type=click.Choice([m.value for m in Format]), default=Format.TEXT.value,
        show_default=True, callback=lambda _c, _p, v: Format(v), help="Result format on stdout.",
    )(f)


def plan_option(f: F) -> F:
    return click.option(
        "--plan", "plan_file", required=True, envvar="CUTOVER_PLAN", metavar="FILE",
        type=click.Path(dir_okay=False), help="The migration plan (YAML). Env: CUTOVER_PLAN.",
    )(f)


def timeout_option(default: float) -> Callable[[F], F]:
    return click.option("--timeout", type=click.FloatRange(min=0.1), default=default, show_default=True,
                        help="Seconds to wait for each cluster and the catalog.")
