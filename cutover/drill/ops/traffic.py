"""Traffic ops: the sample producer and consumer group, and the faults that act on them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cutover.drill.context import Drill
from cutover.drill.ops.base import (
    Detail,
    ExpectationFailed,
    NoArgs,
    deadline,
    need_traffic,
    op,
    topics_of,
    while_progressing,
)
from cutover.drill.traffic import Sent
from cutover.errors import CutoverError
from cutover.plan.schema import Duration


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be above 0, found {value}"


@dataclass(frozen=True)
class TrafficArgs:
    #: default: the topics of the plan's table pairs
    topics: list[str] | None = None
    #: records per second, about
    rate: float = field(default=100.0, metadata={"check": _positive})
    transactions: bool = True
    #: the records' keys: plain text, or JSON strings (a platform that writes its own tables, Tansu, reads keys as
    #: JSON and refuses records whose key is not)
    keys: Literal["plain", "json"] = "plain"
    #: partitions of the topics it creates when they do not exist
    partitions: int = field(default=3, metadata={"check": _positive})


@op("action", "traffic.start", TrafficArgs,
    lambda a: f"start sample orders/payments traffic (about {a.rate:.0f} records/s"
              f"{', with transactions' if a.transactions else ''}) on the active cluster")
def _traffic_start(d: Drill, a: TrafficArgs) -> Detail:
    from cutover.drill.traffic import Traffic

    topics = topics_of(d, a.topics)
    if d.traffic is None:
        _create_topics(d, topics, a.partitions)
        d.traffic = Traffic(d.switch_plan(), d.ctl, topics, a.rate, a.transactions, json_keys=a.keys == "json")
        d.traffic.start()
    return {"topics": topics, "rate": a.rate}


def _create_topics(d: Drill, topics: list[str], partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    from cutover.kafka.clients import ClusterRef, admin
    from cutover.kafka.inspect import partition_counts
    from cutover.kafka.offsets import wait_all
    from cutover.switch import routing

    side = routing.active(d.switch_plan())
    ref = ClusterRef.of(d.plan, side)
    have = partition_counts(ref, d.timeout)  # a cluster that does not answer is named, within --timeout
    client = admin(ref)
    new = [NewTopic(t, partitions, 1 if d.sandbox else -1) for t in topics if t not in have]
    if new:
        wait_all(ref, client, client.create_topics(new), "creating the drill's topics", d.timeout)


@dataclass(frozen=True)
class WaitArgs:
    records: int = field(metadata={"check": _positive})
    within: Duration = Duration(120)


@op("action", "traffic.wait", WaitArgs, lambda a: f"let {a.records} more records be produced")
def _traffic_wait(d: Drill, a: WaitArgs) -> Detail:
    traffic = need_traffic(d)
    start = traffic.count()
    deadline(a.within, f"{a.records} more records produced", lambda: traffic.count() - start >= a.records)
    return {"produced": traffic.count()}


@op("action", "traffic.stop", NoArgs, lambda _a: "stop the sample traffic; let the consumer finish what was sent")
def _traffic_stop(d: Drill, _a: NoArgs) -> Detail:
    traffic = need_traffic(d)
    traffic.stop()
    if d.consumer is not None:
        consumer = d.consumer

        def missing() -> list[Sent]:
            seen = {(s.topic, s.seq) for s in consumer.seen}
            return [s for s in traffic.sent if (s.topic, s.seq) not in seen]
        try:  # on a loaded machine its backlog takes a while, but it moves
            while_progressing(120, "the consumer to process every record sent", lambda: len(missing()))
        except ExpectationFailed as exc:
            lost = missing()
            first = ", ".join(f"{s.topic}[{s.partition}]@{s.offset} on {s.cluster}" for s in lost[:5])
            said = f"; the consumer reported: {consumer.errors[-3:]}" if consumer.errors else ""
            raise ExpectationFailed(f"{exc}: {len(lost)} of {len(traffic.sent)} not seen, the first {first}; the "
                                    f"consumer is {consumer.state()}{said}") from None
    if traffic.errors:
        raise CutoverError(f"the sample producer reported: {traffic.errors[0]}")
    return {"produced": traffic.count(), "consumed": d.consumer.count() if d.consumer else None}


@dataclass(frozen=True)
class ConsumeArgs:
    group: str
    topics: list[str] | None = None


@op("action", "consume.start", ConsumeArgs, lambda a: f"consume the traffic as group {a.group}, committing what "
    "it processed after each batch")
def _consume_start(d: Drill, a: ConsumeArgs) -> Detail:
    from cutover.drill.traffic import GroupConsumer

    if not d.plan.spec.groups.matches(a.group):
        raise CutoverError(f"consumer group {a.group} is not selected by the plan's groups, so no switch would move "
                           "it", fix="pass --param group=NAME with a group the plan's groups.include selects")
    if d.consumer is None:
        d.consumer = GroupConsumer(d.switch_plan(), d.ctl, topics_of(d, a.topics), a.group)
        d.consumer.start()
    return {"group": a.group}


@op("fault", "writer.pause", NoArgs, lambda _a: "pause the producer (as a stuck writer would)")
def _writer_pause(d: Drill, _a: NoArgs) -> Detail:
    need_traffic(d)
    (d.ctl / "pause").touch()
    deadline(60, "the producer to pause", lambda: (d.ctl / "producer.paused").exists())
    return {}


@op("fault", "writer.resume", NoArgs, lambda _a: "resume the producer")
def _writer_resume(d: Drill, _a: NoArgs) -> Detail:
    (d.ctl / "pause").unlink(missing_ok=True)
    return {}


@op("fault", "schema.change", NoArgs, lambda _a: "change the order events' schema mid-stream (a new field)")
def _schema_change(d: Drill, _a: NoArgs) -> Detail:
    need_traffic(d).version = 2
    return {"version": 2, "new_field": "channel"}
