"""Read-only views of a cluster: identity, topics with partition counts, consumer groups."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass

from confluent_kafka import KafkaException

from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str
    brokers: int
    #: topic -> partition count; internal topics (leading "__") left out.
    topics: dict[str, int]
    groups: list[str]


def view(ref: ClusterRef, timeout: float = DEFAULT_TIMEOUT) -> ClusterView:
    """Ask the cluster what it holds. Raises UnreachableError/AccessDenied within `timeout`."""
    client = admin(ref)
    try:
        meta = client.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ref.failure(exc, "listing topics", client) from None
    topics = {name: len(t.partitions) for name, t in meta.topics.items() if not name.startswith("__")}
    try:
        listing = client.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 1)
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise ref.failure(exc, "listing consumer groups", client) from None
    groups = sorted(g.group_id for g in listing.valid)
    return ClusterView(cluster_id=meta.cluster_id or "", brokers=len(meta.brokers), topics=topics, groups=groups)
