"""State bench: how long a mirror restart and a translation take after a simulated day of mirroring.

    .venv/bin/python bench/state_bench.py [--transactions 100000] [--partitions 50] [--v1-transactions 100000]

Brings up a throwaway sandbox and writes, into the new cluster's state topics, the state
a day of mirroring leaves: every transaction touches every partition (the worst case:
one segment per partition per transaction) with a few records each and our commit
marker after them. Written twice, each measured on its own prefix:

1. **checkpointed (this cutover)**: the records `StateWriter` gives the copier, a
   delta per transaction and a checkpoint whenever the deltas since the last one outweigh
   it (the same code the copier runs; simulated transactions are grouped into fewer
   Kafka transactions only to write the day faster);
2. **per-transaction records (before)**: the format of cutover before it, a progress
   record and a segments record per partition per transaction, read by the same loader
   (which still reads that format).

Then, for each: a restart's read of the state with the map (`state.load`), the read
without the map (what `mirror status` does), and translating a consumer group's
position on every partition through the loaded map. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from array import array
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).parents[1]))

from cutover.kafka.clients import ClusterRef
from cutover.local.sandbox import Sandbox
from cutover.mirror import groups
from cutover.mirror import state as st
from cutover.mirror.offsetmap import PartitionMap, Segment

SOURCE = "bench-source-cluster"
TP = tuple[str, int]


class Sim:
    """A day of transactions over `partitions` partitions, as the copier would commit them."""

    def __init__(self, partitions: int, seed: int = 7) -> None:
        self.rnd = random.Random(seed)
        self.maps = {("bench.orders", p): PartitionMap() for p in range(partitions)}

    def transaction(self) -> dict[TP, tuple[PartitionMap, list[Segment]]]:
        updates = {}
        for tp, pm in self.maps.items():
            n, skip = self.rnd.randint(1, 20), self.rnd.choice((0, 0, 0, 1))  # source gaps: markers, aborts
            new = pm.progress()
            seg = Segment(pm.next_src + skip, pm.next_tgt, n)
            new.next_src, new.next_tgt, new.records = seg.src_end, seg.tgt_end, pm.records + n
            updates[tp] = (new, [seg])
        return updates

    def apply(self, updates: dict[TP, tuple[PartitionMap, list[Segment]]]) -> None:
        for tp, (pm, segs) in updates.items():
            pm.replace(*self.maps[tp].arrays())
            pm.add(segs)
            self.maps[tp] = pm

    def after(self, updates: dict[TP, tuple[PartitionMap, list[Segment]]]) -> dict[TP, PartitionMap]:
        out = {}
        for tp, old in self.maps.items():
            pm, segs = updates.get(tp, (old.progress(), []))
            pm.replace(*(array("q", a) for a in old.arrays()))
            pm.add(segs)
            out[tp] = pm
        return out


def write_checkpointed(rt: st.Route, bootstrap: str, transactions: int, partitions: int,
                       group_every: int = 200) -> dict[str, float]:
    """This cutover's state: StateWriter's records, a Kafka transaction per `group_every` simulated ones."""
    sim, writer = Sim(partitions), st.StateWriter(rt, SOURCE, "0/1", None)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{rt.prefix}",
                         "linger.ms": 20, "message.max.bytes": 100_000_000})
    producer.init_transactions(30)
    started, checkpoints, written = time.monotonic(), 0, 0
    producer.begin_transaction()
    for i in range(transactions):
        updates = sim.transaction()
        if writer.due(sim.maps):
            after = sim.after(updates)
            first: list[int] = []
            for j, (topic, key, value) in enumerate(writer.checkpoint(after)):
                producer.produce(topic, key=key, value=value, partition=0,
                                 on_delivery=(lambda err, m, into=first: into.append(m.offset())) if j == 0 else None)
                written += len(value or b"")
            assert producer.flush(120) == 0 and first
            for topic, key, value in writer.pointer(first[0]):
                producer.produce(topic, key=key, value=value, partition=0)
            sim.maps = after
            checkpoints += 1
        else:
            topic, key, value = writer.delta(updates)
            producer.produce(topic, key=key, value=value, partition=0)
            written += len(value or b"")
            sim.apply(updates)
        writer.committed()
        if (i + 1) % group_every == 0:
            producer.commit_transaction(120)
            producer.begin_transaction()
    producer.commit_transaction(120)
    return {"seconds": time.monotonic() - started, "checkpoints": checkpoints, "bytes_written": written,
            "segments": sum(pm.segment_count for pm in sim.maps.values()),
            "positions": {f"{t}/{p}": pm.next_src for (t, p), pm in sim.maps.items()}}


def write_per_transaction(rt: st.Route, bootstrap: str, transactions: int, partitions: int) -> dict[str, float]:
    """The format before checkpoints: per partition per transaction a progress record (compacted key) and a
    segments record (a key of its own: never compacted away)."""
    sim = Sim(partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000, "enable.idempotence": True})
    started, written = time.monotonic(), 0
    for _ in range(transactions):
        updates = sim.transaction()
        for (t, p), (pm, segs) in updates.items():
            progress = (json.dumps(["progress", SOURCE, t, p], separators=(",", ":")).encode(), json.dumps(
                {"v": 1, "start_src": pm.start_src, "next_src": pm.next_src, "next_tgt": pm.next_tgt,
                 "shard": "0/1", "at": 0.0, "gaps": []}, separators=(",", ":"), sort_keys=True).encode())
            segments = (json.dumps(["segments", SOURCE, t, p, segs[0].src], separators=(",", ":")).encode(),
                        json.dumps({"v": 1, "segments": [[s.src, s.tgt, s.length] for s in segs]},
                                   separators=(",", ":"), sort_keys=True).encode())
            for topic, (key, value) in ((rt.progress_topic, progress), (rt.offsets_topic, segments)):
                while True:
                    try:
                        producer.produce(topic, key=key, value=value, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.05)
                written += len(value)
        producer.poll(0)
        sim.apply(updates)
    assert producer.flush(600) == 0
    return {"seconds": time.monotonic() - started, "checkpoints": 0, "bytes_written": written,
            "segments": sum(pm.segment_count for pm in sim.maps.values()),
            "positions": {f"{t}/{p}": pm.next_src for (t, p), pm in sim.maps.items()}}


def measure(rt: st.Route, written: dict[str, float]) -> dict[str, float]:
    started = time.monotonic()
    full = st.load(rt, SOURCE, with_map=True, timeout=60)
    restart = time.monotonic() - started
    started = time.monotonic()
    light = st.load(rt, SOURCE, with_map=False, timeout=60)
    status = time.monotonic() - started
    assert {f"{t}/{p}": pm.next_src for (t, p), pm in full.partitions.items()} == written["positions"]
    assert {f"{t}/{p}": pm.next_src for (t, p), pm in light.partitions.items()} == written["positions"]
    assert sum(pm.segment_count for pm in full.partitions.values()) == written["segments"]
    rnd = random.Random(1)
    group = {tp: rnd.randrange(pm.next_src + 1) for tp, pm in full.partitions.items()}
    started = time.monotonic()
    translated = groups.translate(groups.Translator(full.partitions), group)
    translate = time.monotonic() - started
    assert all(t.target_offset is not None for t in translated)
    return {"restart_s": restart, "read_mb": full.read_bytes / 1e6, "status_s": status,
            "translate_ms": translate * 1000}


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--transactions", type=int, default=100_000)
    args.add_argument("--partitions", type=int, default=50)
    args.add_argument("--v1-transactions", type=int, default=100_000,
                      help="transactions of the per-transaction format (0: skip it)")
    opts = args.parse_args()
    box = Sandbox(Path(tempfile.mkdtemp(prefix="cutover-state-bench-")))
    box.up()
    try:
        bootstrap = box.status()["new"]["bootstrap"]
        new = ClusterRef("new", {"bootstrap.servers": bootstrap})
        rows = []
        for name, prefix, n, write in (("checkpointed (this cutover)", "__bench_v2", opts.transactions,
                                        write_checkpointed),
                                       ("per-transaction records (before)", "__bench_v1", opts.v1_transactions,
                                        write_per_transaction)):
            if n <= 0:
                continue
            rt = st.Route("forward", ClusterRef("old", {}), new, prefix)
            st.ensure_topics(rt, 1)
            print(f"writing {name}: {n:,} transactions x {opts.partitions} partitions", file=sys.stderr)
            written = write(rt, bootstrap, n, opts.partitions)
            print(f"  written in {written['seconds']:.0f}s; measuring", file=sys.stderr)
            rows.append((name, n, written, measure(rt, written)))
    finally:
        box.down()
    print(f"| state format | transactions | segments | written MB | checkpoints | restart s | read MB | "
          f"status s | translate {opts.partitions} partitions ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, n, written, m in rows:
        print(f"| {name} | {n:,} | {written['segments']:,} | {written['bytes_written'] / 1e6:,.1f} | "
              f"{written['checkpoints']} | {m['restart_s']:.1f} | {m['read_mb']:,.1f} | {m['status_s']:.1f} | "
              f"{m['translate_ms']:.2f} |")


if __name__ == "__main__":
    main()
