"""Pipeline ops: the mirror, the shadow, the old pipeline's stand-in, verify, replay, promote and rollback."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cutover import process
from cutover.drill.context import Drill
from cutover.drill.ops.base import Detail, NoArgs, op
from cutover.plan import ClusterSide, TablePair
from cutover.plan.schema import Duration
from cutover.verify.results import VerifyResult


@op("action", "mirror.start", NoArgs, lambda _a: "start cutover mirror in the background (unless it runs); wait "
    "until it is copying")
def _mirror_start(d: Drill, _a: NoArgs) -> Detail:
    ready = d.folder / "mirror.ready"
    ready.unlink(missing_ok=True)
    return _start(d, "mirror", ["--ready-file", str(ready)], ready.exists, 120, "the background mirror")


def _start(d: Drill, name: Literal["mirror", "shadow"], args: list[str], ready: Callable[[], bool],
           timeout: float, what: str, every: float = 0.2) -> Detail:
    """Start `cutover NAME` in the background unless it runs, and wait until `ready()`."""
    running = d.running(name)
    if running is not None:
        return {"pid": running, "already_running": True}
    proc = d.spawn(name, name, "--plan", str(d.plan.file), *args)
    process.wait_ready(proc, ready, d.folder / f"{name}.log", timeout, what, every=every)
    return {"pid": proc.pid}


@op("action", "mirror.catch-up", NoArgs, lambda _a: "run the mirror until it has copied what the source holds now")
def _mirror_catch_up(d: Drill, _a: NoArgs) -> Detail:
    from cutover.mirror import runner

    s = runner.run(d.plan, runner.Options(until_caught_up=True, timeout=d.timeout), threading.Event())
    return {"records": s.records, "gaps": s.as_dict()["gaps"]}


@op("action", "mirror.stop", NoArgs, lambda _a: "stop the background mirror (SIGTERM: it finishes its transaction)")
def _mirror_stop(d: Drill, _a: NoArgs) -> Detail:
    import signal

    return {"exit": d.kill("mirror", signal.SIGTERM)}


@dataclass(frozen=True)
class ShadowArgs:
    cluster: ClusterSide = "new"
    canonical: bool = False
    table: str | None = None


@op("action", "shadow.run", ShadowArgs, lambda a: f"write the {'canonical' if a.canonical else 'new'} table(s) "
    f"from the {a.cluster} cluster until caught up")
def _shadow_run(d: Drill, a: ShadowArgs) -> Detail:
    from cutover.shadow import job

    opts = job.Options(cluster=a.cluster, table=a.table, canonical=a.canonical, timeout=d.timeout,
                       metrics=d.shadow_metrics)
    s = job.run(d.plan, opts, threading.Event())
    return {"tables": {t.table: t.rows for t in s.tables}}


@dataclass(frozen=True)
class LegacyArgs:
    #: the cluster the old pipeline reads: old, or new once promote has handed its tables over
    cluster: ClusterSide = "old"
    #: how long the old pipeline may take to catch up
    within: Duration = Duration(300)


@op("action", "legacy.run", LegacyArgs, lambda a: f"the old pipeline writes each old (canonical) table from the "
    f"{a.cluster} cluster until caught up: Iceberg's Kafka Connect sink for the tables whose writer_offsets is "
    "iceberg-connect (started on the sandbox's Connect worker, and left running), else its stand-in, cutover's "
    "Spark job")
def _legacy_run(d: Drill, a: LegacyArgs) -> Detail:
    from cutover.drill import sink
    from cutover.errors import CutoverError

    detail: Detail = {"tables": {}}
    sinks = sink.pairs(d.plan)
    if sinks:
        if d.sandbox is None:
            raise CutoverError("the drill runs Iceberg's Kafka Connect sink on the local sandbox only; on another "
                               "environment the connector is yours: run the steps the README's \"Moving an Iceberg "
                               "Kafka Connect sink\" gives")
        detail["connectors"] = sink.run(d.sandbox, d.plan, a.cluster, d.timeout)
        detail["tables"].update(sink.caught_up(d.plan, a.cluster, d.timeout, a.within))
    others = [p for p in d.plan.spec.tables if p not in sinks]
    for which in ([None] if len(others) == len(d.plan.spec.tables) else [p.old for p in others]):
        detail["tables"].update(_stand_in(d, which, a.cluster))
    return detail


def _stand_in(d: Drill, which: str | None, cluster: ClusterSide) -> dict[str, int]:
    """The old pipeline's stand-in writes the old table of pair `which` (None: every pair) from
    `cluster` until caught up: cutover's Spark job, each table created on its first run. On the new
    cluster (after promote) that is cutover shadow --canonical, the writer of a handed-over table."""
    from cutover.errors import CutoverError
    from cutover.lake import tables
    from cutover.plan import select_pairs
    from cutover.shadow import job

    made = all(tables.exists(d.plan, p.old) for p in select_pairs(d.plan, which))
    if cluster == "new" and not made:
        raise CutoverError("the old pipeline writes its tables from the old cluster first (a legacy.run step "
                           "before promote)")
    plan = d.plan if made else _legacy_plan(d)
    s = job.run(plan, job.Options(cluster=cluster, table=which, canonical=made, timeout=d.timeout),
                threading.Event())
    return {t.table: t.rows for t in s.tables}


def _legacy_plan(d: Drill) -> Any:
    from cutover.plan import derive

    return derive(d.plan.file, d.folder / "legacy-plan.yaml", tables=[
        {**_pair(p), "new": p.old, "old": p.old + "_standin_unused", "new_writer": "shadow"}
        for p in d.plan.spec.tables])


def _pair(pair: Any) -> dict[str, Any]:
    """A table pair as plan YAML (unset keys left out)."""
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(pair).items() if v is not None}


@op("action", "shadow.start", NoArgs, lambda _a: "start cutover shadow --follow in the background (unless it "
    "runs); wait for its first commit")
def _shadow_start(d: Drill, _a: NoArgs) -> Detail:
    from cutover.lake import tables

    def heads() -> list[Any]:
        return [tables.table_offsets(d.plan, p.new).snapshot_id if tables.exists(d.plan, p.new) else None
                for p in d.plan.spec.tables]

    before = heads() if d.running("shadow") is None else []
    return _start(d, "shadow", ["--follow"],
                  lambda: all(h is not None and h != b for h, b in zip(heads(), before, strict=True)), 300,
                  "the background shadow job (until its first commit)", every=1.0)


@dataclass(frozen=True)
class MaintainArgs:
    #: Which table of each pair: the new (shadow) table, or the old one.
    table: Literal["new", "old"] = "new"
    #: Files no snapshot names are removed only when older than this (longer than any write in flight).
    orphan_age: Duration = Duration(3 * 86400)  # Iceberg's default; at least 24h


@op("action", "table.maintain", MaintainArgs, lambda a: f"maintain each {a.table} table as a lake team would: "
    f"compact every file, expire all but the newest snapshot, remove orphan files older than {a.orphan_age:.0f}s")
def _maintain(d: Drill, a: MaintainArgs) -> Detail:
    from cutover.lake import maintenance
    from cutover.lake import spark as spark_mod

    spark = spark_mod.session(d.plan, "cutover-drill-maintenance")
    done = [maintenance.maintain(spark, d.plan, p.new if a.table == "new" else p.old, a.orphan_age)
            for p in d.plan.spec.tables]
    return {"tables": done}


@op("action", "shadow.stop", NoArgs, lambda _a: "stop the background shadow job (SIGTERM: it finishes its batch)")
def _shadow_stop(d: Drill, _a: NoArgs) -> Detail:
    import signal

    return {"exit": d.kill("shadow", signal.SIGTERM, timeout=180)}


@op("action", "verify", NoArgs, lambda _a: "run cutover verify (the result is kept for the expectations)")
def _verify(d: Drill, _a: NoArgs) -> Detail:
    result = run_verify(d)
    return {"passed": result.passed, "tables": {t.table: t.counts.as_dict() for t in result.tables},
            **freshness(result)}


def freshness(result: VerifyResult) -> Detail:
    """Each table's freshness (record to visible row, p50/p95 per side) where verify measured it."""
    found = {t.table: t.freshness for t in result.tables if t.freshness is not None}
    return {"freshness": found} if found else {}


def run_verify(d: Drill) -> VerifyResult:
    """Verify the plan's tables now; the result is kept for the expectations."""
    from cutover.verify import run as verify_run

    d.verified = verify_run.verify(d.plan, verify_run.Options(timeout=d.timeout))
    return d.verified


def _switch(d: Drill, action: Literal["promote", "rollback"]) -> Detail:
    from cutover.switch import runner

    result = runner.execute(d.switch_plan(), action, runner.Options(timeout=d.timeout))
    frozen = result.freeze_window
    return {"phase": result.phase, "freeze_window": frozen.as_dict() if frozen else None,
            "carried_back": result.carried_back}


@op("action", "promote", NoArgs, lambda _a: "cutover promote --execute (the drill's hooks freeze its traffic)")
def _promote(d: Drill, _a: NoArgs) -> Detail:
    return _switch(d, "promote")


@op("action", "rollback", NoArgs, lambda _a: "cutover rollback --execute")
def _rollback(d: Drill, _a: NoArgs) -> Detail:
    return _switch(d, "rollback")


@op("action", "complete", NoArgs, lambda _a: "cutover complete --execute: a final verify, both mirrors retired, "
    "their state and the shadow's leftovers removed as the plan says; the journal archived")
def _complete(d: Drill, _a: NoArgs) -> Detail:
    from cutover.switch import runner

    result = runner.execute(d.switch_plan(), "complete", runner.Options(timeout=d.timeout))
    return {"phase": result.phase, "removed": [f"{i['kind']} {i['name']}" for i in result.summary["removed"]],
            "kept": [f"{i['kind']} {i['name']}: {i['note']}" for i in result.summary["kept"]],
            "record": result.summary["record"]}


@dataclass(frozen=True)
class ReplayArgs:
    #: the cluster whose retained topic the table is rebuilt from
    cluster: ClusterSide = "old"


@op("action", "replay", ReplayArgs, lambda a: f"rebuild each new table from the {a.cluster} cluster's retained "
    "topic, from its first offsets, into a scratch table (<table>_replay; for a table the platform writes, <old "
    "table>_replay), and verify the rebuild against the live table")
def _replay(d: Drill, a: ReplayArgs) -> Detail:
    from cutover.plan import derive
    from cutover.shadow import job
    from cutover.verify import run as verify_run

    def scratch(p: TablePair) -> str:  # never in the platform's own namespace: cutover does not write there
        return (p.new if p.new_writer == "shadow" else p.old) + "_replay"

    columns = {"partition": "kafka_partition", "offset": "kafka_offset"}
    compare = derive(d.plan.file, d.folder / "replay-plan.yaml", tables=[
        {**_pair(p), "old": scratch(p), "old_offset_columns": columns, "checks": []}
        for p in d.plan.spec.tables])
    build = derive(d.plan.file, d.folder / "replay-build.yaml", tables=[
        {**_pair(p), "new": scratch(p), "old": scratch(p) + "_unused", "new_writer": "shadow"}
        for p in d.plan.spec.tables])
    rebuilt = job.run(build, job.Options(cluster=a.cluster, start="earliest", timeout=d.timeout), threading.Event())
    result = verify_run.verify(compare, verify_run.Options(timeout=d.timeout))
    d.verified = result
    return {"rebuilt": {t.table: t.rows for t in rebuilt.tables}, "verify_passed": result.passed,
            "tables": {t.table: t.counts.as_dict() for t in result.tables}}
