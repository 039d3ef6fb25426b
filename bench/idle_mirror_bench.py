"""An idle `cutover mirror`'s CPU, and its brokers', with a group sync every second against one a minute.

    .venv/bin/python bench/idle_mirror_bench.py --dir /tmp/bench-idle --rounds 2 --seconds 60

Uses the sandbox at --dir (brought up if needed; it must be otherwise idle, and so must the machine).
Each round, for each sync interval: a topic of 3 partitions with 300 records and 8 groups that
committed on it, then `cutover mirror --plan` (following) on a plan that selects them; after 25 s
(it has copied everything and synced once), the mirror process's CPU and the two brokers' CPU
(from /proc) over --seconds. With a sync a minute, no sync falls in the window: the difference
is what the syncs cost. Prints a Markdown table of the medians.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from broker_threads_bench import cpu_seconds, sandbox_bench
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.plan import derive

INTERVALS = ("1s", "60s")


def one(box_dir: Path, plan_file: Path, interval: str, seconds: float, pids: list[int]) -> tuple[float, float]:
    ns = f"idle{time.time_ns()}"
    plan = derive(plan_file, box_dir / f"{ns}.yaml", merge=True, name=ns, topics={"include": [f"{ns}\\..*"]},
                  groups={"include": [f"{ns}\\..*"]}, mirror={"group_sync_interval": interval})
    old = dict(plan.cluster("old"))
    topic = f"{ns}.t"
    admin = AdminClient(old)  # held until the topic is made (a dropped handle aborts it)
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer(old)
    for i in range(300):
        producer.produce(topic, b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    for g in range(8):
        c = Consumer({**old, "group.id": f"{ns}.g{g}", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, p, 50) for p in range(3)], asynchronous=False)
        c.close()
    mirror = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(plan.file)],
                              stdout=subprocess.DEVNULL, stderr=(box_dir / f"{ns}.err").open("w"))
    try:
        time.sleep(25)  # the bench's settling time (the copy and a first sync), not a wait for a condition
        m0, b0 = cpu_seconds([mirror.pid]), cpu_seconds(pids)
        time.sleep(seconds)
        return cpu_seconds([mirror.pid]) - m0, cpu_seconds(pids) - b0
    finally:
        mirror.terminate()
        mirror.wait(60)


def main() -> None:
    args, box = sandbox_bench(__doc__, "cutover-bench-idle", 2, 60)
    status = box.status()
    pids = [int(status[side]["pid"]) for side in ("old", "new")]
    runs: dict[str, list[tuple[float, float]]] = {i: [] for i in INTERVALS}
    for _ in range(args.rounds):
        for interval in INTERVALS:
            runs[interval].append(one(args.dir, box.plan_file, interval, args.seconds, pids))
            print(interval, runs[interval][-1], file=sys.stderr)
    print(f"| group sync | mirror CPU s in {args.seconds:.0f} s (median) | two brokers' CPU s | rounds |")
    print("|---|---:|---:|---:|")
    for interval, got in runs.items():
        print(f"| every {interval} | {statistics.median(m for m, _ in got):.2f} "
              f"| {statistics.median(b for _, b in got):.2f} | {len(got)} |")


if __name__ == "__main__":
    main()
