"""`cutover verify`: compare each pair's old and new tables; pass or fail the gates."""

from __future__ import annotations

from pathlib import Path

import click

from cutover.cli.options import output_option, plan_option, report_option, timeout_option, writing_report
from cutover.errors import DifferencesFound
from cutover.output import Format, emit, progress


@click.command("verify")
@plan_option
@click.option("--table", "which", metavar="T", help="Only the pair with this topic or table name.")
@report_option("Also write DIR/report.html (for people) and DIR/result.json.")
@click.option("--samples", "sample_size", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="Sample rows shown per kind of difference.")
@click.option("--freshness", is_flag=True,
              help="Also measure each table's record-to-commit delay, p50 and p95 (always for a table the new "
                   "cluster's platform writes): one more pass over each table.")
@output_option
@timeout_option(whole=False)
def verify_cmd(plan_file: str, which: str | None, report_dir: str | None, sample_size: int, freshness: bool,
               fmt: Format, timeout: float) -> int:
    """Reconcile old vs new tables (counts, offsets, content) and run the great-expectations suites.

    Exit 0 when every gate holds, 4 when differences exceed a gate, 1 on error. The
    result is recorded on each new table, where promote reads it.
    """
    from cutover.plan import load_plan
    from cutover.verify import report, run

    result = run.verify(load_plan(plan_file), run.Options(table=which, sample_size=sample_size, timeout=timeout,
                                                             freshness=freshness))
    if report_dir:
        with writing_report(report_dir):
            progress(f"report: {report.write(result, Path(report_dir))}")
    emit(result, fmt, report.render_text)
    if not result.passed:
        failed = [t.table for t in result.tables if not t.passed]
        raise DifferencesFound(f"verify found differences beyond the gates in {', '.join(failed)}",
                               fix="see the samples above (or --report DIR); fix the pipeline, or raise the "
                                   "gates in the plan if the differences are expected")
    return 0
