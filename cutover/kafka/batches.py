"""Admin requests in sizes a KRaft controller takes.

The controller writes one operation's metadata records as one bounded batch: a request that would
make more than 10,000 records (QuorumController's MAX_RECORDS_PER_USER_OP) is refused whole, with
POLICY_VIOLATION ("Unable to perform excessively large batch operation", and for CreateTopics of
more than 10,000 partitions "Excessively large number of partitions per request"). A topic created
makes a record for itself, one a partition and one a config; an ACL, a config set or a partition
added makes one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from confluent_kafka.admin import NewTopic

T = TypeVar("T")

#: The most metadata records a KRaft controller writes for one request.
MAX_RECORDS = 10_000


def split(items: Sequence[T], records: Callable[[T], int] = lambda _item: 1, limit: int = MAX_RECORDS) -> list[list[T]]:
    """The items in order, in requests of at most `limit` records each (an item of more goes alone, and the
    cluster's refusal names it)."""
    out: list[list[T]] = []
    room = 0
    for item in items:
        cost = records(item)
        if not out or cost > room:
            out.append([])
            room = limit
        out[-1].append(item)
        room -= cost
    return out


def topic_records(topic: NewTopic) -> int:
    """The records creating this topic makes: the topic's, one a partition, one a config."""
    return 1 + topic.num_partitions + len(topic.config or {})
