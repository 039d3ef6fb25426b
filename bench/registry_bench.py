"""Registry audit bench: `cutover registry audit --all` (headers only) vs a bare consume loop, same records.

    .venv/bin/python bench/registry_bench.py --records 1000000 --size 1024

Brings up a throwaway sandbox with its two registries, registers one Avro schema on the old
registry and syncs it to the new one, and fills a 12-partition topic on the new cluster
with framed 1 KB values (0x00, the schema's id, a body the audit never parses). Then, on
the same records:

1. the floor: a bare confluent-kafka loop that consumes every record in batches of 10,000
   and touches each value (what any reader in Python at least pays);
2. `cutover registry audit --all`, as a user runs it (a process of its own), its records per
   second from its own `seconds` and from the wall clock.

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.local.sandbox import Sandbox
from cutover.plan import derive

PARTITIONS = 12


def fill(props: dict[str, str], topic: str, records: int, size: int, schema_id: int) -> None:
    admin = AdminClient(props)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({**props, "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4",
                         "queue.buffering.max.kbytes": 1_048_576})
    body = os.urandom(size - 5)
    value = b"\x00" + schema_id.to_bytes(4, "big") + body
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def bare_loop(props: dict[str, str], topic: str, records: int) -> float:
    consumer = Consumer({**props, "group.id": "bench-bare", "enable.auto.commit": False,
                         "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20,
                         "queued.max.messages.kbytes": 262144})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = 0
    began = None
    while seen < records:
        batch = consumer.consume(10_000, 1.0)
        if began is None and batch:
            began = time.monotonic()
        for m in batch:
            v = m.value()
            if v is not None and v[0] == 0:
                seen += 1
    consumer.close()
    assert began is not None
    return time.monotonic() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cutover-registry-bench-") as tmp:
        box = Sandbox(Path(tmp) / "sandbox")
        status = box.up(registry=True)
        try:
            from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

            topic = "bench.framed"
            schema = {"type": "record", "name": "B", "fields": [{"name": "b", "type": "bytes"}]}
            sid = SchemaRegistryClient({"url": status["registry"]["old"]["url"]}).register_schema(
                f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
            plan = derive(box.plan_file, Path(tmp) / "bench.yaml", merge=True, name="bench",
                          topics={"include": [r"bench\..*"]})
            admin = AdminClient(plan.cluster("old"))  # the sync moves the subjects of the old cluster's topics
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            subprocess.run([sys.executable, "-m", "cutover", "registry", "sync", "--plan", str(plan.file),
                            "--execute"], check=True, capture_output=True)
            new = plan.cluster("new")
            began = time.monotonic()
            fill(new, topic, args.records, args.size, sid)
            print(f"filled {args.records:,} x {args.size} B in {time.monotonic() - began:.1f}s", file=sys.stderr)
            bare = bare_loop(new, topic, args.records)
            began = time.monotonic()
            run = subprocess.run([sys.executable, "-m", "cutover", "registry", "audit", "--plan", str(plan.file),
                                  "--all", "-o", "json"], capture_output=True, text=True, check=False)
            wall = time.monotonic() - began
            result = json.loads(run.stdout)
            assert result["passed"] and result["records"] == args.records, (run.stderr, result["failures"][:3])
            own = float(result["seconds"])
            n = args.records
            print(f"\n{n:,} records x {args.size} B, {PARTITIONS} partitions, one schema id\n")
            print("| run | s | records/s | vs bare loop |")
            print("|---|---|---|---|")
            print(f"| bare consume loop (floor) | {bare:.2f} | {n / bare:,.0f} | 1.00x |")
            print(f"| registry audit --all, its own seconds | {own:.2f} | {n / own:,.0f} | {bare / own:.2f}x |")
            print(f"| registry audit --all, wall clock (process start included) | {wall:.2f} | {n / wall:,.0f} | "
                  f"{bare / wall:.2f}x |")
        finally:
            box.down(kill=True)


if __name__ == "__main__":
    main()
