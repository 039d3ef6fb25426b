"""Fault ops: crashes of the drill's own processes, an application's open transaction, the switch killed
mid-step and its journal torn, and, through the fault injector, brokers and the catalog."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Literal

from cutover import process
from cutover.drill import codec
from cutover.drill.context import Drill
from cutover.drill.ops.base import Detail, ExpectationFailed, NoArgs, deadline, op, topics_of
from cutover.errors import CutoverError
from cutover.plan import ClusterSide


@op("fault", "mirror.kill", NoArgs, lambda _a: "SIGKILL the background mirror")
def _mirror_kill(d: Drill, _a: NoArgs) -> Detail:
    if "mirror" not in d.procs:
        raise CutoverError("no background mirror is running (add a mirror.start step before this one)")
    return {"exit": d.kill("mirror")}


@op("fault", "shadow.kill", NoArgs, lambda _a: "SIGKILL the background shadow job (driver and JVM)")
def _shadow_kill(d: Drill, _a: NoArgs) -> Detail:
    if "shadow" not in d.procs:
        raise CutoverError("no background shadow job is running (add a shadow.start step before this one)")
    return {"exit": d.kill("shadow")}


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
    from cutover.kafka.clients import ClusterRef
    from cutover.switch import routing

    plan = d.switch_plan()
    side = routing.active(plan)
    topic = a.topic or topics_of(d, None)[0]
    producer = Producer(ClusterRef.of(plan, side).config(**{  # logs through cutover, not on stderr
        "transactional.id": f"cutover-drill-eos-{plan.name}",
        "transaction.timeout.ms": 900_000}))  # Kafka must not abort it during the drill
    producer.init_transactions(30)
    producer.begin_transaction()
    offsets: list[int] = []
    for i in range(a.records):
        # a negative seq: never the drill traffic's own
        key, value, headers = event(topic, -1 - i, encoding=codec.for_cluster(plan, side))
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
        deadline(900, "a switch waiting for the open transaction", waiting, every=0.5)
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
class KillSwitchArgs:
    action: Literal["promote", "rollback"] = "promote"
    #: the step during which the switch process is SIGKILLed
    step: str = "wait-quiet"


@op("fault", "switch.kill", KillSwitchArgs, lambda a: f"start cutover {a.action} --execute and SIGKILL it during "
    f"step {a.step} (the operator's machine dies)")
def _switch_kill(d: Drill, a: KillSwitchArgs) -> Detail:
    from cutover.switch import journal

    plan = d.switch_plan()
    folder = journal.directory(plan)
    cued = d.sandbox is not None and d.kills_switch  # the drill's own hook: before_step kills as the step begins
    if cued:
        (d.ctl / f"kill.{a.action}.{a.step}").touch()
    proc = d.spawn("switch", a.action, "--plan", str(plan.file), "--execute")

    def inside() -> bool:
        runs = journal.read(folder).runs
        step = runs[-1].steps[-1] if runs and runs[-1].steps else None
        return bool(step and step.name == a.step and step.outcome is None)

    if cued:
        try:
            proc.wait(600)
        except subprocess.TimeoutExpired:
            d.kill("switch")
            raise CutoverError(f"cutover {a.action} did not reach step {a.step} in 600s; its log: "
                               f"{d.folder / 'switch.log'}") from None
        if not inside():
            raise CutoverError(f"cutover {a.action} ended (exit {proc.returncode}) without being killed in step "
                               f"{a.step}; its log: {d.folder / 'switch.log'}",
                               fix=f"give switch.kill a step {a.action} runs (cutover {a.action} --dry-run lists them)")
    else:
        process.wait_ready(proc, inside, d.folder / "switch.log", 600, f"cutover {a.action} (until step {a.step})")
    return {"killed_in": a.step, "exit": d.kill("switch")}


@op("fault", "journal.tear", NoArgs, lambda _a: "tear the last line of the switch journal, as a machine that dies "
    "mid-write leaves it")
def _journal_tear(d: Drill, _a: NoArgs) -> Detail:
    from cutover.switch import journal

    path = journal.directory(d.switch_plan()) / "journal.jsonl"
    with path.open("ab") as f:
        f.write(b'{"v": 1, "event": "step-end", "run": "torn", "st')
    return {"journal": str(path)}


@dataclass(frozen=True)
class ClusterArgs:
    cluster: ClusterSide
    #: SIGKILL (a crash) instead of a clean stop
    kill: bool = False


@op("fault", "cluster.stop", ClusterArgs, lambda a: f"{'kill' if a.kill else 'stop'} the {a.cluster} cluster's "
    "broker", injected=True)
def _cluster_stop(d: Drill, a: ClusterArgs) -> Detail:
    return d.faults.stop_cluster(a.cluster, kill=a.kill)


@op("fault", "cluster.start", ClusterArgs, lambda a: f"start the {a.cluster} cluster's broker again", injected=True)
def _cluster_start(d: Drill, a: ClusterArgs) -> Detail:
    return d.faults.start_cluster(a.cluster)


@op("fault", "catalog.outage", NoArgs, lambda _a: "take the catalog away (SQLite: writes refused, readers "
    "still get in; REST or PostgreSQL: its server stopped)", injected=True)
def _catalog_outage(d: Drill, _a: NoArgs) -> Detail:
    return d.faults.take_catalog()


@op("fault", "catalog.restore", NoArgs, lambda _a: "give the catalog back", injected=True)
def _catalog_restore(d: Drill, _a: NoArgs) -> Detail:
    return d.faults.give_catalog()


@dataclass(frozen=True)
class StorageArgs:
    #: SIGKILL (a crash) instead of a clean stop
    kill: bool = False


@op("fault", "storage.outage", StorageArgs, lambda a: f"{'kill' if a.kill else 'stop'} the warehouse's object "
    "storage (reads and writes of data and metadata files fail)", injected=True)
def _storage_outage(d: Drill, a: StorageArgs) -> Detail:
    return d.faults.take_storage(kill=a.kill)


@op("fault", "storage.restore", NoArgs, lambda _a: "start the warehouse's storage again", injected=True)
def _storage_restore(d: Drill, _a: NoArgs) -> Detail:
    return d.faults.give_storage()
