"""Read-only views of a cluster: identity, topics with partition counts, consumer groups."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import KafkaException

from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str
    brokers: int
    #: topic -> partition count; internal topics (leading "__") left out.
    topics: dict[str, int]
    groups: list[str]


def _metadata(ref: ClusterRef, timeout: float) -> Any:
    client = admin(ref)
    try:
        return client.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ref.failure(exc, "listing topics", client) from None


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
    try:
        meta = client.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ref.failure(exc, "reading the cluster id", client) from None
    found = cast(str | None, meta.cluster_id)  # typed as always there; a broker may still return none
    if not found:
        raise ref.failure(None, "reading the cluster id (the brokers returned none)", client)
    return found


def list_groups(ref: ClusterRef, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    client = admin(ref)
    try:
        listing = client.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 1)
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise ref.failure(exc, "listing consumer groups", client) from None
    return sorted(g.group_id for g in listing.valid)
