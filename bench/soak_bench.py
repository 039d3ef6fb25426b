"""Soak bench: the resident memory of `cutover mirror` over a long run under steady traffic.

    .venv/bin/python bench/soak_bench.py [--minutes 30] [--rate 5000] [--groups 200] [--size 200]

Brings up a throwaway sandbox; one topic of 12 partitions on the old cluster; GROUPS consumer
groups whose committed offsets move with the traffic (each is committed again at the topic's end
every 15 s, as running consumers would); `cutover mirror --plan` from the command line, as a
user runs it, with a group sync every 5 s. A producer writes RATE records of SIZE bytes per
second for MINUTES minutes. Every 10 s: the RSS of the mirror's process (psutil) and the mirror's
lag. Writes bench/results/<date>-soak.json and a plot of RSS and lag over time.

The verdict: the RSS must not grow after the first minutes. The slope of a least-squares line
through the samples from minute 5 on (MB per hour), and the last sample against the median of
minutes 5 to 10, are printed beside it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mirror_bench import CLI, throwaway_sandbox, wait_for
from rss import tree_rss

HERE = Path(__file__).parent
TOPIC, PARTITIONS = "bench.soak", 12


def slope_mb_per_hour(samples: list[dict[str, float]], after: float) -> float:
    """Least-squares slope of RSS (MB) over time (hours), of the samples taken `after` seconds in or later."""
    pts = [(s["t"] / 3600, s["rss_mb"]) for s in samples if s["t"] >= after]
    if len(pts) < 2:
        return 0.0
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with throwaway_sandbox() as (box, old, new, _tmp):
        result = soak(box, old, new, args)
    stem = args.out / f"{date.today().isoformat()}-soak"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, stem.with_suffix(".png"))
    print("| minutes | rate (rec/s) | groups | records | RSS at 1 min (MB) | median RSS, minutes 5-10 (MB) | "
          "last RSS (MB) | peak RSS (MB) | slope from minute 5 (MB/h) | max lag (records) | groups on new |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.minutes:g} | {args.rate} | {args.groups} | {result['records']:,} | {result['rss_1min_mb']} | "
          f"{result['rss_5_10_mb']} | {result['rss_last_mb']} | {result['rss_peak_mb']} | "
          f"{result['slope_mb_per_hour']:+.1f} | {result['max_lag']:,} | {result['groups_synced_on_new']} |")
    print(f"written: {stem.with_suffix('.json')}, {stem.with_suffix('.png')}")


def soak(box: Any, old: str, new: str, args: argparse.Namespace) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": old})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
    groups = [f"bench-soak-g{i:04d}" for i in range(args.groups)]
    spec = yaml.safe_load(box.plan_file.read_text())
    spec.update({"name": "soak", "topics": {"include": [re.escape(TOPIC)]},
                 "groups": {"include": [r"bench-soak-g.*"]}})
    spec["mirror"] = {**spec.get("mirror", {}), "group_sync_interval": "5s"}
    plan = box.dir / "soak.yaml"
    plan.write_text(yaml.safe_dump(spec))
    ready = box.dir / "soak.ready"
    log = (Path(tempfile.gettempdir()) / "cutover-soak-mirror.log").open("w")  # kept: the sandbox goes at the end
    mirror = subprocess.Popen([CLI, "mirror", "--plan", str(plan), "--ready-file", str(ready)],
                              stdout=subprocess.DEVNULL, stderr=log)
    wait_for(lambda: ready.exists() or mirror.poll() is not None, 120, "the mirror to be ready")
    if mirror.poll() is not None:
        raise SystemExit(f"cutover mirror exited with {mirror.returncode} before it was ready ({log.name})")

    written = [0]
    done = threading.Event()
    samples: list[dict[str, float]] = []
    started = time.monotonic()

    def ends(bootstrap: str) -> int:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-soak-probe"})
        try:
            return sum(c.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1] for p in range(PARTITIONS))
        except Exception:  # the target topic is not there yet
            return 0
        finally:
            c.close()

    def groups_follow() -> None:  # each group's consumers commit at the end of what was written
        while not done.wait(15):
            c = Consumer({"bootstrap.servers": old, "group.id": "bench-soak-probe"})
            highs = [c.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1] for p in range(PARTITIONS)]
            c.close()
            requests = [ConsumerGroupTopicPartitions(g, [TopicPartition(TOPIC, p, h) for p, h in enumerate(highs)])
                        for g in groups]
            for request in requests:
                admin.alter_consumer_group_offsets([request])[request.group_id].result(30)

    def sample() -> None:
        while not done.wait(10):
            samples.append({"t": round(time.monotonic() - started, 1), "rss_mb": round(tree_rss(mirror.pid) / 2**20, 1),
                            "lag": max(0, ends(old) - ends(new)), "written": written[0]})

    threads = [threading.Thread(target=groups_follow, daemon=True), threading.Thread(target=sample, daemon=True)]
    for t in threads:
        t.start()
    producer = Producer({"bootstrap.servers": old, "linger.ms": 5, "enable.idempotence": True})
    value = b"x" * args.size
    seconds, i = args.minutes * 60, 0
    while time.monotonic() - started < seconds:
        due = int((time.monotonic() - started) * args.rate)
        while i < due:
            try:
                producer.produce(TOPIC, value, key=b"%d" % (i % 5000), partition=i % PARTITIONS)
                i += 1
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        written[0] = i
        time.sleep(0.01)
    producer.flush(60)
    done.set()
    if mirror.poll() is not None:
        raise SystemExit(f"cutover mirror exited ({mirror.returncode}) during the soak; its log {log.name} ends:\n"
                         + "\n".join(Path(log.name).read_text().splitlines()[-30:]))
    for t in threads:
        t.join(60)
    mirror.terminate()
    mirror.wait(60)
    target = AdminClient({"bootstrap.servers": new})  # held: a client without a reference is destroyed at once
    listed = target.list_consumer_groups().result(60)
    synced = sum(1 for g in listed.valid if g.group_id.startswith("bench-soak-g"))
    rss = [s["rss_mb"] for s in samples]
    window = sorted(s["rss_mb"] for s in samples if 300 <= s["t"] <= 600) or rss
    return {"minutes": args.minutes, "rate": args.rate, "groups": args.groups, "size": args.size, "records": i,
            "samples": samples, "rss_1min_mb": next((s["rss_mb"] for s in samples if s["t"] >= 60), rss[0]),
            "rss_5_10_mb": window[len(window) // 2], "rss_last_mb": rss[-1], "rss_peak_mb": max(rss),
            "slope_mb_per_hour": round(slope_mb_per_hour(samples, 300), 2),
            "max_lag": max(s["lag"] for s in samples), "groups_synced_on_new": synced}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t"] / 60 for s in result["samples"]]
    fig, (ax, lag) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    ax.plot(t, [s["rss_mb"] for s in result["samples"]], color="tab:blue")
    ax.set_ylabel("RSS of cutover mirror (MB)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"cutover mirror, {result['rate']:,} rec/s of {result['size']} B, {result['groups']} groups: "
                 f"slope from minute 5 {result['slope_mb_per_hour']:+.1f} MB/h")
    lag.plot(t, [s["lag"] for s in result["samples"]], color="tab:orange")
    lag.set_ylabel("mirror lag (records)")
    lag.set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()
