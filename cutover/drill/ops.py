"""Every action, fault and expectation a runbook can name: typed arguments, what it says, what it does.

Faults that need control of the local sandbox (stopping a broker, locking the catalog)
are marked `sandbox`; against any other plan the runner turns them into manual
instructions, so one runbook also guides a real staging drill.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cutover.drill.context import Drill
from cutover.errors import CutoverError
from cutover.plan import ClusterSide
from cutover.plan.schema import Duration

Detail = dict[str, Any]


class ExpectationFailed(CutoverError):
    """A runbook expectation did not hold."""


@dataclass(frozen=True)
class Op:
    kind: str
    name: str
    args: type
    run: Callable[[Drill, Any], Detail]
    says: Callable[[Any], str]
    #: Needs control of the local sandbox; a manual instruction elsewhere.
    sandbox: bool = False


OPS: dict[tuple[str, str], Op] = {}


def op(kind: str, name: str, args: type, says: Callable[[Any], str], sandbox: bool = False) -> Callable[
        [Callable[[Drill, Any], Detail]], Callable[[Drill, Any], Detail]]:
    def register(fn: Callable[[Drill, Any], Detail]) -> Callable[[Drill, Any], Detail]:
        OPS[(kind, name)] = Op(kind, name, args, fn, says, sandbox)
        return fn
    return register


@dataclass(frozen=True)
class NoArgs:
    pass


def _deadline(seconds: float, what: str, check: Callable[[], Any], every: float = 0.5) -> Any:
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise ExpectationFailed(f"{what}: not within {seconds:.0f}s")
        time.sleep(every)


# ---------------------------------------------------------------- traffic


@dataclass(frozen=True)
class TrafficArgs:
    #: default: the topics of the plan's table pairs
    topics: list[str] | None = None
    #: records per second, about
    rate: float = 100.0
    transactions: bool = True
    #: partitions of the topics it creates when they do not exist
    partitions: int = 3


def _topics(d: Drill, given: list[str] | None) -> list[str]:
    topics = given or [p.topic for p in d.plan.spec.tables]
    if not topics:
        raise CutoverError("the plan has no table pairs to take topics from; name them: with: {topics: [...]}")
    return topics


@op("action", "traffic.start", TrafficArgs,
    lambda a: f"start sample orders/payments traffic (about {a.rate:.0f} records/s"
              f"{', with transactions' if a.transactions else ''}) on the active cluster")
def _traffic_start(d: Drill, a: TrafficArgs) -> Detail:
    from cutover.drill.traffic import Traffic

    topics = _topics(d, a.topics)
    if d.traffic is None:
        _create_topics(d, topics, a.partitions)
        d.traffic = Traffic(d.switch_plan(), d.ctl, topics, a.rate, a.transactions)
        d.traffic.start()
    return {"topics": topics, "rate": a.rate}


def _create_topics(d: Drill, topics: list[str], partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    from cutover.kafka.clients import ClusterRef, admin
    from cutover.kafka.offsets import wait_all
    from cutover.switch import routing

    side = routing.active(d.switch_plan())
    ref = ClusterRef.of(d.plan, side)
    client = admin(ref)
    have = client.list_topics(timeout=30).topics
    new = [NewTopic(t, partitions, 1 if d.sandbox else -1) for t in topics if t not in have]
    if new:
        wait_all(ref, client, client.create_topics(new), "creating the drill's topics", 30)


@dataclass(frozen=True)
class WaitArgs:
    records: int
    within: Duration = Duration(120)


@op("action", "traffic.wait", WaitArgs, lambda a: f"let {a.records} more records be produced")
def _traffic_wait(d: Drill, a: WaitArgs) -> Detail:
    traffic = _need_traffic(d)
    start = traffic.count()
    _deadline(a.within, f"{a.records} more records produced", lambda: traffic.count() - start >= a.records)
    return {"produced": traffic.count()}


@op("action", "traffic.stop", NoArgs, lambda _a: "stop the sample traffic; let the consumer finish what was sent")
def _traffic_stop(d: Drill, _a: NoArgs) -> Detail:
    traffic = _need_traffic(d)
    traffic.stop()
    if d.consumer is not None:
        consumer = d.consumer
        _deadline(120, "the consumer to process every record sent",
                  lambda: {(s.topic, s.seq) for s in consumer.seen} >= {(s.topic, s.seq) for s in traffic.sent})
    if traffic.errors:
        raise CutoverError(f"the sample producer reported: {traffic.errors[0]}")
    return {"produced": traffic.count(), "consumed": d.consumer.count() if d.consumer else None}


def _need_traffic(d: Drill) -> Any:
    if d.traffic is None:
        raise CutoverError("no sample traffic is running (add a traffic.start step before this one)")
    return d.traffic


@dataclass(frozen=True)
class ConsumeArgs:
    group: str
    topics: list[str] | None = None


@op("action", "consume.start", ConsumeArgs, lambda a: f"consume the traffic as group {a.group}, committing each "
    "record")
def _consume_start(d: Drill, a: ConsumeArgs) -> Detail:
    from cutover.drill.traffic import GroupConsumer

    if not d.plan.spec.groups.matches(a.group):
        raise CutoverError(f"consumer group {a.group} is not selected by the plan's groups, so no switch would move "
                           "it", fix="pass --param group=NAME with a group the plan's groups.include selects")
    if d.consumer is None:
        d.consumer = GroupConsumer(d.switch_plan(), d.ctl, _topics(d, a.topics), a.group)
        d.consumer.start()
    return {"group": a.group}


@op("fault", "writer.pause", NoArgs, lambda _a: "pause the producer (as a stuck writer would)")
def _writer_pause(d: Drill, _a: NoArgs) -> Detail:
    _need_traffic(d)
    (d.ctl / "pause").touch()
    _deadline(60, "the producer to pause", lambda: (d.ctl / "producer.paused").exists())
    return {}


@op("fault", "writer.resume", NoArgs, lambda _a: "resume the producer")
def _writer_resume(d: Drill, _a: NoArgs) -> Detail:
    (d.ctl / "pause").unlink(missing_ok=True)
    return {}


@op("fault", "schema.change", NoArgs, lambda _a: "change the order events' schema mid-stream (a new field)")
def _schema_change(d: Drill, _a: NoArgs) -> Detail:
    _need_traffic(d).version = 2
    return {"version": 2, "new_field": "channel"}


# ---------------------------------------------------------------- mirror, shadow, verify, switch


@op("action", "mirror.start", NoArgs, lambda _a: "start cutover mirror in the background (unless it runs); wait "
    "until it is copying")
def _mirror_start(d: Drill, _a: NoArgs) -> Detail:
    running = d.running("mirror")
    if running is not None:
        return {"pid": running, "already_running": True}
    ready = d.folder / "mirror.ready"
    ready.unlink(missing_ok=True)
    proc = d.spawn("mirror", "mirror", "--plan", str(d.plan.file), "--ready-file", str(ready))
    _deadline(120, "the mirror to start copying", lambda: ready.exists() or _died(proc, d.folder / "mirror.log"))
    return {"pid": proc.pid}


def _died(proc: Any, log: Any) -> bool:
    if proc.poll() is None:
        return False
    tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
    raise CutoverError(f"the background process exited ({proc.returncode}); its log {log} ends: " + " | ".join(tail))


@op("action", "mirror.catch-up", NoArgs, lambda _a: "run the mirror until it has copied what the source holds now")
def _mirror_catch_up(d: Drill, _a: NoArgs) -> Detail:
    from cutover.mirror import runner

    s = runner.run(d.plan, runner.Options(until_caught_up=True), threading.Event())
    return {"records": s.records, "gaps": s.as_dict()["gaps"]}


@op("action", "mirror.stop", NoArgs, lambda _a: "stop the background mirror (SIGTERM: it finishes its transaction)")
def _mirror_stop(d: Drill, _a: NoArgs) -> Detail:
    import signal

    return {"exit": d.kill("mirror", signal.SIGTERM)}


@op("fault", "mirror.kill", NoArgs, lambda _a: "SIGKILL the background mirror")
def _mirror_kill(d: Drill, _a: NoArgs) -> Detail:
    if "mirror" not in d.procs:
        raise CutoverError("no background mirror is running (add a mirror.start step before this one)")
    return {"exit": d.kill("mirror")}


@dataclass(frozen=True)
class ShadowArgs:
    cluster: ClusterSide = "new"
    canonical: bool = False
    table: str | None = None


@op("action", "shadow.run", ShadowArgs, lambda a: f"write the {'canonical' if a.canonical else 'new'} table(s) "
    f"from the {a.cluster} cluster until caught up")
def _shadow_run(d: Drill, a: ShadowArgs) -> Detail:
    from cutover.shadow import job

    s = job.run(d.plan, job.Options(cluster=a.cluster, table=a.table, canonical=a.canonical), threading.Event())
    return {"tables": {t.table: t.rows for t in s.tables}}


@op("action", "legacy.run", NoArgs, lambda _a: "run the old pipeline's stand-in: write each old table from the "
    "old cluster until caught up")
def _legacy_run(d: Drill, _a: NoArgs) -> Detail:
    from cutover.lake import tables
    from cutover.shadow import job

    if all(tables.exists(d.plan, p.old) for p in d.plan.spec.tables):
        s = job.run(d.plan, job.Options(cluster="old", canonical=True), threading.Event())
    else:
        s = job.run(_legacy_plan(d), job.Options(cluster="old"), threading.Event())
    return {"tables": {t.table: t.rows for t in s.tables}}


def _legacy_plan(d: Drill) -> Any:
    from cutover.plan import derive

    return derive(d.plan.file, d.folder / "legacy-plan.yaml", tables=[
        {**_pair(p), "new": p.old, "old": p.old + "_standin_unused"} for p in d.plan.spec.tables])


def _pair(pair: Any) -> dict[str, Any]:
    """A table pair as plan YAML (unset keys left out)."""
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(pair).items() if v is not None}


@op("fault", "shadow.kill", NoArgs, lambda _a: "SIGKILL the background shadow job (driver and JVM)")
def _shadow_kill(d: Drill, _a: NoArgs) -> Detail:
    if "shadow" not in d.procs:
        raise CutoverError("no background shadow job is running (add a shadow.start step before this one)")
    return {"exit": d.kill("shadow")}


@op("action", "shadow.start", NoArgs, lambda _a: "start cutover shadow --follow in the background (unless it "
    "runs); wait for its first commit")
def _shadow_start(d: Drill, _a: NoArgs) -> Detail:
    from cutover.lake import tables

    running = d.running("shadow")
    if running is not None:
        return {"pid": running, "already_running": True}

    def heads() -> list[Any]:
        return [tables.table_offsets(d.plan, p.new).snapshot_id if tables.exists(d.plan, p.new) else None
                for p in d.plan.spec.tables]

    before = heads()
    proc = d.spawn("shadow", "shadow", "--plan", str(d.plan.file), "--follow")
    _deadline(300, "the shadow job's first commit", lambda: _died(proc, d.folder / "shadow.log") or all(
        h is not None and h != b for h, b in zip(heads(), before, strict=True)), every=1.0)
    return {"pid": proc.pid}


@op("action", "shadow.stop", NoArgs, lambda _a: "stop the background shadow job (SIGTERM: it finishes its batch)")
def _shadow_stop(d: Drill, _a: NoArgs) -> Detail:
    import signal

    return {"exit": d.kill("shadow", signal.SIGTERM, timeout=180)}


@op("action", "verify", NoArgs, lambda _a: "run cutover verify (the result is kept for the expectations)")
def _verify(d: Drill, _a: NoArgs) -> Detail:
    from cutover.verify import run as verify_run

    result = verify_run.verify(d.plan, verify_run.Options())
    d.verified = result
    return {"passed": result.passed, "tables": {t.table: t.counts.as_dict() for t in result.tables}}


def _switch(d: Drill, action: Literal["promote", "rollback"]) -> Detail:
    from cutover.switch import runner

    result = runner.execute(d.switch_plan(), action, runner.Options())
    frozen = result.freeze_window
    return {"phase": result.phase, "freeze_window": frozen.as_dict() if frozen else None,
            "carried_back": result.carried_back}


@op("action", "promote", NoArgs, lambda _a: "cutover promote --execute (the drill's hooks freeze its traffic)")
def _promote(d: Drill, _a: NoArgs) -> Detail:
    return _switch(d, "promote")


@op("action", "rollback", NoArgs, lambda _a: "cutover rollback --execute")
def _rollback(d: Drill, _a: NoArgs) -> Detail:
    return _switch(d, "rollback")


@dataclass(frozen=True)
class ReplayArgs:
    #: the cluster whose retained topic the table is rebuilt from
    cluster: ClusterSide = "old"


@op("action", "replay", ReplayArgs, lambda a: f"rebuild each new table from the {a.cluster} cluster's retained "
    "topic into <table>_replay, and verify the rebuild against the live table")
def _replay(d: Drill, a: ReplayArgs) -> Detail:
    from cutover.plan import derive
    from cutover.shadow import job
    from cutover.verify import run as verify_run

    columns = {"partition": "kafka_partition", "offset": "kafka_offset"}
    compare = derive(d.plan.file, d.folder / "replay-plan.yaml", tables=[
        {**_pair(p), "old": p.new + "_replay", "old_offset_columns": columns, "checks": []}
        for p in d.plan.spec.tables])
    build = derive(d.plan.file, d.folder / "replay-build.yaml", tables=[
        {**_pair(p), "new": p.new + "_replay", "old": p.new + "_replay_unused"} for p in d.plan.spec.tables])
    rebuilt = job.run(build, job.Options(cluster=a.cluster, start="earliest"), threading.Event())
    result = verify_run.verify(compare, verify_run.Options())
    d.verified = result
    return {"rebuilt": {t.table: t.rows for t in rebuilt.tables}, "verify_passed": result.passed}


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


# ---------------------------------------------------------------- switch faults


@dataclass(frozen=True)
class OpenTxnArgs:
    #: default: the first table pair's topic
    topic: str | None = None
    partition: int = 0
    records: int = 3
    #: what the application does next: nothing until a transaction.resolve step ("never"), or commit or
    #: abort once a promote or rollback has been waiting for it longer than the quiet period
    resolve: Literal["never", "commit", "abort"] = "never"


@op("fault", "transaction.open", OpenTxnArgs, lambda a: "an exactly-once application pauses in the middle of a "
    f"transaction on the active cluster ({a.records} records written, not committed"
    + (")" if a.resolve == "never" else f"; it will {a.resolve} while the switch waits)"))
def _transaction_open(d: Drill, a: OpenTxnArgs) -> Detail:
    from confluent_kafka import Producer

    from cutover.drill.traffic import event
    from cutover.switch import routing

    plan = d.switch_plan()
    side = routing.active(plan)
    topic = a.topic or _topics(d, None)[0]
    producer = Producer({**plan.cluster(side), "transactional.id": f"cutover-drill-eos-{plan.name}",
                         "transaction.timeout.ms": 900_000})  # Kafka must not abort it during the drill
    producer.init_transactions(30)
    producer.begin_transaction()
    offsets: list[int] = []
    for i in range(a.records):
        key, value, headers = event(topic, -1 - i)  # a negative seq: never the drill traffic's own
        producer.produce(topic, key=key, value=value, headers=headers, partition=a.partition,
                         on_delivery=lambda err, m: offsets.append(int(m.offset() or 0)) if err is None else None)
    if producer.flush(30) or len(offsets) != a.records:
        raise CutoverError(f"the open transaction's records were not acknowledged on the {side} cluster")
    d.open_txn = producer
    if a.resolve != "never":
        threading.Thread(target=_resolve_when_waited_for, args=(d, a.resolve), daemon=True).start()
    return {"cluster": side, "topic": topic, "partition": a.partition, "offsets": [min(offsets), max(offsets)]}


def _resolve_when_waited_for(d: Drill, how: str) -> None:
    """Commit or abort the open transaction once a switch has waited for it longer than the quiet period."""
    from cutover.switch import journal

    plan = d.switch_plan()
    folder, period = journal.directory(plan), float(plan.spec.gates.quiet_period)

    def waiting() -> bool:
        runs = journal.read(folder).runs
        step = runs[-1].steps[-1] if runs and runs[-1].steps else None
        return bool(step and step.name == "wait-quiet" and step.outcome is None
                    and time.time() - step.started > period + 1)

    try:
        _deadline(900, "a switch waiting for the open transaction", waiting, every=0.5)
    except ExpectationFailed:
        return
    producer, d.open_txn = d.open_txn, None
    if producer is not None:
        producer.commit_transaction(30) if how == "commit" else producer.abort_transaction(30)


@dataclass(frozen=True)
class ResolveArgs:
    how: Literal["commit", "abort"] = "commit"


@op("fault", "transaction.resolve", ResolveArgs, lambda a: f"the paused application {a.how}s its open transaction")
def _transaction_resolve(d: Drill, a: ResolveArgs) -> Detail:
    producer, d.open_txn = d.open_txn, None
    if producer is None:
        raise CutoverError("no transaction is open (add a transaction.open step before this one)")
    producer.commit_transaction(30) if a.how == "commit" else producer.abort_transaction(30)
    return {"resolved": a.how}


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
        runner.execute(plan, a.action, runner.Options())
    except CutoverError as exc:
        if exc.exit_code != ExitCode.REFUSED or a.reason not in exc.message:
            raise ExpectationFailed(f"cutover {a.action} failed, but not with the refusal expected: "
                                    f"{exc.message[:600]}") from None
        if routing.active(plan) != before:
            raise ExpectationFailed(f"cutover {a.action} was refused after it switched the clients") from None
        return {"refusal": exc.message[:1000], "fix": exc.fix}
    raise ExpectationFailed(f"cutover {a.action} went through; it should have been refused")


@dataclass(frozen=True)
class KillSwitchArgs:
    action: Literal["promote", "rollback"] = "promote"
    #: the step during which the switch process is SIGKILLed (one that lasts: wait-quiet waits the quiet period)
    step: str = "wait-quiet"


@op("fault", "switch.kill", KillSwitchArgs, lambda a: f"start cutover {a.action} --execute and SIGKILL it during "
    f"step {a.step} (the operator's machine dies)")
def _switch_kill(d: Drill, a: KillSwitchArgs) -> Detail:
    from cutover.switch import journal

    plan = d.switch_plan()
    folder = journal.directory(plan)
    proc = d.spawn("switch", a.action, "--plan", str(plan.file), "--execute")

    def inside() -> bool:
        runs = journal.read(folder).runs
        step = runs[-1].steps[-1] if runs and runs[-1].steps else None
        return bool(step and step.name == a.step and step.outcome is None) or _died(proc, d.folder / "switch.log")

    _deadline(600, f"cutover {a.action} to reach step {a.step}", inside, every=0.2)
    return {"killed_in": a.step, "exit": d.kill("switch")}


@op("fault", "journal.tear", NoArgs, lambda _a: "tear the last line of the switch journal, as a machine that dies "
    "mid-write leaves it")
def _journal_tear(d: Drill, _a: NoArgs) -> Detail:
    from cutover.switch import journal

    path = journal.directory(d.switch_plan()) / "journal.jsonl"
    with path.open("ab") as f:
        f.write(b'{"v": 1, "event": "step-end", "run": "torn", "st')
    return {"journal": str(path)}


# ---------------------------------------------------------------- sandbox faults


@dataclass(frozen=True)
class ClusterArgs:
    cluster: ClusterSide
    #: SIGKILL (a crash) instead of a clean stop
    kill: bool = False


@op("fault", "cluster.stop", ClusterArgs, lambda a: f"{'kill' if a.kill else 'stop'} the {a.cluster} cluster's "
    "broker", sandbox=True)
def _cluster_stop(d: Drill, a: ClusterArgs) -> Detail:
    assert d.sandbox is not None
    return dict(d.sandbox.stop(a.cluster, kill=a.kill))


@op("fault", "cluster.start", ClusterArgs, lambda a: f"start the {a.cluster} cluster's broker again", sandbox=True)
def _cluster_start(d: Drill, a: ClusterArgs) -> Detail:
    assert d.sandbox is not None
    return dict(d.sandbox.start(a.cluster))


@op("fault", "catalog.outage", NoArgs, lambda _a: "make the catalog refuse writes (hold its database's write lock)",
    sandbox=True)
def _catalog_outage(d: Drill, _a: NoArgs) -> Detail:
    import sqlite3

    uri = d.plan.spec.catalog.uri if d.plan.spec.catalog else ""
    if not uri.startswith("sqlite:///"):
        raise CutoverError("catalog.outage works on a SQLite catalog (the sandbox's)")
    conn = sqlite3.connect(uri[len("sqlite:///"):], timeout=5, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    d.catalog_lock = _Lock(conn)
    return {"catalog": uri}


@dataclass
class _Lock:
    conn: Any

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


@op("fault", "catalog.restore", NoArgs, lambda _a: "give the catalog back", sandbox=True)
def _catalog_restore(d: Drill, _a: NoArgs) -> Detail:
    lock, d.catalog_lock = d.catalog_lock, None
    if lock is not None:
        lock.release()
    return {"restored": lock is not None}


# ---------------------------------------------------------------- expectations


@op("expect", "verify-passed", NoArgs, lambda _a: "the last verify passed (runs it when none ran yet)")
def _verify_passed(d: Drill, _a: NoArgs) -> Detail:
    if d.verified is None:
        _verify(d, _a)
    result = d.verified
    assert result is not None
    if not result.passed:
        raise ExpectationFailed("verify did not pass: " + "; ".join(
            f"{t.table}: {t.counts.as_dict()}" for t in result.tables if not t.passed))
    return {"passed": True}


@dataclass(frozen=True)
class LagArgs:
    records: int = 0
    within: Duration = Duration(60)
    direction: Literal["forward", "reverse"] = "forward"


@op("expect", "lag-below", LagArgs, lambda a: f"{a.direction} mirror lag at most {a.records} within {a.within:.0f}s")
def _lag_below(d: Drill, a: LagArgs) -> Detail:
    from cutover.mirror import status

    seen: list[int] = []

    def check() -> bool:
        seen.append(status.status(d.plan, a.direction, 5.0).lag)
        return seen[-1] <= a.records

    try:
        _deadline(a.within, f"mirror lag at most {a.records}", check, every=1.0)
    except ExpectationFailed:
        raise ExpectationFailed(f"mirror lag stayed above {a.records} for {a.within:.0f}s (last {seen[-1]})") from None
    return {"lag": seen[-1]}


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
    traffic = _need_traffic(d)
    want = Counter((s.topic, s.seq) for s in traffic.sent)
    if a.where == "tables":
        topics = {p.topic for p in d.plan.spec.tables}
        want = Counter({k: v for k, v in want.items() if k[0] in topics})
    found: list[str] = []

    def check() -> bool:
        have = Counter({k: n for k, n in _found(d, a, traffic.topics).items() if traffic.mine(k[1])})
        lost, dup = want - have, Counter({k: n - 1 for k, n in have.items() if n > 1})
        extra = Counter({k: n for k, n in have.items() if k not in want})
        found[:] = [f"{sum(lost.values())} records lost, {sum(dup.values())} duplicated, {sum(extra.values())} "
                    f"never sent (e.g. lost {sorted(lost)[:3]}, duplicated {sorted(dup)[:3]})"]
        return not (lost or dup or extra)

    try:
        _deadline(a.within, "exactly once", check, every=2.0)
    except ExpectationFailed:
        raise ExpectationFailed(f"{a.where}: {found[0]}") from None
    return {"records": sum(want.values())}


def _found(d: Drill, a: ExactlyOnceArgs, topics: list[str]) -> Counter[tuple[str, int]]:
    if a.where == "consumer":
        if d.consumer is None:
            raise CutoverError("no consumer ran (add a consume.start step)")
        return Counter((s.topic, s.seq) for s in d.consumer.seen)
    if a.where == "tables":
        return _table_seqs(d, a.table)
    return _topic_seqs(d, a.where, topics)


def _topic_seqs(d: Drill, side: ClusterSide, topics: list[str]) -> Counter[tuple[str, int]]:
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import partition_counts
    from cutover.kafka.offsets import committed_records, log_offsets

    ref = ClusterRef.of(d.plan, side)
    counts = partition_counts(ref)
    tps = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    starts = log_offsets(ref, tps, "start")
    out: Counter[tuple[str, int]] = Counter()
    for msg in committed_records(ref, [(t, p, starts[(t, p)]) for t, p in tps], f"reading {', '.join(topics)}",
                                 group="cutover-drill-reader"):
        out[(str(msg.topic()), json.loads(msg.value() or b"{}")["seq"])] += 1
    return out


def _table_seqs(d: Drill, side: str) -> Counter[tuple[str, int]]:
    from cutover.lake import catalog as catalog_mod

    assert d.plan.spec.catalog is not None
    cat = catalog_mod.load(d.plan.spec.catalog)
    out: Counter[tuple[str, int]] = Counter()
    for pair in d.plan.spec.tables:
        name = pair.old if side == "old" else pair.new
        if not cat.table_exists(name):
            continue
        rows = cat.load_table(name).scan(
            selected_fields=("kafka_topic", "seq")).to_arrow().to_pylist()
        out.update((r["kafka_topic"], r["seq"]) for r in rows)
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
