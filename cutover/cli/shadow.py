"""`cutover shadow`: the parallel write path, and where each of its tables stands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cutover.cli.options import metrics_options, output_option, plan_option, stop_on_signals, timeout_option
from cutover.errors import UsageError
from cutover.output import Format, emit, table

if TYPE_CHECKING:
    from cutover.shadow.job import ShadowSummary

_cluster = click.option("--cluster", type=click.Choice(["old", "new"]), default="new", show_default=True,
                        help="The cluster to read (old: build or rebuild a table from the old cluster).")
_table = click.option("--table", "which", metavar="T", help="Only the pair with this topic or table name.")


def parse_start_offsets(text: str | None) -> dict[str, dict[int, int]] | None:
    """--start-offsets: JSON {"topic": {"partition": offset}}, inline or as a file path."""
    if not text:
        return None
    if not text.lstrip().startswith("{") and not Path(text).is_file():
        raise UsageError(f"--start-offsets {text}: no such file, and not inline JSON",
                         fix="give the file's path, or the offsets inline: "
                             "--start-offsets '{\"orders\": {\"0\": 1200}}'")
    raw = Path(text).read_text() if not text.lstrip().startswith("{") else text
    try:
        data = json.loads(raw)
        return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in data.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise UsageError(f"--start-offsets: {text[:80]!r} is not {{\"topic\": {{\"partition\": offset}}}} ({exc})",
                         fix='e.g. --start-offsets \'{"orders": {"0": 1200, "1": 980}}\', or a file holding '
                             "that") from None


@click.group("shadow", invoke_without_command=True)
@click.option("--plan", "plan_file", envvar="CUTOVER_PLAN", metavar="FILE", type=click.Path(dir_okay=False),
              help="The migration plan (YAML). Env: CUTOVER_PLAN.  [required]")
@_table
@click.option("--until-caught-up", is_flag=True, help="Write what the topic holds now, then exit (default).")
@click.option("--follow", is_flag=True, help="Keep writing every spark.trigger_interval until SIGINT/SIGTERM.")
@_cluster
@click.option("--start", type=click.Choice(["table", "earliest"]), default="table", show_default=True,
              help="Where to start: the offsets stamped in the table, or the earliest offsets.")
@click.option("--start-offsets", metavar="JSON|FILE",
              help='Explicit start offsets {"topic": {"partition": offset}} (e.g. translated ones at promote).')
@click.option("--on-bad-record", type=click.Choice(["dead-letter", "fail"]),
              help="Override the plan: send undecodable records to the dead-letter table, or stop.")
@click.option("--canonical", is_flag=True,
              help="Write the pair's old (canonical) table, as after promote, instead of its new table.")
@metrics_options
@output_option
@timeout_option(whole=False)
@click.pass_context
def shadow_group(ctx: click.Context, plan_file: str | None, which: str | None, until_caught_up: bool, follow: bool,
                 cluster: str, start: str,
                 start_offsets: str | None, on_bad_record: str | None, canonical: bool, metrics_port: int | None,
                 metrics_host: str | None, fmt: Format, timeout: float) -> int:
    """Write each table pair's new Iceberg table from the cluster's topics with Spark, exactly once.

    Every commit stamps the Kafka cluster id and per-partition offsets in its snapshot
    summary; a restart resumes from them, whatever happened to Spark's checkpoint.
    """
    if ctx.invoked_subcommand:
        return 0
    if not plan_file:
        raise UsageError("cutover shadow needs --plan FILE (or CUTOVER_PLAN)", fix="cutover shadow --plan plan.yaml")
    if follow and until_caught_up:
        raise UsageError("--follow and --until-caught-up contradict each other", fix="give one of them")
    mode = "follow" if follow else "until-caught-up"
    from cutover.plan import load_plan
    from cutover.shadow import job

    offsets = parse_start_offsets(start_offsets)
    plan = load_plan(plan_file)
    opts = job.Options(mode=mode, cluster=cluster, table=which, start=start,  # type: ignore[arg-type]
                       start_offsets=offsets, on_bad_record=on_bad_record,  # type: ignore[arg-type]
                       canonical=canonical, timeout=timeout,
                       metrics_at=plan.metrics_endpoint("shadow", metrics_port, metrics_host))
    with stop_on_signals() as stop:
        summary = job.run(plan, opts, stop)
    emit(summary, fmt, _render)
    return 0


def _render(s: ShadowSummary) -> str:
    lines = [f"shadow {s.mode} from the {s.cluster} cluster ({s.cluster_id}) in {s.seconds}s"]
    rows = [[t.table, t.topic, f"{t.rows:,}", f"{t.dead_letters:,}", str(t.batches),
             ", ".join(f"{p}:{o}" for p, o in sorted(t.positions.items()))] for t in s.tables]
    lines.append(table(rows, ["table", "topic", "rows", "dead letters", "batches", "positions"]))
    lines += [f"{t.table}: added column(s) {', '.join(t.added_columns)}" for t in s.tables if t.added_columns]
    return "\n".join(lines)


@shadow_group.command("status")
@plan_option
@_table
@_cluster
@output_option
@timeout_option(whole=True)
def status_cmd(plan_file: str, which: str | None, cluster: str, fmt: Format, timeout: float) -> int:
    """Per table and partition: the last committed offset, the lag behind the topic, and the last commit time."""
    from cutover.plan import load_plan
    from cutover.shadow import status

    result = status.status(load_plan(plan_file), which, cluster, timeout)  # type: ignore[arg-type]
    emit(result, fmt, status.render)
    return 0
