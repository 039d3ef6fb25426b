"""Read-only views of a cluster: identity, topics with partition counts, consumer groups."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin, metadata


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str
    brokers: int
    #: topic -> partition count; internal topics (leading "__") left out.
    topics: dict[str, int]
    groups: list[str]


def _metadata(ref: ClusterRef, timeout: float) -> Any:
    return metadata(ref, admin(ref), timeout, "listing topics")


def partition_counts(ref: ClusterRef, timeout: float = DEFAULT_TIMEOUT) -> dict[str, int]:
    """topic -> partition count; internal topics (leading "__") left out."""
    return {name: len(t.partitions) for name, t in _metadata(ref, timeout).topics.items()
            if not name.startswith("__")}


def view(ref: ClusterRef, timeout: float = DEFAULT_TIMEOUT) -> ClusterView:
    """Ask the cluster what it holds. Raises UnreachableError/AccessDenied within `timeout`."""
    meta = _metadata(ref, timeout)
    topics = {name: len(t.partitions) for name, t in meta.topics.items() if not name.startswith("__")}
    groups = list_groups(ref, timeout)
    return ClusterView(cluster_id=meta.cluster_id or "", brokers=len(meta.brokers), topics=topics, groups=groups)


def cluster_id(ref: ClusterRef, timeout: float = DEFAULT_TIMEOUT) -> str:
    """The cluster's id: what mirror state and table offsets are keyed by."""
    client = admin(ref)
    meta = metadata(ref, client, timeout, "reading the cluster id")
    found = cast(str | None, meta.cluster_id)  # typed as always there; a broker may still return none
    if not found:
        raise ref.failure(None, "reading the cluster id (the brokers returned none)", client)
    return found


def list_groups(ref: ClusterRef, timeout: float = DEFAULT_TIMEOUT,
                client: AdminClient | None = None) -> list[str]:
    client = client or admin(ref)
    metadata(ref, client, timeout, "listing consumer groups")  # what is knowable at once is named at once
    try:
        listing = client.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 1)
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise ref.failure(exc, "listing consumer groups", client) from None
    return sorted(g.group_id for g in listing.valid)


@dataclass(frozen=True)
class Rights:
    """What the plan's principal may do on each topic, as the brokers say (KIP-430 authorized
    operations): operation names, or None where the broker did not say."""

    topics: dict[str, frozenset[str] | None]


def _operations(ops: Any) -> frozenset[str] | None:
    if ops is None:
        return None
    names = frozenset(op.name for op in ops)
    return frozenset({"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
                      "ALTER_CONFIGS"}) if "ALL" in names else names


def rights(ref: ClusterRef, topics: list[str], timeout: float = DEFAULT_TIMEOUT) -> Rights:
    """The principal's authorized operations on each topic (a topic it may not even describe: none)."""
    from confluent_kafka import KafkaError, TopicCollection

    client = admin(ref)
    try:
        asked = client.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                       request_timeout=timeout) if topics else {}
        topic_ops: dict[str, frozenset[str] | None] = {}
        for name, future in asked.items():
            try:
                topic_ops[name] = _operations(future.result(timeout=timeout + 1).authorized_operations)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise
                topic_ops[name] = frozenset()
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise ref.failure(exc, "asking which operations the principal may do", client) from None
    return Rights(topic_ops)
