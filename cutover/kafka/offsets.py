"""Log start and end offsets, and consumer-group offsets, with bounded waits and named errors."""

from __future__ import annotations

import concurrent.futures
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from cutover.common import TP
from cutover.errors import CutoverError
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin, reached, result

T = TypeVar("T")

#: Transient answers: leadership or a coordinator moving or loading (a broker restarting: its leader
#: epochs move, replicas fall out of sync and back), or a topic created a moment ago. librdkafka does
#: not flag all of these retriable in an Admin answer.
_TRANSIENT = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
              KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_LEADER_FOR_PARTITION,
              KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
              KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE,
              KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.REPLICA_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT,
              KafkaError.NOT_CONTROLLER}
#: Of those, the answers that say the client's metadata is behind: a partition's leader moved (a broker
#: restarting). librdkafka's admin client asks the leader it knows again and gets the same answer until its
#: metadata is refreshed, minutes later (a CI run's reverse mirror, told FENCED_LEADER_EPOCH for 30 s while
#: the new cluster restarted broker by broker): such an answer is asked again on a new client.
_LEADER_MOVED = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                           KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH})


def transient(err: Any) -> bool:
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _TRANSIENT)


def wait_all(ref: ClusterRef, client: AdminClient, futures: dict, doing: str, timeout: float,  # type: ignore[type-arg]
             already_done: frozenset[int] = frozenset()) -> dict:  # type: ignore[type-arg]
    """Wait for every future; errors whose code is in `already_done` mean another process did it first."""
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = result(ref, client, fut, timeout + 5, doing)
        except KafkaException as exc:
            if not (isinstance(exc.args[0], KafkaError) and exc.args[0].code() in already_done):
                raise ref.failure(exc, doing, client) from None
        except concurrent.futures.TimeoutError as exc:
            raise ref.failure(exc, doing, client) from None
    return out


def again_while_transient(call: Callable[[], T], timeout: float, pause: Callable[[], object],
                          final: frozenset[int] = frozenset()) -> T:
    """Call, again (after `pause`) while Kafka's answer is transient and its code not in `final`,
    for up to `timeout` seconds; then the last error is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            if not transient(err) or err.code() in final or time.monotonic() > deadline:
                raise
            pause()


#: Answers that a group's coordinator moved. librdkafka's admin client caches each group's
#: coordinator until the entry goes unused for metadata.max.age.ms (15 min) and does not drop it
#: on these answers, so asking the same client again asks the same broker again: a CI run saw
#: DescribeConsumerGroups answer NOT_COORDINATOR for its whole timeout on three brokers after
#: restarts. A new client looks the coordinator up afresh.
_COORDINATOR_MOVED = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE})


#: Clients that were told the coordinator moved, or timed out: never asked anything again. Besides
#: the stale coordinator, librdkafka 2.16 was seen here to crash (SIGSEGV in its main thread) on a
#: ListConsumerGroupOffsets through a client whose DescribeConsumerGroups had just been answered
#: NOT_COORDINATOR. A caller's client that lands here is replaced in its later calls too.
_STALE: weakref.WeakSet[AdminClient] = weakref.WeakSet()


def replaced(client: AdminClient) -> bool:
    """Whether `retrying` gave up on this client (a caller that keeps clients makes a new one)."""
    return client in _STALE


def coordinator_moved(err: Any) -> bool:
    return isinstance(err, KafkaError) and err.code() in _COORDINATOR_MOVED


def retrying(ref: ClusterRef, client: AdminClient, call: Callable[[AdminClient, float], dict],  # type: ignore[type-arg]
             doing: str, timeout: float) -> dict:  # type: ignore[type-arg]
    """Issue an admin call, `call(client, request_timeout)`, and wait for all its futures, again
    while the answers are transient, for up to `timeout` seconds. An attempt waits at most a third
    of that (10 s at least); an attempt that timed out, or was told the coordinator or a leader moved, is
    made again on a new client (the old one may hold a stale coordinator, leader or connection: a client
    whose coordinator restarted was seen to time out, not answer, for its whole timeout)."""
    deadline = time.monotonic() + timeout
    per_attempt = max(10.0, timeout / 3)
    client = admin(ref) if client in _STALE else client
    pause = 0.2  # between attempts, doubling to 2 s: a broker failing the request at once (Tansu 0.6.0 describing
    # a group it holds closes the connection) was asked 1,357 times in 30 s
    while True:
        wait = max(1.0, min(per_attempt, deadline - time.monotonic()))
        try:
            return {k: result(ref, client, f, wait + 5, doing) for k, f in call(client, wait).items()}
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            # A transport failure at a cluster this process has reached: a broker went down under the call (a CI
            # run's promote, its drain begun with a broker stopped, failed at once with "nothing listens"). Asked
            # again on a new client, which reads the partitions' new leaders. One never reached is named at once.
            stuck = not isinstance(err, KafkaError) or coordinator_moved(err) or err.code() == KafkaError._TIMED_OUT \
                or err.code() in _LEADER_MOVED or (err.code() == KafkaError._TRANSPORT and reached(ref))
            if time.monotonic() >= deadline or not (stuck or transient(err)):
                raise ref.failure(exc, doing, client) from None
            client.poll(0)  # serve callbacks, then back off
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(2.0, 2 * pause)
            if stuck:
                _STALE.add(client)
                client = admin(ref)


def committed_records(ref: ClusterRef, start: Iterable[tuple[str, int, int]], doing: str,
                      timeout: float = DEFAULT_TIMEOUT, group: str = "cutover-inspect",
                      until: Mapping[TP, int] | None = None) -> Iterator[Message]:
    """Every committed record (read_committed) from each (topic, partition, offset) to the partition's end,
    or, for a partition in `until`, to that offset (exclusive). Give `until` wherever producers may still
    write: their records keep every fetch busy, and the end-of-partition event never comes.

    A partition in `until` is done at its first record at or past that offset, or once the consumer's
    position reaches it (the range may end in what read_committed never delivers: an aborted record, a
    transaction marker)."""
    ends = dict(until or {})
    consumer = Consumer(ref.config(**{
        "group.id": group, "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest"}))
    try:
        assignment = [TopicPartition(t, p, o) for t, p, o in start if o < ends.get((t, p), o + 1)]
        pending = {(tp.topic, tp.partition) for tp in assignment}
        if not pending:
            return
        consumer.assign(assignment)

        def done(tp: TP) -> None:
            pending.discard(tp)
            consumer.pause([TopicPartition(*tp)])  # records written since are past the end read

        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise ref.failure(None, doing, consumer)
            msg = consumer.poll(0.5)
            if msg is None:
                for pos in consumer.position([TopicPartition(t, p) for t, p in pending if (t, p) in ends]):
                    if pos.offset >= ends[(pos.topic, pos.partition)]:
                        done((pos.topic, pos.partition))
                continue
            tp = (str(msg.topic()), int(msg.partition() or 0))
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    done(tp)
                elif err.fatal() or err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise ref.failure(KafkaException(err), doing, consumer)
                continue
            if tp not in pending:
                continue  # fetched before its end was seen
            if int(msg.offset() or 0) >= ends.get(tp, 1 << 62):
                done(tp)
                continue
            yield msg
    finally:
        consumer.close()


def log_offsets(ref: ClusterRef, tps: Iterable[TP], which: str = "end",
                timeout: float = DEFAULT_TIMEOUT, client: AdminClient | None = None) -> dict[TP, int]:
    """Per partition: "start" (log start), "end" (last stable offset: committed records only) or
    "high" (high watermark: also records of open transactions, to see any write at all)."""
    tps = list(tps)
    if not tps:
        return {}
    admin_client = client if client is not None else admin(ref, warm_for=timeout)  # an idle one is falsy
    spec = OffsetSpec.earliest() if which == "start" else OffsetSpec.latest()  # type: ignore[no-untyped-call]
    isolation = IsolationLevel.READ_UNCOMMITTED if which == "high" else IsolationLevel.READ_COMMITTED
    done = retrying(ref, admin_client, lambda c, wait: c.list_offsets(
        {TopicPartition(t, p): spec for t, p in tps}, isolation_level=isolation,
        request_timeout=wait), f"listing the {which} offsets", timeout)
    return {(tp.topic, tp.partition): info.offset for tp, info in done.items()}


def undecided(ref: ClusterRef, tps: Iterable[TP], wait: float, timeout: float = DEFAULT_TIMEOUT,
              ) -> dict[TP, tuple[int, int]]:
    """Wait up to `wait` seconds until no transaction open now can still add records below the partitions'
    current ends: each one's last stable offset reaches the high watermark seen at the start. A transaction
    committed a moment ago counts too: Kafka answers the commit before it writes the markers that make its
    records readable. What is still undecided after `wait`: {tp: (last stable offset, high watermark)}."""
    tps = list(tps)
    goals = log_offsets(ref, tps, "high", timeout)
    deadline = time.monotonic() + wait
    while True:
        stable = log_offsets(ref, tps, "end", timeout)
        behind = {tp: (stable[tp], goals[tp]) for tp in tps if stable[tp] < goals[tp]}
        if not behind or time.monotonic() > deadline:
            return behind
        time.sleep(0.2)


@dataclass(frozen=True)
class GroupInfo:
    group: str
    state: str
    members: int
    #: (topic, partition) -> committed offset (only partitions with a commit).
    offsets: dict[TP, int]

    @property
    def active(self) -> bool:
        return self.members > 0


def group_info(ref: ClusterRef, group: str, timeout: float = DEFAULT_TIMEOUT,
               client: AdminClient | None = None) -> GroupInfo:
    return groups_info(ref, [group], timeout, client)[group]


def groups_info(ref: ClusterRef, groups: list[str], timeout: float = DEFAULT_TIMEOUT,
                client: AdminClient | None = None) -> dict[str, GroupInfo]:
    """Members and committed offsets of many groups: one describe, and the offset reads in flight together."""
    if not groups:
        return {}
    c = client if client is not None else admin(ref)
    desc = _describe(ref, c, groups, timeout)

    held: list[AdminClient] = []  # every client lives until its answers are in (see _spread)

    def reads(first: AdminClient, wait: float) -> dict:  # type: ignore[type-arg]
        clients = held[:] = _spread(ref, first, len(groups))
        futures = {}
        for i, g in enumerate(groups):  # the protocol reads one group per request: send them all, then wait
            futures.update(clients[i % len(clients)].list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g)], request_timeout=wait))
        return futures

    listings = retrying(ref, c, reads, f"reading the offsets of consumer group(s) {', '.join(groups[:5])}", timeout)
    out = {}
    for g in groups:
        d, listing = desc[g], listings[g]
        offsets = {(tp.topic, tp.partition): tp.offset for tp in listing.topic_partitions or [] if tp.offset >= 0}
        state = d.state.name.lower() if isinstance(d.state, ConsumerGroupState) else str(d.state)
        out[g] = GroupInfo(g, state, len(d.members or []), offsets)
    return out


def group_members(ref: ClusterRef, groups: list[str], timeout: float = DEFAULT_TIMEOUT,
                  client: AdminClient | None = None) -> dict[str, int]:
    """Members per group, for many groups in one request."""
    desc = _describe(ref, client if client is not None else admin(ref), groups, timeout) if groups else {}
    return {g: len(d.members or []) for g, d in desc.items()}


def readers(ref: ClusterRef, groups: list[str], reads: Callable[[str], bool], timeout: float = DEFAULT_TIMEOUT,
            client: AdminClient | None = None) -> dict[str, list[str]]:
    """Of these groups, those with a member assigned a partition of a topic `reads` selects: group -> topics."""
    desc = _describe(ref, client if client is not None else admin(ref), groups, timeout) if groups else {}
    out = {}
    for g, d in desc.items():
        topics = sorted({tp.topic for m in d.members or [] for tp in (m.assignment.topic_partitions
                                                                      if m.assignment else []) if reads(tp.topic)})
        if topics:
            out[g] = topics
    return out


def _describe(ref: ClusterRef, client: AdminClient, groups: list[str], timeout: float) -> dict:  # type: ignore[type-arg]
    return retrying(ref, client, lambda c, wait: {g: _absent_if_unknown(f) for g, f in c.describe_consumer_groups(
        list(groups), request_timeout=wait).items()}, f"describing consumer group(s) {', '.join(groups[:5])}", timeout)


@dataclass(frozen=True)
class _Absent:
    """A group the cluster does not know, described as Apache Kafka describes one: dead, no member."""

    state: ConsumerGroupState = ConsumerGroupState.DEAD
    members: tuple[Any, ...] = ()


def _absent_if_unknown(future: concurrent.futures.Future[Any]) -> concurrent.futures.Future[Any]:
    """A group's description, with GROUP_ID_NOT_FOUND (Tansu 0.6.0's answer for a group it does not know, where
    Apache Kafka describes it as dead) taken as an absent group."""
    out: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def done(src: concurrent.futures.Future[Any]) -> None:
        exc = src.exception()
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if exc is None:
            out.set_result(src.result())
        elif isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
            out.set_result(_Absent())
        else:
            out.set_exception(exc)
    future.add_done_callback(done)
    return out


def commit_group(ref: ClusterRef, group: str, offsets: dict[TP, int], timeout: float = DEFAULT_TIMEOUT,
                 client: AdminClient | None = None) -> None:
    """Set a group's committed offsets, every partition or an error (the broker refuses while the group has members)."""
    refused = commit_groups(ref, {group: offsets}, timeout, client)
    if group in refused:
        raise refused[group]


def commit_groups(ref: ClusterRef, offsets: Mapping[str, dict[TP, int]], timeout: float = DEFAULT_TIMEOUT,
                  client: AdminClient | None = None) -> dict[str, OffsetCommitRefused]:
    """Set many groups' committed offsets, every group's request in flight together (the protocol
    takes one group per request: one at a time, 2,000 groups wait 2,000 round trips). Returns the
    groups the broker refused, each with why; the others have every partition committed.

    The broker answers per partition, and the call itself succeeds even when partitions
    are refused: each answer is checked, transient ones (a topic created a moment ago, a
    coordinator moving) are retried until `timeout`, and any other refusal is that group's.
    """
    client = client if client is not None else admin(ref)
    todo = {g: dict(o) for g, o in offsets.items() if o}
    refusals: dict[str, OffsetCommitRefused] = {}
    deadline = time.monotonic() + timeout
    held: list[AdminClient] = []  # every client lives until its answers are in (see _spread)
    while todo:
        def send(first: AdminClient, wait: float,
                 todo: dict[str, dict[TP, int]] = todo) -> dict:  # type: ignore[type-arg]
            clients = held[:] = _spread(ref, first, len(todo))
            futures = {}
            for i, (g, offs) in enumerate(todo.items()):
                tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offs.items())]
                futures.update(clients[i % len(clients)].alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(g, tps)], request_timeout=wait))
            return futures

        done = retrying(ref, client, send, f"committing the offsets of group(s) {', '.join(list(todo)[:5])}",
                        timeout)
        again: dict[str, dict[TP, int]] = {}
        for g, answer in done.items():
            refused = {(tp.topic, tp.partition): tp.error for tp in answer.topic_partitions or []
                       if tp.error is not None}
            if not refused:
                continue
            tp, err = next(iter(sorted(refused.items())))
            if transient(err) and time.monotonic() <= deadline:
                again[g] = {tp: o for tp, o in todo[g].items() if tp in refused}
                if coordinator_moved(err):
                    _STALE.add(client)
                    client = admin(ref)
            else:
                refusals[g] = OffsetCommitRefused(
                    f"{ref.describe()} refused the offsets of group {g} on {len(refused)} partition(s), e.g. "
                    f"{tp[0]}/{tp[1]}: {err.str()}",
                    fix="a group with active members cannot be moved: stop its consumers; otherwise check the "
                        "topic and this principal's ACLs")
        todo = again
        if todo:
            client.poll(0.2)
    return refusals


#: librdkafka sends one admin client's group requests one at a time (about 6 ms each here: 1,000 offset
#: commits took 5.9 s on one client, 1.5 s on 4, 0.9 s on 8), so many groups are spread over up to this
#: many clients, one per GROUPS_PER_CLIENT groups.
GROUP_CLIENTS = 8
GROUPS_PER_CLIENT = 64


def _spread(ref: ClusterRef, client: AdminClient, groups: int) -> list[AdminClient]:
    """The given client, and more (new ones) when there are many groups to send requests for. The caller keeps
    the list until every answer is in: a client without a reference is destroyed at once, and its requests are
    never answered ("Broker handle destroyed for termination")."""
    return [client] + [admin(ref) for _ in range(min(GROUP_CLIENTS, groups // GROUPS_PER_CLIENT) - 1)]


class OffsetCommitRefused(CutoverError):
    """The broker refused a group's offsets on some partitions."""
