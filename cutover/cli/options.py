"""Options shared by commands: --plan, --output, --timeout (one default for all); clean stops on signals."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from cutover.common import NETWORK_TIMEOUT, Stop
from cutover.output import Format

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
        "S3-compatible storage (s3proxy). Only when the sandbox is first created. In the plan it writes, sqlite "
        "and postgres are catalog.type sql (Iceberg's JDBC catalog), rest is rest.",
    )(f)


def metrics_host_option(f: F) -> F:
    """--metrics-host of every command that serves Prometheus metrics: loopback unless told otherwise."""
    return click.option(
        "--metrics-host", metavar="HOST",
        help="Serve the metrics on this address [default: the plan's observability.host, else 127.0.0.1: this "
        "host only]; 0.0.0.0 serves them on every interface.",
    )(f)


def metrics_options(f: F) -> F:
    """--metrics-port and --metrics-host of the commands that serve their metrics while they work (mirror, shadow)."""
    return click.option(
        "--metrics-port", type=click.IntRange(1, 65535), metavar="N",
        help="Serve Prometheus metrics on this port [default: the plan's observability.ports].",
    )(metrics_host_option(f))


def plan_option(f: F) -> F:
    return click.option(
        "--plan", "plan_file", required=True, envvar="CUTOVER_PLAN", metavar="FILE",
        type=click.Path(dir_okay=False), help="The migration plan (YAML). Env: CUTOVER_PLAN.",
    )(f)


def timeout_option(whole: bool) -> Callable[[F], F]:
    """--timeout, default NETWORK_TIMEOUT. `whole`: the command asks and answers (plan check, status, ...), and ends
    within its timeout whatever it waits on; otherwise the command runs long (mirror, shadow, verify,
    promote) and the timeout bounds each wait on a cluster, the catalog or the storage."""
    def bound(ctx: click.Context, _param: click.Parameter, value: float) -> float:
        if whole and not ctx.resilient_parsing:
            from cutover import interrupt

            interrupt.bound(value, ctx.command_path)
        return value

    text = ("The longest this command may take, in seconds: every cluster, the catalog and the storage are asked "
            "within it." if whole else "Seconds to wait for any one answer from a cluster, the catalog or the "
            "storage before giving up.")
    return click.option("--timeout", type=Seconds(), default=NETWORK_TIMEOUT, show_default=True,
                        callback=bound, help=text + " Seconds, or a duration as plans write one (90s, 5m).")


class Seconds(click.ParamType):  # type: ignore[type-arg]
    """Seconds (at least 0.1), as a number or a duration the way plans write them (500ms, 90s, 5m, 1h)."""

    name = "SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from cutover.plan.schema import Duration

        if isinstance(value, int | float):
            seconds = float(value)
        else:
            try:
                seconds = float(Duration.parse(str(value)))
            except (ValueError, TypeError):
                self.fail(f"{value!r} is not a number of seconds nor a duration such as 90s or 5m", param, ctx)
        if seconds < 0.1:
            self.fail(f"{value!r} is below the least timeout, 0.1 s", param, ctx)
        return seconds


@contextmanager
def stop_on_signals() -> Iterator[Stop]:
    """SIGINT/SIGTERM ask for a clean stop: the work the command says is in flight (`Stop.in_flight`) is
    finished first; a second SIGINT stops at once (see cutover.interrupt)."""
    from cutover import interrupt

    stop = Stop()
    with interrupt.graceful(stop, stop.in_flight):
        yield stop
