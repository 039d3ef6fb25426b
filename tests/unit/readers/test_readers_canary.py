"""The canary's verdict per partition (pure: the records are given; the sandbox reads them in
tests/integration/test_readers_canary.py)."""

from __future__ import annotations

from cutover.readers import canary

ROW = {"topic": "orders", "partition": 2, "source_offset": 6, "target_offset": 8}
RECORD = (b"k-1", b"value", (("h", b"1"),), 1764000000000)


def test_each_partition_is_one_entry_with_both_offsets_and_whether_its_next_record_is_the_same() -> None:
    same = canary.entry(ROW, RECORD, RECORD)
    assert same == {"topic": "orders", "partition": 2, "source_offset": 6, "target_offset": 8, "same": True,
                    "source_record": {"key_bytes": 3, "value_bytes": 5, "headers": 1, "timestamp": 1764000000000},
                    "target_record": {"key_bytes": 3, "value_bytes": 5, "headers": 1, "timestamp": 1764000000000}}
    assert canary.entry(ROW, None, None)["same"] is True  # both at the end: the reader had read everything
    other = canary.entry(ROW, RECORD, (None, b"value", (), 1764000000000))
    assert other["same"] is False and other["target_record"] == {"key_bytes": None, "value_bytes": 5, "headers": 0,
                                                                  "timestamp": 1764000000000}
    end = canary.entry(ROW, RECORD, None)
    assert canary.differing([same, other, end]) == [other, end]
    assert canary.describe(end, "old", "new") == ("orders[2]: at 6 on old a record (key 3 bytes, value 5 bytes, "
                                                  "timestamp 1764000000000), at 8 on new the end of the partition")
