"""Options shared by commands: --plan, --output, --timeout; clean stops on signals."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from cutover.output import Format, progress

F = TypeVar("F", bound=Callable[..., Any])


def output_option(f: F) -> F:
    return click.option(
        "--output", "-o", "fmt", type=click.Choice([m.value for m in Format]), default=Format.TEXT.value,
        show_default=True, callback=lambda _c, _p, v: Format(v), help="Result format on stdout.",
    )(f)


def catalog_option(f: F) -> F:
    """--catalog for the commands that create the local sandbox (local up, demo)."""
    from cutover.local.lake import CATALOG_KINDS

    return click.option(
        "--catalog", "catalog", type=click.Choice(CATALOG_KINDS), default=None,
        help="The Iceberg catalog: sqlite (default; a file, tables on local files), rest (Apache Iceberg's "
        "REST catalog server) or postgres (PostgreSQL from the system's packages), the last two over "
        "S3-compatible storage (s3proxy). Only when the sandbox is first created.",
    )(f)


def plan_option(f: F) -> F:
    return click.option(
        "--plan", "plan_file", required=True, envvar="CUTOVER_PLAN", metavar="FILE",
        type=click.Path(dir_okay=False), help="The migration plan (YAML). Env: CUTOVER_PLAN.",
    )(f)


def timeout_option(default: float) -> Callable[[F], F]:
    return click.option("--timeout", type=click.FloatRange(min=0.1), default=default, show_default=True,
                        help="Seconds to wait for each cluster and the catalog.")


@contextmanager
def stop_on_signals(finishing: str = "the work in flight") -> Iterator[threading.Event]:
    """SIGINT/SIGTERM ask for a clean stop (finish what is in flight); a second SIGINT aborts."""
    stop = threading.Event()

    def ask(signum: int, _frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        progress(f"{signal.Signals(signum).name}: finishing {finishing}, then stopping")
        stop.set()

    before = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in before.items():
            signal.signal(s, h)
