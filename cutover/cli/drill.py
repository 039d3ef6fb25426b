"""`cutover drill RUNBOOK` and `cutover drill show RUNBOOK`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import click

from cutover.cli.options import (
    catalog_option,
    output_option,
    plan_option,
    platform_option,
    report_option,
    timeout_option,
)
from cutover.errors import CutoverError, UsageError
from cutover.output import Format, emit


class _RunByDefault(click.Group):
    """`cutover drill RUNBOOK ...` is `cutover drill run RUNBOOK ...`; `show` is a subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("drill", cls=_RunByDefault)
def drill_group() -> None:
    """Rehearse the migration and its failures from a runbook (runbooks/), keeping a report.

    \b
    cutover drill RUNBOOK --plan FILE [--auto] [--keep-going]
                  [--report DIR] [--param K=V]
    cutover drill show RUNBOOK
    """


def _params(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {v!r} is not KEY=VALUE", fix="e.g. --param records=500")
        out[key] = value
    return out


@drill_group.command("run")
@click.argument("runbook", type=click.Path(dir_okay=False))
@plan_option
@click.option("--auto", is_flag=True, help="Do not wait for confirmation at manual steps.")
@click.option("--keep-going", is_flag=True, help="Go on after a failed expectation (errors still stop).")
@report_option("Where to write the report.")
@click.option("--param", "params", multiple=True, metavar="K=V", help="Override a runbook parameter.")
@click.option("--dir", "sandbox_dir", type=click.Path(file_okay=False),
              help="The local sandbox's folder, if not the default.")
@output_option
@timeout_option(whole=False)
def run_cmd(runbook: str, plan_file: str, auto: bool, keep_going: bool, report_dir: str | None,
            params: tuple[str, ...], sandbox_dir: str | None, fmt: Format, timeout: float) -> int:
    """Run a runbook's steps against the plan's clusters, with live progress and a report."""
    from cutover.drill import model, runner
    from cutover.plan import load_plan

    rb = model.load(runbook, _params(params))  # a malformed runbook stops here, before anything runs
    plan = load_plan(plan_file)
    result = runner.run(rb, plan, runner.Options(auto, keep_going, Path(report_dir) if report_dir else None,
                                                 Path(sandbox_dir) if sandbox_dir else None, _confirm, timeout))
    emit(result, fmt, _render)
    if not result["passed"]:
        bad = result["failed_step"]
        raise runner.DrillFailed(f"drill {rb.name} failed" + (f" at step {bad['number']} ({bad['name']}): "
                                                              f"{bad['error']}" if bad else ""),
                                 fix="the report says what each step saw" + (
                                     f" ({result['report']})" if result.get("report") else "")
                                 + "; fix what failed, then run the drill again")
    return 0


def _confirm(question: str) -> bool:
    """The terminal's answer to a manual step; Ctrl-C or the end of input is an error of the step."""
    try:
        return bool(click.confirm(question, err=True, default=True))
    except click.Abort:
        raise CutoverError("aborted at a manual step", fix="run the drill again and answer the step, or give "
                           "--auto to take every manual step's default") from None


def _render(r: dict[str, Any]) -> str:
    lines = [f"drill {r['runbook']}: {'PASSED' if r['passed'] else 'FAILED'}"]
    lines += [f"  {s['number']:2}. {s['outcome']:7} {s['name']}" + (f" ({s['seconds']:.1f}s)" if s["seconds"] else "")
              + (f": {s['error']}" if s["error"] else "") for s in r["steps"]]
    lines += [f"  {s['number']:2}. not run {s['name']}" for s in r["not_run"]]
    return "\n".join(lines)


@drill_group.command("show")
@click.argument("runbook", type=click.Path(dir_okay=False))
@click.option("--param", "params", multiple=True, metavar="K=V", help="Override a runbook parameter.")
def show_cmd(runbook: str, params: tuple[str, ...]) -> int:
    """Render a runbook as readable Markdown (validating it on the way)."""
    from cutover.drill import model, show

    click.echo(show.markdown(model.load(runbook, _params(params))), nl=False)
    return 0


@click.command("demo")
@click.option("--dir", "sandbox_dir", type=click.Path(file_okay=False),
              help="The sandbox's folder (default ~/.cutover/sandbox, or CUTOVER_SANDBOX).")
@click.option("--rate", type=click.IntRange(1, 5000), default=100, show_default=True,
              help="Sample records per second.")
@click.option("--records", type=click.IntRange(10), default=500, show_default=True,
              help="Records to wait for in each of the four traffic phases (old cluster, new, old again, new "
              "again). The producer runs at --rate throughout, so the summary's total is higher.")
@click.option("--old-pipeline", type=click.Choice(["sink", "stand-in"]), default=None,
              help="What writes the old tables: Apache Iceberg's Kafka Connect sink (a Connect worker in the "
              "sandbox; promote and rollback hand the same connector over; the default), or cutover's own Spark "
              "job (the stand-in; the only one with --platform new=tansu).")
@platform_option("new=tansu: the pilot of a platform that writes its own Iceberg tables. The new cluster runs on "
                 "Tansu (built once per machine by scripts/tansu) writing each topic into a table of the REST catalog; "
                 "runs runbooks/platform-table-pilot.yaml: the old pipeline's tables beside Tansu's, compared with "
                 "their freshness, promote handing the name over to Tansu's, rollback back.")
@click.option("--format", "value_format", type=click.Choice(["json", "avro"]), default="json", show_default=True,
              help="The records' values: JSON, or Avro in the Confluent wire format with a schema registry per "
              "cluster (the sandbox's, started if needed), moved with its ids at promote and back at rollback.")
@catalog_option
@output_option
@timeout_option(whole=False)
def demo_cmd(sandbox_dir: str | None, rate: int, records: int, old_pipeline: str | None, platforms: dict[str, str],
             value_format: str, catalog: str | None, fmt: Format, timeout: float) -> int:
    """The whole migration on the local sandbox: traffic, mirror, shadow, verify, promote, rollback.

    Brings the sandbox up, runs runbooks/full-migration.yaml with --auto on a fresh demo plan,
    and ends with a summary and the path of the drill report. The sandbox keeps running.
    """
    from cutover.drill import demo, runner

    platform = demo.platform_of(platforms, old_pipeline, value_format, catalog)
    summary = demo.run(Path(sandbox_dir) if sandbox_dir else None, rate, records, catalog, timeout,
                       cast(demo.OldPipeline, old_pipeline or "sink"), value_format, platform)
    emit(summary, fmt, demo.render)
    if not summary["passed"]:
        raise runner.DrillFailed(f"the demo failed; the report says where: {summary['report']}",
                                 fix="read the failed step in the report; cutover local status shows the sandbox, "
                                     "cutover local down --purge starts the next demo afresh")
    return 0
