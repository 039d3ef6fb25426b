"""The canary of a translation: the record a reader reads next is the same on both clusters.

For each translated position, the first committed record at the source position on the source
cluster and at the translated position on the target cluster are read and compared: key, value,
headers and timestamp, byte for byte. Both at the end of their partition agree too (the reader
has read everything). Any other pair means the map would move the reader to another record.
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


def differences(source: ClusterRef, target: ClusterRef, rows: list[dict[str, Any]], timeout: float) -> list[str]:
    """The translated positions whose next record differs between the clusters (empty: all agree)."""
    src = first_records(source, {(r["topic"], r["partition"]): r["source_offset"] for r in rows}, timeout)
    dst = first_records(target, {(r["topic"], r["partition"]): r["target_offset"] for r in rows}, timeout)
    out = []
    for r in rows:
        tp = (r["topic"], r["partition"])
        if src[tp] != dst[tp]:
            def say(rec: Record) -> str:
                return "the end of the partition" if rec is None else \
                    f"a record (key {rec[0]!r}, {len(rec[1] or b'')} bytes, timestamp {rec[3]})"
            out.append(f"{r['topic']}[{r['partition']}]: at {r['source_offset']} on {source.describe()} "
                       f"{say(src[tp])}, at {r['target_offset']} on {target.describe()} {say(dst[tp])}")
    return out
