"""Mirror bench: cutover mirror (exactly-once) vs MirrorMaker 2 vs a produce-only ceiling, same data.

    .venv/bin/python bench/mirror_bench.py [--records 200000] [--partitions 12] [--size 1024] [--workers 1]
    .venv/bin/python bench/mirror_bench.py --compression [--records 200000]

Brings up a throwaway sandbox, fills one topic on the old cluster, commits consumer
groups at random positions there, then measures on the same data:

1. produce-only: writing the same records to the new cluster (the physical ceiling);
2. a bare Python copy loop (consume batches, produce; no transactions, no map): the most a
   Python mirror does here;
3. cutover mirror --until-caught-up (transactions on, group sync on);
4. MirrorMaker 2 (IdentityReplicationPolicy, group offset sync on, tasks.max = --workers), on a
   clean target;

With --compression instead: an lz4 topic, a zstd topic and a "producer" topic written by a zstd
producer, mirrored by cutover with mirror.compression auto, zstd, and none (the mirror before it
kept compression), and each topic's bytes on disk on both clusters (Kafka's
LogDirsCommand: the DescribeLogDirs admin API).

and, for each tool, how many records its translated group offsets make a consumer
re-read or skip compared with the exact next record. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).parent))
from mm2 import run_mirror_maker

from cutover.local.sandbox import Sandbox

TOPIC, CLI = "bench.orders", str(Path(sys.executable).with_name("cutover"))
TP = tuple[int, int]


@contextmanager
def throwaway_sandbox(with_mirror_maker: bool = False) -> Iterator[tuple[Sandbox, str, str, Path]]:
    """A sandbox of its own, purged at the end: (sandbox, old bootstrap, new bootstrap, scratch folder)."""
    with tempfile.TemporaryDirectory(prefix="cutover-bench-") as tmp:
        box = Sandbox(Path(tmp) / "box")
        if with_mirror_maker:
            subprocess.run([CLI, "local", "fetch", "--with-mirror-maker"], check=True)
        subprocess.run([CLI, "local", "up", "--dir", str(box.dir)], check=True, capture_output=True)
        try:
            st = box.status()
            yield box, st["old"]["bootstrap"], st["new"]["bootstrap"], Path(tmp)
        finally:
            subprocess.run([CLI, "local", "down", "--purge", "--dir", str(box.dir)], capture_output=True)


def records(n: int, partitions: int, size: int) -> list[tuple[int, bytes, bytes]]:
    pad = b"x" * max(0, size - 24)
    return [(i % partitions, b"key-%d" % (i % 5000), b"%012d|" % i + pad) for i in range(n)]


def produce(bootstrap: str, topic: str, data: list[tuple[int, bytes, bytes]], compression: str = "none") -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000,
                         "compression.type": compression})
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


def bare_copy(source: str, target: str, topic: str, partitions: int, into: str | None = None,
              batch_size: int = 1_000_000, compression: str = "lz4") -> float:
    """The most a Python mirror does here: consume batches, produce each record to the same partition
    with its key, value, timestamp and headers; no transactions, no offset map, no progress, no
    delivery callbacks. Seconds from the reader's assignment (as cutover's own `seconds`: the first
    fetch after it takes about 0.5 s here) to the last record acknowledged."""
    c = Consumer({"bootstrap.servers": source, "group.id": "bench-bare", "enable.partition.eof": True,
                  "enable.auto.commit": False, "queued.max.messages.kbytes": 262144,
                  "fetch.queue.backoff.ms": 10})  # the mirror's reader settings, so neither stalls on a full queue
    producer = Producer({"bootstrap.servers": target, "acks": "all", "linger.ms": 10, "batch.size": batch_size,
                         "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000,
                         "compression.type": compression})  # the mirror's codec here (mirror.compression auto)
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    pending, start = {p for p, e in ends.items() if e > 0}, time.monotonic()
    produce, into = producer.produce, into or topic
    while pending:
        for m in c.consume(10_000, 0.2):
            if m.error() is None:
                ts_type, ts = m.timestamp()
                while True:
                    try:
                        produce(into, m.value(), m.key(), m.partition(), timestamp=ts if ts_type else 0,
                                headers=m.headers())
                        break
                    except BufferError:
                        producer.poll(0.05)
            elif m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
                pending.discard(m.partition())
        producer.poll(0)
    assert producer.flush(300) == 0
    c.close()
    return time.monotonic() - start


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
    ap.add_argument("--workers", type=int, default=1, help="cutover mirror --workers, and MirrorMaker 2's tasks.max")
    ap.add_argument("--compression", action="store_true", help="measure bytes on disk instead (see above)")
    ap.add_argument("--latency", metavar="RATES", help="measure follow-mode delay at these rec/s instead (5000,20000)")
    ap.add_argument("--seconds", type=float, default=30, help="--latency: seconds of steady traffic per rate")
    ap.add_argument("--group-sync-interval", default="5s", help="--latency: the plan's mirror.group_sync_interval")
    args = ap.parse_args()
    if args.compression:
        return compression_bench(args.records)
    if args.latency:
        return latency_bench([int(r) for r in args.latency.split(",")], args.seconds, args.partitions,
                             args.group_sync_interval)
    rnd = random.Random(1)
    data = records(args.records, args.partitions, args.size)
    mb = sum(len(k) + len(v) for _, k, v in data) / 1e6
    groups = [f"bench.g{i}" for i in range(args.groups)]
    with throwaway_sandbox(with_mirror_maker=True) as (box, old, new, tmp):
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
        create(new, "bench.bare", args.partitions)
        bare = bare_copy(old, new, TOPIC, args.partitions, "bench.bare")

        start = time.monotonic()
        run = subprocess.run([CLI, "mirror", "--plan", str(plan), "--until-caught-up", "-o", "json",
                              "--workers", str(args.workers)], capture_output=True, text=True)
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
        mm2 = run_mirror_maker(old, new, [TOPIC], groups, Path(tmp) / "mm2", timeout=1200, tasks=args.workers)
        mm2_groups = {g: {p: o for (t, p), o in offs.items() if t == TOPIC} for g, offs in
                      mm2.groups_synced.items()}
        mm2_misses = misses(source, sequence_by_offset(new, TOPIC, args.partitions), src_groups, mm2_groups)
    mm2_copy = mm2.seconds_to_caught_up - mm2.startup_seconds
    rows = [("produce-only ceiling (new cluster)", ceiling, ceiling, None),
            ("bare Python copy loop (no transactions, no map)", bare, bare, None),
            (f"cutover mirror, exactly-once, --workers {args.workers}", cutover_copy, cutover_total, cut_misses),
            (f"MirrorMaker 2, at-least-once, tasks.max={args.workers}", mm2_copy, mm2.seconds_to_caught_up, mm2_misses)]
    print(f"\n{args.records:,} records x {args.size} B ({mb:.0f} MB), {args.partitions} partitions, "
          f"{args.groups} groups at random positions\n")
    print("| run | copy s | rec/s | MB/s | wall s incl. startup | re-read | skipped | not translated |")
    print("|---|---|---|---|---|---|---|---|")
    for name, copy, wall, m in rows:
        r, s, n = m if m else ("-", "-", "-")
        print(f"| {name} | {copy:.1f} | {args.records / copy:,.0f} | {mb / copy:.1f} | {wall:.1f} | {r} | {s} | {n} |")
    print(f"\ncutover / bare loop: {bare / cutover_copy:.2f}x; cutover / MM2 (copy phase): "
          f"{mm2_copy / cutover_copy:.2f}x; cutover / ceiling: {ceiling / cutover_copy:.2f}x")


def latency_bench(rates: list[int], seconds: float, partitions: int, sync_every: str) -> None:
    """cutover mirror in follow mode under steady traffic: per record, the delay from its append on the
    old cluster (LogAppendTime) until a read_committed consumer on the new cluster reads it; and the
    lag the mirror carries (records written minus records readable on the target), sampled."""
    rows = []
    with throwaway_sandbox() as (box, _old, _new, _tmp):
        rows = [follow(box, rate, seconds, partitions, sync_every) for rate in rates]
    print(f"\nfollow mode, {seconds:.0f} s of steady traffic, {partitions} partitions, 12-byte records, "
          f"group_sync_interval {sync_every}; delay = "
          "append on old -> readable (read_committed) on new; traffic starts once the mirror is ready\n")
    print("| rate rec/s | written | read on new | p50 s | p99 s | max s | lag p50 (records) | lag max |")
    print("|---|---|---|---|---|---|---|---|")
    for rate, n, got, p50, p99, mx, lag50, lagmax in rows:
        print(f"| {rate:,} | {n:,} | {got:,} | {p50:.3f} | {p99:.3f} | {mx:.3f} | {lag50:,} | {lagmax:,} |")


Row = tuple[int, int, int, float, float, float, int, int]


def follow(box: Sandbox, rate: int, seconds: float, partitions: int, sync_every: str) -> Row:
    import threading

    st = box.status()
    old, new = (st[s]["bootstrap"] for s in ("old", "new"))
    topic = f"bench.live{rate}"
    admin = AdminClient({"bootstrap.servers": old})  # kept: a client without a reference is destroyed at once
    admin.create_topics([NewTopic(topic, partitions, 1, config={
        "message.timestamp.type": "LogAppendTime"})])[topic].result(60)
    spec = yaml.safe_load(box.plan_file.read_text())
    spec.update({"name": f"live{rate}", "topics": {"include": [re.escape(topic)]}, "groups": {"include": []}})
    spec["mirror"] = {**spec.get("mirror", {}), "state_prefix": f"__live{rate}", "group_sync_interval": sync_every}
    plan = box.dir / f"live{rate}.yaml"
    plan.write_text(yaml.safe_dump(spec))
    ready = box.dir / f"live{rate}.ready"
    mirror = subprocess.Popen([CLI, "mirror", "--plan", str(plan), "--ready-file", str(ready)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    delays: list[float] = []
    seen, written, lags = [0], [0], []
    done, assigned = threading.Event(), threading.Event()

    def read() -> None:
        c = Consumer({"bootstrap.servers": new, "group.id": f"bench-live-{rate}", "isolation.level": "read_committed",
                      "fetch.wait.max.ms": 10, "enable.auto.commit": False})
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        c.consume(1, 1.0)  # connected and fetching before the traffic starts
        assigned.set()
        while not done.is_set() or seen[0] < written[0]:
            for m in c.consume(10_000, 0.1):
                if m.error() is None:
                    delays.append(time.time() - m.timestamp()[1] / 1000)
                    seen[0] += 1
        c.close()

    # Steady state only: the traffic starts once the mirror owns its partitions (the target topic is
    # made by then) and the reader is fetching, so neither one's start-up counts as delay.
    wait_for(lambda: ready.exists() or mirror.poll() is not None, 120, "the mirror to be ready")
    if mirror.poll() is not None:
        raise SystemExit(f"cutover mirror exited with {mirror.returncode} before it was ready")
    reader = threading.Thread(target=read)
    reader.start()
    wait_for(assigned.is_set, 60, "the reader on the new cluster")
    producer = Producer({"bootstrap.servers": old, "linger.ms": 5, "enable.idempotence": True})
    start, i = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate)
        while i < due:
            producer.produce(topic, b"%012d" % i, partition=i % partitions)
            i += 1
        producer.poll(0)
        written[0] = i
        if int((time.monotonic() - start) / 0.5) > len(lags):
            lags.append(i - seen[0])
        time.sleep(0.01)
    producer.flush(30)
    written[0] = i
    done.set()
    reader.join(120)
    mirror.terminate()
    mirror.wait(60)
    steady, lag = sorted(delays), sorted(lags)
    return (rate, i, len(delays), steady[len(steady) // 2], steady[int(len(steady) * 0.99)], steady[-1],
            lag[len(lag) // 2], max(lags))


def wait_for(cond: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting {seconds:.0f} s for {what}")
        time.sleep(0.05)


def compression_bench(n: int) -> None:
    """Bytes on disk per topic on both clusters, mirrored with mirror.compression auto, zstd and none."""
    topics = {"bench.lz4": "lz4", "bench.zstd": "zstd", "bench.producer": "producer"}
    rnd = random.Random(2)
    words = [b"order", b"customer", b"eur", b"usd", b"shipped", b"pending", b"warehouse", b"berlin", b"paris"]
    data = [(i % 6, b"key-%d" % (i % 5000), b'{"id": %d, "status": "%s", "note": "%s"}' % (
        i, rnd.choice(words), b" ".join(rnd.choices(words, k=20)))) for i in range(n)]
    sizes: dict[str, dict[str, int]] = {}
    with throwaway_sandbox() as (box, old, new, _tmp):
        admin = AdminClient({"bootstrap.servers": old})
        fs = admin.create_topics([NewTopic(t, 6, 1, config={} if c == "producer" else {"compression.type": c})
                                  for t, c in topics.items()])
        for f in fs.values():
            f.result(60)
        for t in topics:
            produce(old, t, data, compression="zstd")  # what the "producer" topic keeps
        sizes["old cluster"] = log_sizes(old, list(topics))
        spec = yaml.safe_load(box.plan_file.read_text())
        for mode in ("auto", "zstd", "none"):
            plan = box.dir / f"bench-{mode}.yaml"
            spec.update({"name": f"bench{mode}", "topics": {"include": [r"bench\..*"]}, "groups": {"include": []}})
            spec["mirror"] = {**spec.get("mirror", {}), "compression": mode, "state_prefix": f"__bench{mode}"}
            plan.write_text(yaml.safe_dump(spec))
            run = subprocess.run([CLI, "mirror", "--plan", str(plan), "--until-caught-up", "-o", "json"],
                                 capture_output=True, text=True)
            if run.returncode:
                raise SystemExit(f"cutover mirror failed: {run.stderr}")
            sizes[f"new cluster, mirror.compression {mode}"] = log_sizes(new, list(topics))
            target = AdminClient({"bootstrap.servers": new})
            for f in target.delete_topics(list(topics)).values():
                f.result(60)
            for t in topics:
                wait_gone(target, t)
    raw = sum(len(k) + len(v) for _, k, v in data)
    print(f"\n{n:,} JSON records per topic ({raw / 1e6:.1f} MB of keys and values), 6 partitions; "
          "bytes on disk (MB, DescribeLogDirs)\n")
    print("| where | " + " | ".join(f"{t} ({c})" for t, c in topics.items()) + " |")
    print("|---|" + "---|" * len(topics))
    for where, by_topic in sizes.items():
        print(f"| {where} | " + " | ".join(f"{by_topic[t] / 1e6:.1f}" for t in topics) + " |")


def log_sizes(bootstrap: str, topics: list[str]) -> dict[str, int]:
    """Bytes on disk per topic, summed over partitions, as the brokers report them (DescribeLogDirs)."""
    from cutover import jvm

    cmd = [jvm.java(), "-cp", ":".join(str(j) for j in jvm.resolve(jvm.KAFKA_TOOLS)),
           "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", bootstrap, "--describe",
           "--topic-list", ",".join(topics)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    report = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    sizes = dict.fromkeys(topics, 0)
    for broker in report["brokers"]:
        for d in broker["logDirs"]:
            for part in d["partitions"]:
                sizes[part["partition"].rsplit("-", 1)[0]] += part["size"]
    return sizes


def wait_gone(admin: AdminClient, topic: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise SystemExit(f"topic {topic} still exists after {timeout}s")
        time.sleep(0.2)


if __name__ == "__main__":
    main()
