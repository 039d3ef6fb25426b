"""Log start and end offsets, and consumer-group offsets, with bounded waits and named errors."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin

TP = tuple[str, int]


def wait_all(ref: ClusterRef, client: AdminClient, futures: dict, doing: str, timeout: float) -> dict:  # type: ignore[type-arg]
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(timeout=timeout + 5)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            raise ref.failure(exc, doing, client) from None
    return out


def log_offsets(ref: ClusterRef, tps: Iterable[TP], which: str = "end",
                timeout: float = DEFAULT_TIMEOUT, client: AdminClient | None = None) -> dict[TP, int]:
    """Per partition: "start" (log start) or "end" (last stable offset: committed records only)."""
    tps = list(tps)
    if not tps:
        return {}
    client = client or admin(ref)
    spec = OffsetSpec.earliest() if which == "start" else OffsetSpec.latest()
    futures = client.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                  isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
    done = wait_all(ref, client, futures, f"listing the {which} offsets", timeout)
    return {(tp.topic, tp.partition): info.offset for tp, info in done.items()}


_COORDINATOR = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS}


def _coordinator_busy(err: Any) -> bool:
    """Transient: the group coordinator is moving or loading (on a fresh cluster, for seconds)."""
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _COORDINATOR)


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
    admin_client = client or admin(ref)

    def ask(what: str, call: Callable[[], dict]) -> Any:  # type: ignore[type-arg]
        # a fresh cluster answers "coordinator loading" for a moment: retry what is retriable
        deadline = time.monotonic() + timeout
        while True:
            try:
                return {k: f.result(timeout=timeout + 5) for k, f in call().items()}[group]
            except KafkaException as exc:
                err = exc.args[0]
                if not _coordinator_busy(err) or time.monotonic() > deadline:
                    raise ref.failure(exc, f"{what} of consumer group {group}", admin_client) from None
                admin_client.poll(0.2)
            except concurrent.futures.TimeoutError as exc:
                raise ref.failure(exc, f"{what} of consumer group {group}", admin_client) from None

    desc = ask("describing", lambda: admin_client.describe_consumer_groups([group], request_timeout=timeout))
    listing = ask("reading the offsets", lambda: admin_client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout))
    offsets = {(tp.topic, tp.partition): tp.offset for tp in listing.topic_partitions or [] if tp.offset >= 0}
    state = desc.state.name.lower() if isinstance(desc.state, ConsumerGroupState) else str(desc.state)
    return GroupInfo(group, state, len(desc.members or []), offsets)


def commit_group(ref: ClusterRef, group: str, offsets: dict[TP, int], timeout: float = DEFAULT_TIMEOUT,
                 client: AdminClient | None = None) -> None:
    """Set a group's committed offsets (the broker refuses while the group has members)."""
    client = client or admin(ref)
    tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
    wait_all(ref, client, client.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, tps)], request_timeout=timeout),
        f"committing the offsets of group {group}", timeout)
