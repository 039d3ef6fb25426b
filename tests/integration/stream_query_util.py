"""Helpers of the Spark checkpoint reader tests: run the real query, write phases of records, ask
`cutover readers translate`, read a record back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.conftest import cutover
from tests.integration.kafka_util import produce

ROOT = Path(__file__).parents[2]


def query(plan_file: Path, side: str, topics: list[str], checkpoint: str, output: str) -> None:
    """Run the query on `side` until it has written what the topics hold, then stop it cleanly."""
    done = subprocess.run([sys.executable, "-m", "tests.integration.spark_stream_query", str(plan_file), side,
                           ",".join(topics), checkpoint, output],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def records(props: dict[str, str], topics: list[str], phase: str, n: int) -> list[str]:
    values = []
    for topic in topics:
        records = [{"key": str(i).encode(), "value": f"{topic}|{i % 2}|{phase}|{i}".encode(), "partition": i % 2}
                   for i in range(n)]
        produce(props, topic, records)
        values += [r["value"].decode() for r in records]
    return values


def value_at(props: dict[str, str], topic: str, partition: int, offset: int) -> str:
    consumer = Consumer({**props, "group.id": "readers-test-peek", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, partition, offset)])
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return str(msg.value().decode())
        raise AssertionError(f"no record at {topic}[{partition}] offset {offset}")
    finally:
        consumer.close()


def translate(plan_file: Path, *args: str) -> Any:
    run = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", *args, "-o", "json")
    assert run.code == 0, run.err
    return run.json()


def canary(old: dict[str, str], new: dict[str, str], result: Any, source_is_old: bool) -> None:
    """The record at each translated position is the record at the original one (byte for byte)."""
    src, dst = (old, new) if source_is_old else (new, old)
    for p in result["positions"]:
        assert p["target_offset"] >= 0
        assert value_at(src, p["topic"], p["partition"], p["source_offset"]) == \
            value_at(dst, p["topic"], p["partition"], p["target_offset"])
