"""Mirror bench: cutover mirror (exactly-once) vs MirrorMaker 2 vs a produce-only ceiling, same data.

    .venv/bin/python bench/mirror_bench.py [--records 200000] [--partitions 12] [--size 1024]

Brings up a throwaway sandbox, fills one topic on the old cluster, commits consumer
groups at random positions there, then measures on the same data:

1. produce-only: writing the same records to the new cluster (the physical ceiling);
2. cutover mirror --until-caught-up (transactions on, group sync on);
3. MirrorMaker 2 (IdentityReplicationPolicy, group offset sync on), on a clean target;

and, for each tool, how many records its translated group offsets make a consumer
re-read or skip compared with the exact next record. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).parent))
from mm2 import run_mirror_maker

from cutover.local.sandbox import Sandbox

TOPIC, CLI = "bench.orders", str(Path(sys.executable).with_name("cutover"))
TP = tuple[int, int]


def records(n: int, partitions: int, size: int) -> list[tuple[int, bytes, bytes]]:
    pad = b"x" * max(0, size - 24)
    return [(i % partitions, b"key-%d" % (i % 5000), b"%012d|" % i + pad) for i in range(n)]


def produce(bootstrap: str, topic: str, data: list[tuple[int, bytes, bytes]]) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000})
    start = time.monotonic()
    for p, k, v in data:
        while True:
            try:
                producer.produce(topic, v, k, partition=p)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0
    return time.monotonic() - start


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def sequence_by_offset(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, int]]]:
    """Per partition: (offset, sequence number in the value) of every committed record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-reader", "enable.partition.eof": True,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    pending = set(range(partitions))
    while pending:
        for m in c.consume(10_000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
                    pending.discard(m.partition())
                continue
            out[m.partition()].append((m.offset(), int(m.value()[:12])))
    c.close()
    return out


def commit_groups(bootstrap: str, topic: str, partitions: int, groups: list[str], per_partition: int,
                  rnd: random.Random) -> dict[str, dict[int, int]]:
    chosen = {}
    for g in groups:
        offsets = {p: rnd.randint(0, per_partition) for p in range(partitions)}
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": g})
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
        c.close()
        chosen[g] = offsets
    return chosen


def target_offsets(bootstrap: str, topic: str, groups: list[str]) -> dict[str, dict[int, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    out = {}
    for g in groups:
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])[g].result(30)
        out[g] = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic and tp.offset >= 0}
    return out


def misses(source: dict[int, list[tuple[int, int]]], target: dict[int, list[tuple[int, int]]],
           src_groups: dict[str, dict[int, int]], tgt_groups: dict[str, dict[int, int]]) -> tuple[int, int, int]:
    """(re-read, skipped, partitions not translated) summed over every group and partition."""
    reread = skipped = missing = 0
    for g, offsets in src_groups.items():
        for p, o in offsets.items():
            t = tgt_groups.get(g, {}).get(p)
            if t is None:
                missing += 1
                continue
            nxt = next((seq for off, seq in source[p] if off >= o), None)  # the record the group reads next
            exact = next((off for off, seq in target[p] if seq == nxt), None) if nxt is not None else None
            exact = exact if exact is not None else (target[p][-1][0] + 1 if target[p] else 0)
            reread += sum(1 for off, _ in target[p] if t <= off < exact)
            skipped += sum(1 for off, _ in target[p] if exact <= off < t)
    return reread, skipped, missing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--groups", type=int, default=8)
    args = ap.parse_args()
    rnd = random.Random(1)
    data = records(args.records, args.partitions, args.size)
    mb = sum(len(k) + len(v) for _, k, v in data) / 1e6
    groups = [f"bench.g{i}" for i in range(args.groups)]
    with tempfile.TemporaryDirectory(prefix="cutover-bench-") as tmp:
        box = Sandbox(Path(tmp) / "box")
        subprocess.run([CLI, "local", "fetch", "--with-mirror-maker"], check=True)
        subprocess.run([CLI, "local", "up", "--dir", str(box.dir)], check=True, capture_output=True)
        try:
            st = box.status()
            old, new = (st[s]["bootstrap"] for s in ("old", "new"))
            create(old, TOPIC, args.partitions)
            produce(old, TOPIC, data)
            src_groups = commit_groups(old, TOPIC, args.partitions, groups, args.records // args.partitions, rnd)
            source = sequence_by_offset(old, TOPIC, args.partitions)

            create(new, "bench.ceiling", args.partitions)
            ceiling = produce(new, "bench.ceiling", data)

            plan = box.dir / "bench.yaml"
            spec = yaml.safe_load(box.plan_file.read_text())
            spec.update({"name": "bench", "topics": {"include": [r"bench\.orders"]},
                         "groups": {"include": [r"bench\..*"]}})
            plan.write_text(yaml.safe_dump(spec))
            start = time.monotonic()
            run = subprocess.run([CLI, "mirror", "--plan", str(plan), "--until-caught-up", "-o", "json"],
                                 capture_output=True, text=True)
            if run.returncode:
                raise SystemExit(f"cutover mirror failed: {run.stderr}")
            cutover_total = time.monotonic() - start
            cutover_copy = json.loads(run.stdout)["seconds"]
            cut_misses = misses(source, sequence_by_offset(new, TOPIC, args.partitions), src_groups,
                                target_offsets(new, TOPIC, groups))

            admin = AdminClient({"bootstrap.servers": new})  # clean target for MirrorMaker 2
            for f in admin.delete_topics([TOPIC]).values():
                f.result(60)
            for f in admin.delete_consumer_groups(groups).values():
                f.result(60)
            wait_gone(admin, TOPIC)
            mm2 = run_mirror_maker(old, new, [TOPIC], groups, Path(tmp) / "mm2", timeout=1200)
            mm2_groups = {g: {p: o for (t, p), o in offs.items() if t == TOPIC} for g, offs in
                          mm2.groups_synced.items()}
            mm2_misses = misses(source, sequence_by_offset(new, TOPIC, args.partitions), src_groups, mm2_groups)
        finally:
            subprocess.run([CLI, "local", "down", "--purge", "--dir", str(box.dir)], capture_output=True)
    mm2_copy = mm2.seconds_to_caught_up - mm2.startup_seconds
    rows = [("produce-only ceiling (new cluster)", ceiling, ceiling, None),
            ("cutover mirror, exactly-once", cutover_copy, cutover_total, cut_misses),
            ("MirrorMaker 2, at-least-once", mm2_copy, mm2.seconds_to_caught_up, mm2_misses)]
    print(f"\n{args.records:,} records x {args.size} B ({mb:.0f} MB), {args.partitions} partitions, "
          f"{args.groups} groups at random positions\n")
    print("| run | copy s | rec/s | MB/s | wall s incl. startup | re-read | skipped | not translated |")
    print("|---|---|---|---|---|---|---|---|")
    for name, copy, wall, m in rows:
        r, s, n = m if m else ("-", "-", "-")
        print(f"| {name} | {copy:.1f} | {args.records / copy:,.0f} | {mb / copy:.1f} | {wall:.1f} | {r} | {s} | {n} |")
    print(f"\ncutover / MM2 throughput (copy phase): {mm2_copy / cutover_copy:.2f}x; "
          f"cutover / ceiling: {ceiling / cutover_copy:.2f}x")


def wait_gone(admin: AdminClient, topic: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise SystemExit(f"topic {topic} still exists after {timeout}s")
        time.sleep(0.2)


if __name__ == "__main__":
    main()
