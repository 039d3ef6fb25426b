"""`cutover assess`: the readiness scorecard, from the live clusters, tables and cutover's own results."""

from __future__ import annotations

from pathlib import Path

import click

from cutover.cli.options import Seconds, output_option, plan_option, report_option, timeout_option, writing_report
from cutover.errors import ExitCode
from cutover.output import Format, emit, progress


@click.command("assess")
@plan_option
@report_option("Also write DIR/assessment.html (for people) and DIR/assessment.json.")
@click.option("--sample", type=Seconds(least=0, most=600), default=5.0, show_default=True, metavar="SECONDS",
              help="How long the produce rate is measured (0: only from the retained records' timestamps). "
              "Seconds, or a duration (30s, 5m).")
@click.option("--probe", type=Seconds(least=0, most=600), default=3.0, show_default=True, metavar="SECONDS",
              help="How long the read probe that sizes the backfill reads. Seconds, or a duration (30s, 5m).")
@output_option
@timeout_option(whole=False)
def assess_cmd(plan_file: str, report_dir: str | None, sample: float, probe: float, fmt: Format,
               timeout: float) -> int:
    """Score the migration's readiness from evidence: the seven questions and the readiness table.

    Read-only. Each row is ready, risk, blocker or unknown (with the reason), with its evidence and the
    drill that tests it. Exit 0 when nothing is a blocker, 3 otherwise.
    """
    from cutover.assess import gather, report
    from cutover.plan import load_plan

    result = gather.assess(load_plan(plan_file), timeout, sample, probe)
    if report_dir:
        with writing_report(report_dir):
            progress(f"report: {report.write(Path(report_dir), result)}")
    emit(result, fmt, report.text)
    return int(ExitCode.REFUSED) if result.blockers else 0
