"""Admin requests in sizes a KRaft controller takes (at most 10,000 metadata records each)."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from cutover.kafka.batches import MAX_RECORDS, split, topic_records


def test_topics_are_split_by_the_records_their_creation_makes() -> None:
    topics = [NewTopic(f"t{i}", 12, 1, config={"message.timestamp.type": "CreateTime"}) for i in range(1000)]
    assert topic_records(topics[0]) == 14  # the topic, 12 partitions, 1 config
    requests = split(topics, topic_records)
    assert [len(r) for r in requests] == [714, 286]  # 714 x 14 = 9,996 records; 715 would be 10,010
    assert [sum(topic_records(t) for t in r) for r in requests] == [9996, 4004]
    assert [t for r in requests for t in r] == topics  # every topic once, in order


def test_a_request_is_filled_exactly_and_an_item_larger_than_the_limit_goes_alone() -> None:
    half = MAX_RECORDS // 2
    sizes = {"a": half, "b": half, "c": 1, "huge": MAX_RECORDS + 1, "d": 3}
    assert split(list(sizes), sizes.__getitem__) == [["a", "b"], ["c"], ["huge"], ["d"]]
    assert split([], sizes.__getitem__) == []


def test_items_of_one_record_each_go_ten_thousand_a_request() -> None:
    assert [len(r) for r in split(range(25_001))] == [10_000, 10_000, 5_001]
