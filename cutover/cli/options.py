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


def report_option(text: str) -> Callable[[F], F]:
    """--report DIR: a folder the command writes its report into (assess, verify, drill run)."""
    return click.option("--report", "report_dir", metavar="DIR", type=ReportFolder(), help=text)


class ReportFolder(click.Path):
    """A report's folder, created when missing. Refused at once, before any cluster is asked, when a file stands
    where a folder must be or its nearest existing folder cannot be written: not after the work is done."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import os
        from pathlib import Path

        path = Path(str(super().convert(value, param, ctx)))
        there = next(p for p in (path, *path.parents) if p.exists())
        if not there.is_dir():
            self.fail(f"{str(value)!r}: {there} is a file, not a folder\n  fix: give a folder (it is created if "
                      "missing)", param, ctx)
        if not os.access(there, os.W_OK | os.X_OK):
            self.fail(f"{str(value)!r}: the folder {there} cannot be written by this user\n  fix: give a folder "
                      "you may write to (it is created if missing)", param, ctx)
        return value


@contextmanager
def writing_report(folder: str) -> Iterator[None]:
    """A report that cannot be written after all (the file system refused) is named, not a bug."""
    from cutover.errors import UsageError

    try:
        yield
    except OSError as exc:
        raise UsageError(f"--report {folder}: the report cannot be written there: {exc.strerror or exc}",
                         fix="give a folder you may write to (it is created if missing)") from None


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
    """The one type of every option that takes a length of time (the CLI's tests check that none drifts): seconds
    as a number, or a duration the way plans write them (500ms, 90s, 5m, 1h, 2d), within [least, most]. A bad
    value is named with the option, the value and the forms accepted (exit 2)."""

    name = "SECONDS"
    FORMS = "30, 30s, 5m, 1h (also 500ms, 2d)"

    def __init__(self, least: float = 0.1, most: float | None = None) -> None:
        self.least, self.most = least, most

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from cutover.plan.schema import Duration

        try:
            seconds = float(Duration.parse(value))
        except (ValueError, TypeError):
            self.fail(f"{value!r} is not a duration\n  fix: write it as seconds or with a unit: {self.FORMS}",
                      param, ctx)
        if seconds < self.least:
            self.fail(f"{value!r} is less than the least, {_shown(self.least)}\n  fix: give {_shown(self.least)} "
                      "or more", param, ctx)
        if self.most is not None and seconds > self.most:
            self.fail(f"{value!r} is more than the most, {_shown(self.most)}\n  fix: give {_shown(self.most)} "
                      "or less", param, ctx)
        return seconds


def _shown(seconds: float) -> str:
    """A bound the way it may be written: 100ms, 10m, 1h, 45s."""
    if 0 < seconds < 1:
        return f"{seconds * 1000:g}ms"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@contextmanager
def stop_on_signals() -> Iterator[Stop]:
    """SIGINT/SIGTERM ask for a clean stop: the work the command says is in flight (`Stop.in_flight`) is
    finished first; a second SIGINT stops at once (see cutover.interrupt)."""
    from cutover import interrupt

    stop = Stop()
    with interrupt.graceful(stop, stop.in_flight):
        yield stop


def per_cluster(what: str, choices: tuple[str, ...], example: str) -> Callable[..., dict[str, str]]:
    """A click callback for a repeatable CLUSTER=VALUE option, VALUE one of `choices`."""

    def parse(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
        out: dict[str, str] = {}
        for value in values:
            side, _, chosen = value.partition("=")
            if side not in ("old", "new") or chosen not in choices:
                raise click.BadParameter(f"{value!r}: expected CLUSTER={what} with CLUSTER old or new and {what} "
                                         f"one of {', '.join(choices)} (for example {example})")
            out[side] = chosen
        return out

    return parse


def platform_option(help_text: str) -> Callable[[F], F]:
    """--platform CLUSTER=NAME (kafka or tansu) for the commands that create the local sandbox (local up, demo)."""
    return click.option("--platform", "platforms", multiple=True, metavar="CLUSTER=NAME",
                        callback=per_cluster("NAME", ("kafka", "tansu"), "--platform new=tansu"), help=help_text)
