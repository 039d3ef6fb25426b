"""`cutover readers`: readers that keep their Kafka positions outside consumer groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cutover.cli.options import output_option, plan_option, timeout_option
from cutover.errors import ExitCode, UsageError
from cutover.output import Format, emit

if TYPE_CHECKING:
    from cutover.readers.find import Found


@click.group("readers")
def readers_group() -> None:
    """Readers whose positions live outside consumer groups (Spark, Kafka Streams, Flink), moved exactly."""


def _render(r: dict[str, Any]) -> str:
    head = f"reader {r['reader']} ({r['kind']}, {r['direction']})"
    if r.get("already_moved"):
        return f"{head}: already moved to the target cluster by its last recorded move; nothing to do"
    from cutover.readers import translate

    return translate.kind(r["kind"]).moved_text(head, r)


def _render_found(r: Found) -> str:
    head = (f"old cluster: {r.topics} topics, {r.groups} groups; readers the plan declares: "
            f"{', '.join(r.declared) or 'none'}")
    if not r.findings:
        return head + "\nnothing suggests a reader that keeps its positions outside consumer groups"
    lines = [head]
    for f in r.findings:
        lines += [f"{f.kind}: {f.name}", f"  evidence: {f.evidence}", f"  what to do: {f.what_to_do}"]
    return "\n".join(lines)


@readers_group.command("find")
@plan_option
@output_option
@timeout_option(whole=True)
def find_cmd(plan_file: str, fmt: Format, timeout: float) -> int:
    """List what on the old cluster suggests a reader that keeps its positions outside groups.

    Spark's Kafka source groups without commits, Kafka Streams internal topics, Kafka Connect's
    internal topics, and groups reading selected topics without commits on them: each with its
    evidence and what to do. Exit 0 when nothing is found, 4 when something is.
    """
    from cutover.plan import load_plan
    from cutover.readers import find

    result = find.find(load_plan(plan_file), timeout)
    emit(result, fmt, _render_found)
    return int(ExitCode.DIFFERENCES) if result.findings else 0


@readers_group.command("translate")
@plan_option
@click.option("--reader", "name", required=True, metavar="NAME", help="The reader, by its name in the plan.")
@click.option("--dry-run", is_flag=True, help="Show the positions before and after; write nothing.")
@click.option("--execute", is_flag=True, help="Write the move: the translated batch, or the translated state files.")
@click.option("--starting-offsets", is_flag=True,
              help="Print the translated positions as Spark's startingOffsets JSON, for a new checkpoint.")
@click.option("--reverse", is_flag=True, help="New to old (for rollback) instead of old to new.")
@output_option
@timeout_option(whole=True)
def translate_cmd(plan_file: str, name: str, dry_run: bool, execute: bool, starting_offsets: bool, reverse: bool,
                  fmt: Format, timeout: float) -> int:
    """Move a stopped reader to the other cluster at exactly the next record.

    A Spark checkpoint: the last committed batch's Kafka positions are translated through the
    mirror's offset map and written as the next batch (offsets/N+1 and commits/N+1, Spark's own
    format; other sources keep theirs), so the query resumes on the other cluster at the record
    after the last one it wrote. Existing files are never changed.

    A Flink job (stopped with a savepoint into the reader's savepoints folder): its KafkaSource's
    splits are read from the newest savepoint, translated, and written as the start file the job's
    restart reads (savepoint, new source uid, offsets for OffsetsInitializer.offsets(map,
    OffsetResetStrategy.NONE)); with start: committed they are also committed to its group.

    Kafka Connect source connectors (stopped): their offsets in the workers' offsets topic must be
    the same on both clusters (the mirror copies it); recorded, so the switch checks them on the
    target's worker (KIP-875) once it runs.

    A Kafka Streams application (stopped cleanly): with state: rewrite, each task's .checkpoint and
    each store's .position is translated, so the stores carry on without restoring; with state: wipe,
    the task folders are set aside (renamed) and the stores restore from the other cluster. Its
    input positions are its group's, which `cutover mirror` syncs.

    Every execution is recorded in the plan's journal folder (readers.jsonl) and is never done twice.
    Before writing, the canary reads the next record of each partition on both clusters: they must
    be the same record. Refused (exit 3), with nothing written, when the reader runs or was not
    stopped cleanly, a partition has no mapping yet, or the canary finds a difference.
    """
    from cutover.plan import load_plan
    from cutover.readers import translate

    chosen: tuple[tuple[translate.Mode, bool], ...] = (("dry-run", dry_run), ("execute", execute),
                                                       ("starting-offsets", starting_offsets))
    modes = [m for m, on in chosen if on]
    if len(modes) != 1:
        raise UsageError("readers translate needs exactly one of --dry-run, --execute or --starting-offsets"
                         + (f" (got {', '.join('--' + m for m in modes)})" if modes else ""),
                         fix="look first with --dry-run, then write with --execute")
    from cutover.readers.mapping import CanaryRefused

    plan = load_plan(plan_file)
    if reverse:  # new -> old only after a promote (mirror/direction.py); also after the rollback, which may come
        from cutover.mirror import direction  # first by hand (docs/how-to/readers.md); forward any time

        direction.chosen(plan, True, "readers translate", False, timeout)
    try:
        result = translate.move(plan, translate.reader(plan, name), "reverse" if reverse else "forward", modes[0],
                                timeout)
    except CanaryRefused as exc:  # nothing written: JSON still gets every partition's verdict, as --dry-run's
        if fmt is Format.JSON:     # (the text's error names each partition that differs)
            emit(exc.result, fmt, _render)
        raise
    emit(result, fmt, _render)
    return int(ExitCode.REFUSED) if any(not c["same"] for c in result.get("canary", [])) else 0
