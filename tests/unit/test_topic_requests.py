"""The mirror's topic creation in requests a KRaft controller takes (at most 10,000 partitions each)."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from cutover.mirror.topics import MAX_PARTITIONS_PER_REQUEST, create_requests


def _shape(requests: list[list[NewTopic]]) -> list[list[tuple[str, int]]]:
    return [[(t.topic, t.num_partitions) for t in r] for r in requests]


def test_topics_are_split_into_requests_of_at_most_ten_thousand_partitions() -> None:
    topics = [NewTopic(f"t{i}", 12, 1) for i in range(1000)]  # 12,000 partitions
    requests = create_requests(topics)
    assert [sum(t.num_partitions for t in r) for r in requests] == [9996, 2004]
    assert [t for r in requests for t in r] == topics  # every topic once, in order


def test_a_request_is_filled_exactly_and_a_topic_larger_than_the_limit_goes_alone() -> None:
    half = MAX_PARTITIONS_PER_REQUEST // 2
    topics = [NewTopic("a", half, 1), NewTopic("b", half, 1), NewTopic("c", 1, 1),
              NewTopic("huge", MAX_PARTITIONS_PER_REQUEST + 1, 1), NewTopic("d", 3, 1)]
    assert _shape(create_requests(topics)) == [[("a", half), ("b", half)], [("c", 1)],
                                         [("huge", MAX_PARTITIONS_PER_REQUEST + 1)], [("d", 3)]]
    assert create_requests([]) == []
