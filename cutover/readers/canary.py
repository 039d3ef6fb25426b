"""The canary of a translation: the record a reader reads next is the same on both clusters.

For each translated position, the first committed record at the source position on the source
cluster and at the translated position on the target cluster are read and compared: key, value,
headers and timestamp, byte for byte. Both at the end of their partition agree too (the reader
has read everything). Any other pair means the map would move the reader to another record.
Every partition checked is one entry of the result (`canary` in `readers translate -o json` and in
promote's move-reader step): topic, partition, source_offset, target_offset, same, source_record and
target_record (sizes and timestamp, None at the partition's end); docs/reference/contracts.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from cutover.common import TP
from cutover.kafka.clients import ClusterRef

Record = tuple[Any, ...] | None


def first_records(ref: ClusterRef, positions: Mapping[TP, int], timeout: float) -> dict[TP, Record]:
    """Per partition, the first committed record at or after the position (None at the partition's end)."""
    consumer = Consumer(ref.config(**{"group.id": "cutover-canary", "enable.auto.commit": False,
                                      "enable.partition.eof": True, "isolation.level": "read_committed"}))
    found: dict[TP, Record] = {}
    try:
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in positions.items()])
        deadline = time.monotonic() + timeout
        while len(found) < len(positions):
            if time.monotonic() > deadline:
                missing = sorted(set(positions) - set(found))[:5]
                raise ref.failure(None, f"reading the records at the reader's positions {missing}", consumer)
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            tp = (str(msg.topic()), int(msg.partition() or 0))
            if tp in found:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    found[tp] = None
                continue
            found[tp] = (msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])
    finally:
        consumer.close()
    return found


def checked(source: ClusterRef, target: ClusterRef, rows: list[dict[str, Any]], timeout: float,
            ) -> list[dict[str, Any]]:
    """One entry per translated position (the JSON's `canary`), each with its verdict: the next record at
    the source position on the source cluster and at the target position on the target cluster."""
    src = first_records(source, {(r["topic"], r["partition"]): r["source_offset"] for r in rows}, timeout)
    dst = first_records(target, {(r["topic"], r["partition"]): r["target_offset"] for r in rows}, timeout)
    return [entry(r, src[(r["topic"], r["partition"])], dst[(r["topic"], r["partition"])]) for r in rows]


def entry(row: dict[str, Any], source: Record, target: Record) -> dict[str, Any]:
    """A partition's verdict: `same` when both next records are equal byte for byte (or both are the end)."""
    return {"topic": row["topic"], "partition": row["partition"], "source_offset": row["source_offset"],
            "target_offset": row["target_offset"], "same": source == target,
            "source_record": summary(source), "target_record": summary(target)}


def summary(rec: Record) -> dict[str, Any] | None:
    """What the JSON shows of a record (sizes, not contents: a canary is no place for payloads); None at the
    partition's end."""
    if rec is None:
        return None
    key, value, headers, timestamp = rec
    return {"key_bytes": None if key is None else len(key), "value_bytes": None if value is None else len(value),
            "headers": len(headers), "timestamp": timestamp}


def differing(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries whose next records differ (a move through them would land on another record)."""
    return [e for e in entries if not e["same"]]


def describe(e: dict[str, Any], source: str = "the source", target: str = "the target") -> str:
    """A differing entry in words: which record each cluster holds at its position."""
    def say(rec: dict[str, Any] | None) -> str:
        return "the end of the partition" if rec is None else \
            f"a record (key {rec['key_bytes']} bytes, value {rec['value_bytes']} bytes, timestamp {rec['timestamp']})"
    return (f"{e['topic']}[{e['partition']}]: at {e['source_offset']} on {source} {say(e['source_record'])}, "
            f"at {e['target_offset']} on {target} {say(e['target_record'])}")


def summary_lines(entry: dict[str, Any]) -> list[str]:
    """A move's canary check in lines (`cutover readers move`): which partitions' next records differ."""
    if "canary" not in entry:
        return []
    checked, differ = entry["canary"], differing(entry["canary"])
    if differ:
        return [f"canary: the next records differ between the clusters on {len(differ)} of {len(checked)} "
                "partition(s):", *(f"  {describe(e)}" for e in differ)]
    if not checked:
        return ["canary: no partition has a position to check"]
    return [f"canary: the next record of each of the {len(checked)} partition(s) is the same on both clusters"]
