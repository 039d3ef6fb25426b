"""Group translation at scale: one sync cycle of many groups over many partitions, and every group exact.

    .venv/bin/python bench/groups_bench.py [--groups 500,1000,2000] [--partitions 50] [--mm2]

One throwaway sandbox; one topic of PARTITIONS partitions on the old cluster (20 records each),
mirrored once. Then, for each group count N, N consumer groups are committed on the old cluster
at random positions on every partition, and one `cutover offsets sync` is timed (wall,
process start included: the state read, every group's offsets on both clusters, the translations,
the commits). Each run checks every group on every partition: the target offset must be the exact
target position of the record the group reads next on the old cluster. With --mm2, MirrorMaker 2
(tasks.max 1, 1 s sync intervals) syncs the largest N into a clean target: seconds until every
group has a committed offset on the target on every partition (or a 10-minute cap), and how many
groups it translated, re-read and skipped.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import yaml
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).parent))
from mirror_bench import create, misses, produce, sequence_by_offset, target_offsets, throwaway_sandbox, wait_gone
from mm2 import run_mirror_maker

TOPIC, CLI = "bench.groups", str(Path(sys.executable).with_name("cutover"))
PER_PARTITION = 20


def commit_many(bootstrap: str, groups: list[str], partitions: int, rnd: random.Random) -> dict[str, dict[int, int]]:
    """Commit every group at random positions on every partition: all requests in flight, then wait."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    chosen = {g: {p: rnd.randint(0, PER_PARTITION) for p in range(partitions)} for g in groups}
    for i in range(0, len(groups), 200):
        futures = []
        for g in groups[i:i + 200]:
            tps = [TopicPartition(TOPIC, p, o) for p, o in chosen[g].items()]
            futures += admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)]).values()
        for f in futures:
            f.result(60)
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", default="500,1000,2000")
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--mm2", action="store_true")
    args = ap.parse_args()
    counts = [int(n) for n in args.groups.split(",")]
    rnd = random.Random(3)
    rows = []
    with throwaway_sandbox(with_mirror_maker=args.mm2) as (box, old, new, tmp):
        create(old, TOPIC, args.partitions)
        produce(old, TOPIC, [(i % args.partitions, b"k", b"%012d|" % i)
                             for i in range(PER_PARTITION * args.partitions)])
        plan = box.dir / "groups.yaml"
        spec = yaml.safe_load(box.plan_file.read_text())
        spec.update({"name": "groups", "topics": {"include": [r"bench\.groups"]},
                     "groups": {"include": [r"bench\.g\d+"]}})
        plan.write_text(yaml.safe_dump(spec))
        subprocess.run([CLI, "mirror", "--plan", str(plan), "--until-caught-up"], check=True, capture_output=True)
        source = sequence_by_offset(old, TOPIC, args.partitions)
        target = sequence_by_offset(new, TOPIC, args.partitions)
        done: list[str] = []
        chosen: dict[str, dict[int, int]] = {}
        for n in counts:
            more = [f"bench.g{i}" for i in range(len(done), n)]
            chosen.update(commit_many(old, more, args.partitions, rnd))
            done += more
            start = time.monotonic()
            run = subprocess.run([CLI, "offsets", "sync", "--plan", str(plan), "-o", "json"],
                                 capture_output=True, text=True)
            seconds = time.monotonic() - start
            if run.returncode:
                raise SystemExit(f"sync-groups failed: {run.stderr}")
            synced = sum(1 for g in json.loads(run.stdout)["groups"] if len(g["committed"]) == args.partitions)
            reread, skipped, missing = misses(source, target, chosen, target_offsets(new, TOPIC, done))
            rows.append((f"cutover offsets sync, {n:,} groups", n, seconds, synced, reread, skipped,
                         missing))
        if args.mm2:
            admin = AdminClient({"bootstrap.servers": new})
            for f in admin.delete_topics([TOPIC]).values():
                f.result(60)
            for f in admin.delete_consumer_groups(done).values():
                f.result(60)
            wait_gone(admin, TOPIC)
            try:
                mm2 = run_mirror_maker(old, new, [TOPIC], done, Path(tmp) / "mm2", timeout=600)
                got = {g: {p: o for (t, p), o in offs.items() if t == TOPIC} for g, offs in
                       mm2.groups_synced.items()}
                secs = mm2.seconds_to_caught_up
            except TimeoutError:
                got, secs = target_offsets(new, TOPIC, done), float("nan")
            target = sequence_by_offset(new, TOPIC, args.partitions)
            complete = sum(1 for g in done if len(got.get(g, {})) == args.partitions)
            reread, skipped, missing = misses(source, target, chosen, got)
            rows.append((f"MirrorMaker 2, {len(done):,} groups", len(done), secs, complete, reread, skipped,
                         missing))
    print(f"\n{args.partitions} partitions, {PER_PARTITION} records each; groups at random positions on every "
          "partition\n")
    print("| run | group x partitions | seconds | groups complete | re-read | skipped | not translated |")
    print("|---|---|---|---|---|---|---|")
    for name, n, secs, complete, reread, skipped, missing in rows:
        print(f"| {name} | {n * args.partitions:,} | {secs:.1f} | {complete:,} of {n:,} | {reread:,} | {skipped:,} | "
              f"{missing:,} |")


if __name__ == "__main__":
    main()
