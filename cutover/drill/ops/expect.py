"""Expectations: what must hold at a point of a drill; a failed one stops it (unless --keep-going)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from cutover.drill import codec
from cutover.drill.context import Drill
from cutover.drill.ops.base import Detail, ExpectationFailed, NoArgs, deadline, need_traffic, op
from cutover.drill.ops.pipeline import freshness, run_verify
from cutover.errors import CutoverError
from cutover.plan import ClusterSide, Plan
from cutover.plan.schema import Duration


@op("expect", "verify-passed", NoArgs, lambda _a: "the last verify passed (runs it when none ran yet)")
def _verify_passed(d: Drill, _a: NoArgs) -> Detail:
    result = d.verified if d.verified is not None else run_verify(d)
    if not result.passed:
        raise ExpectationFailed("verify did not pass: " + "; ".join(
            f"{t.table}: {t.counts.as_dict()}" for t in result.tables if not t.passed))
    return {"passed": True, "tables": {t.table: t.counts.as_dict() for t in result.tables}, **freshness(result)}


@dataclass(frozen=True)
class CaughtUpArgs:
    within: Duration = Duration(120)


@op("expect", "platform-table-caught-up", CaughtUpArgs, lambda a: "each table the new cluster's platform writes holds "
    f"a row for every record of its topic there, within {a.within:.0f}s")
def _platform_caught_up(d: Drill, a: CaughtUpArgs) -> Detail:
    from cutover.switch import platform

    pairs = [p for p in d.plan.spec.tables if p.new_writer != "shadow"]
    if not pairs:
        raise CutoverError("the plan has no table the new cluster's platform writes (tables[].new_writer)")
    try:
        return {p.new: platform.caught_up_log(d.plan, p, float(a.within))["per_partition"] for p in pairs}
    except CutoverError as exc:
        raise ExpectationFailed(exc.message) from None


@dataclass(frozen=True)
class LagArgs:
    records: int = 0
    within: Duration = Duration(60)
    direction: Literal["forward", "reverse"] = "forward"


@op("expect", "lag-below", LagArgs, lambda a: f"{a.direction} mirror lag at most {a.records} within {a.within:.0f}s")
def _lag_below(d: Drill, a: LagArgs) -> Detail:
    from cutover.mirror import status

    seen: list[int] = []
    unread: list[CutoverError] = []

    def check() -> bool:
        try:  # a reading that timed out (a loaded cluster) is asked again within the window, not a failure
            seen.append(status.status(d.plan, a.direction, min(5.0, d.timeout)).lag)
        except CutoverError as exc:
            if not exc.retryable:
                raise
            unread.append(exc)
            return False
        return seen[-1] <= a.records

    try:
        deadline(a.within, f"mirror lag at most {a.records}", check, every=1.0)
    except ExpectationFailed:
        if not seen:
            raise unread[-1] from None
        last = f"last {seen[-1]}" + (f"; {len(unread)} reading(s) failed, the last: {unread[-1].message}"
                                     if unread else "")
        raise ExpectationFailed(f"mirror lag stayed above {a.records} for {a.within:.0f}s ({last})") from None
    return {"lag": seen[-1], **({"readings_failed": len(unread)} if unread else {})}


@dataclass(frozen=True)
class StoppedArgs:
    #: words the mirror's error must hold (its own wording of why it stopped)
    saying: str
    within: Duration = Duration(120)


@op("expect", "mirror-stopped", StoppedArgs, lambda a: f"the background mirror stops within {a.within:.0f}s, its "
    f"error saying '{a.saying}' (a target that refuses writes stops it, named; mirror.start resumes it)")
def _mirror_stopped(d: Drill, a: StoppedArgs) -> Detail:
    proc = d.procs.get("mirror")
    if proc is None:
        raise CutoverError("no background mirror ran (add a mirror.start step before this one)")
    try:
        deadline(a.within, "the mirror stopped", lambda: proc.poll() is not None, every=0.5)
    except ExpectationFailed:
        raise ExpectationFailed(f"the mirror still runs after {a.within:.0f}s") from None
    lines = (d.folder / "mirror.log").read_text(errors="replace").splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    error = lines[said[-1]] if said else ""
    fix = next((line.strip() for line in lines[said[-1] + 1:] if line.strip().startswith("fix: ")), None) \
        if said else None
    if a.saying not in error:
        raise ExpectationFailed(f"the mirror stopped (exit {proc.returncode}) saying {error or 'no error'!r}, not "
                                f"{a.saying!r}")
    return {"exit": proc.returncode, "error": error.removeprefix("error: "), "fix": fix}


@dataclass(frozen=True)
class ExactlyOnceArgs:
    #: where every record sent must be exactly once: a cluster's topics, the tables, or the consumer's log
    where: Literal["old", "new", "tables", "consumer"]
    #: for on: tables, which table of each pair (old: the canonical one)
    table: ClusterSide = "new"
    #: keep looking this long (a writer may still be catching up)
    within: Duration = Duration(0)


@op("expect", "exactly-once", ExactlyOnceArgs, lambda a: "every record sent is exactly once "
    + {"old": "on the old cluster", "new": "on the new cluster", "consumer": "in what the consumer processed",
       "tables": f"in the {a.table} tables"}[a.where] + ": none lost, none duplicated")
def _exactly_once(d: Drill, a: ExactlyOnceArgs) -> Detail:
    traffic = need_traffic(d)
    want = Counter((s.topic, s.seq) for s in traffic.sent)
    if a.where == "tables":
        topics = {p.topic for p in d.plan.spec.tables}
        want = Counter({k: v for k, v in want.items() if k[0] in topics})
    found: list[str] = []

    def check() -> bool:
        have = Counter({k: n for k, n in _found(d, a, traffic.topics).items() if traffic.mine(k[1])})
        lost, dup = want - have, Counter({k: n - 1 for k, n in have.items() if n > 1})
        extra = Counter({k: n for k, n in have.items() if k not in want})
        where = {(s.topic, s.seq): f"{s.cluster} {s.topic}[{s.partition}]@{s.offset}" for s in traffic.sent}
        found[:] = [f"{sum(lost.values())} records lost, {sum(dup.values())} duplicated, {sum(extra.values())} "
                    f"never sent (e.g. lost {[f'seq {k[1]} (sent to {where[k]})' for k in sorted(lost)[:3]]}, "
                    f"duplicated {sorted(dup)[:3]})"]
        return not (lost or dup or extra)

    try:
        deadline(a.within, "exactly once", check, every=2.0)
    except ExpectationFailed:
        raise ExpectationFailed(f"{a.where}: {found[0]}") from None
    return {"records": sum(want.values()), "where": a.where, **({"table": a.table} if a.where == "tables" else {})}


def _found(d: Drill, a: ExactlyOnceArgs, topics: list[str]) -> Counter[tuple[str, int]]:
    if a.where == "consumer":
        if d.consumer is None:
            raise CutoverError("no consumer ran (add a consume.start step)")
        return Counter((s.topic, s.seq) for s in d.consumer.seen)
    if a.where == "tables":
        return _table_seqs(d, a.table)
    return topic_seqs(d.plan, a.where, topics)


#: How long a check waits for the transactions open (or just committed) on the topics it reads to be decided.
DECIDED_WAIT = 60.0


def topic_seqs(plan: Plan, side: ClusterSide, topics: list[str], wait: float = DECIDED_WAIT,
               ) -> Counter[tuple[str, int]]:
    """Each sample record's (topic, seq) on a cluster, counted, once every transaction open when asked is
    decided: records a transaction is still writing (or whose commit markers are not written yet) are
    neither counted lost nor there."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import partition_counts
    from cutover.kafka.offsets import committed_records, log_offsets, undecided

    ref = ClusterRef.of(plan, side)
    counts = partition_counts(ref)
    tps = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    still = undecided(ref, tps, wait)
    if still:
        (t, p), (lso, hw) = next(iter(still.items()))
        raise ExpectationFailed(f"{side}: a transaction stayed open for {wait:.0f}s on {len(still)} "
                                f"partition(s), e.g. {t}[{p}] (offsets {lso}..{hw - 1} undecided): its records "
                                "can be counted neither lost nor there")
    starts, ends = log_offsets(ref, tps, "start"), log_offsets(ref, tps, "end")
    out: Counter[tuple[str, int]] = Counter()
    encoding = codec.for_cluster(plan, side)
    for msg in committed_records(ref, [(t, p, starts[(t, p)]) for t, p in tps], f"reading {', '.join(topics)}",
                                 group="cutover-drill-reader", until=ends):
        out[(str(msg.topic()), encoding.decode(str(msg.topic()), msg.value())["seq"])] += 1
    return out


def _table_seqs(d: Drill, side: str) -> Counter[tuple[str, int]]:
    from cutover.lake import catalog as catalog_mod

    cat = catalog_mod.load(d.plan.require_catalog("a check of the tables"))
    out: Counter[tuple[str, int]] = Counter()
    for pair in d.plan.spec.tables:
        name = pair.old if side == "old" else pair.new
        if not cat.table_exists(name):
            continue
        # the old table's topic column as its writer names it (Iceberg's sink: _kafka_metadata_topic)
        columns = pair.old_offset_columns if side == "old" else None
        topic = columns.topic if columns is not None and columns.topic else "kafka_topic"
        rows = cat.load_table(name).scan(selected_fields=(topic, "seq")).to_arrow().to_pylist()
        out.update((r[topic], r["seq"]) for r in rows)
    return out


@dataclass(frozen=True)
class WithinArgs:
    step: str
    seconds: float


@op("expect", "step-within", WithinArgs, lambda a: f"step '{a.step}' took at most {a.seconds:.0f}s")
def _step_within(d: Drill, a: WithinArgs) -> Detail:
    r = d.result(a.step)
    if r is None or r.seconds is None:
        raise ExpectationFailed(f"step '{a.step}' has not run")
    if r.seconds > a.seconds:
        raise ExpectationFailed(f"step '{a.step}' took {r.seconds:.1f}s, more than {a.seconds:.0f}s")
    return {"seconds": r.seconds}


@dataclass(frozen=True)
class ColumnsArgs:
    columns: list[str]
    table: ClusterSide = "new"


@op("expect", "table-has-columns", ColumnsArgs, lambda a: f"the {a.table} tables have column(s) "
    + ", ".join(a.columns))
def _has_columns(d: Drill, a: ColumnsArgs) -> Detail:
    from cutover.lake import tables

    found = {}
    for pair in d.plan.spec.tables:
        name = pair.old if a.table == "old" else pair.new
        _s, _c, tbl = tables.snapshots(d.plan, name)
        have = {f.name for f in tbl.schema().fields} if tbl is not None else set()
        missing = [c for c in a.columns if c not in have]
        if missing:
            raise ExpectationFailed(f"table {name} lacks column(s) {', '.join(missing)}")
        found[name] = sorted(have)
    return {"columns": found}


@dataclass(frozen=True)
class RefusedArgs:
    action: Literal["promote", "rollback"] = "promote"
    #: text the refusal must contain
    reason: str = ""
    #: the plan's switch.quiet_timeout for this attempt (how long wait-quiet waits before refusing)
    quiet_timeout: Duration | None = None


@op("expect", "switch-refused", RefusedArgs, lambda a: f"cutover {a.action} --execute is refused (exit 3)"
    + (f", naming '{a.reason}'" if a.reason else "") + ", before anything irreversible")
def _switch_refused(d: Drill, a: RefusedArgs) -> Detail:
    import dataclasses

    from cutover.errors import ExitCode
    from cutover.plan import derive
    from cutover.switch import routing, runner

    plan = d.switch_plan()
    if a.quiet_timeout is not None:
        switch = {**dataclasses.asdict(plan.spec.switch), "quiet_timeout": float(a.quiet_timeout)}
        plan = derive(plan.file, d.folder / "switch-plan-refused.yaml", switch=switch)
    before = routing.active(plan)
    try:
        runner.execute(plan, a.action, runner.Options(timeout=d.timeout))
    except CutoverError as exc:
        if exc.exit_code != ExitCode.REFUSED or a.reason not in exc.message:
            raise ExpectationFailed(f"cutover {a.action} failed, but not with the refusal expected: "
                                    f"{exc.message[:600]}") from None
        if routing.active(plan) != before:
            raise ExpectationFailed(f"cutover {a.action} was refused after it switched the clients") from None
        return {"refusal": exc.message[:1000], "fix": exc.fix}
    raise ExpectationFailed(f"cutover {a.action} went through; it should have been refused")


