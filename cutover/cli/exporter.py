"""`cutover exporter`: Prometheus metrics of the switch, verify, the lake, the registries and the mirrors' state."""

from __future__ import annotations

import click

from cutover.cli.options import Seconds, metrics_host_option, plan_option, stop_on_signals, timeout_option
from cutover.errors import UsageError


@click.command("exporter")
@plan_option
@click.option("--port", type=click.IntRange(1, 65535), metavar="N",
              help="Serve the metrics on this port [default: the plan's observability.ports.exporter].")
@metrics_host_option
@click.option("--interval", type=Seconds(), default=30.0, show_default=True, metavar="SECONDS",
              help="How often a new snapshot is taken (a scrape serves the latest; it never waits on a cluster).")
@timeout_option(whole=False)
def exporter_cmd(plan_file: str, port: int | None, metrics_host: str | None, interval: float, timeout: float) -> int:
    """Serve Prometheus metrics of what the mirror and the shadow do not serve themselves, until SIGINT/SIGTERM.

    The switch's phase, steps and freeze window; each table's last verify; the catalog, the object store and
    the registries, probed; each mirror direction's lag, gaps and group syncs; the reverse mirror. Read-only.
    """
    from cutover.observe import exporter
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    served = plan.metrics_endpoint("exporter", port, metrics_host, options=("--port", "--metrics-host"))
    if served is None:
        raise UsageError("cutover exporter needs a port to serve on", fix="give --port N, or set "
                         f"observability.ports.exporter in {plan.file}")
    with stop_on_signals() as stop:
        exporter.serve(plan, served, interval, timeout, stop)
    return 0
