"""The sandbox's brokers, idle and under light traffic: its settings vs a slower log cleaner and fewer threads.

    .venv/bin/python bench/broker_threads_bench.py --dir /tmp/bench-threads --rounds 3 --seconds 60

Uses the sandbox at --dir (brought up if needed; it must be otherwise idle, and so must the
machine). Each round, for each variant: the variant's lines are appended to both brokers'
server.properties, both clusters restart, and after 20 s to settle the two brokers' CPU is
counted (from /proc, the broker processes only) over --seconds idle, then over --seconds of a
test's traffic (a producer at 100 records a second with a consumer reading them, on the old
cluster). Prints a Markdown table and the ratios; the sandbox's config is restored at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan

TOPIC = "bench-broker-threads"
VARIANTS: dict[str, tuple[str, ...]] = {
    "the sandbox's settings": (),
    "the log cleaner every 5 s": ("log.cleaner.backoff.ms=5000",),
    "the cleaner every 5 s, fewer threads": ("log.cleaner.backoff.ms=5000", "num.io.threads=2",
                                             "num.network.threads=1", "background.threads=2"),
}


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def traffic(props: dict[str, str], seconds: float) -> int:
    """100 records a second produced and read for `seconds`; the records read."""
    admin = AdminClient(props)
    if TOPIC not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(TOPIC, 6, 1)])[TOPIC].result()
    producer = Producer(props)
    consumer = Consumer({**props, "group.id": f"{TOPIC}-{time.monotonic_ns()}", "auto.offset.reset": "latest"})
    consumer.subscribe([TOPIC])
    read, n, started = 0, 0, time.monotonic()
    while time.monotonic() - started < seconds:
        producer.produce(TOPIC, b"x" * 200, key=b"%d" % n)
        n += 1
        producer.poll(0)
        pause_until = started + n / 100
        while time.monotonic() < pause_until:
            m = consumer.poll(max(0.0, min(0.05, pause_until - time.monotonic())))
            read += m is not None and m.error() is None
    producer.flush(30)
    consumer.close()
    return read


def one(box: Sandbox, originals: dict[Path, str], extra: tuple[str, ...], props: dict[str, str],
        seconds: float) -> tuple[float, float, int]:
    for path, text in originals.items():
        path.write_text(text + "".join(f"{line}\n" for line in extra))
    return restart_and_measure(box, props, seconds)


def restart_and_measure(box: Sandbox, props: dict[str, str], seconds: float) -> tuple[float, float, int]:
    """Both clusters restarted; after 20 s to settle, both brokers' CPU seconds over `seconds` idle, then
    over `seconds` of traffic; and the records that traffic read."""
    for side in ("old", "new"):
        box.stop(side)
        box.start(side)
    status = box.status()
    pids = [int(status[side]["pid"]) for side in ("old", "new")]
    time.sleep(20)  # the bench's settling time, not a wait for a condition
    c0 = cpu_seconds(pids)
    time.sleep(seconds)
    c1 = cpu_seconds(pids)
    read = traffic(props, seconds)
    return c1 - c0, cpu_seconds(pids) - c1, read


def sandbox_bench(doc: str, folder: str, rounds: int, seconds: float) -> tuple[argparse.Namespace, Sandbox]:
    """A brokers bench's arguments (--dir, --rounds, --seconds) and its sandbox, brought up if needed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / folder)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--seconds", type=float, default=seconds)
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "cutover", "local", "up", "--dir", str(args.dir)], check=True,
                   stdout=subprocess.DEVNULL)
    return args, Sandbox(args.dir)


def main() -> None:
    args, box = sandbox_bench(__doc__, "cutover-bench-threads", 3, 60)
    props = dict(load_plan(box.plan_file).cluster("old"))
    originals = {p: p.read_text() for p in (args.dir / "old" / "server.properties",
                                           args.dir / "new" / "server.properties")}
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in VARIANTS}
    try:
        for _ in range(args.rounds):
            for name, extra in VARIANTS.items():
                runs[name].append(one(box, originals, extra, props, args.seconds))
                print(name, runs[name][-1], file=sys.stderr)
    finally:
        for path, text in originals.items():
            path.write_text(text)
        for side in ("old", "new"):
            box.stop(side)
            box.start(side)
    print(f"| two brokers, {args.seconds:.0f} s | idle: CPU s (median) | 100 rec/s: CPU s (median) | records read |")
    print("|---|---:|---:|---:|")
    medians = []
    for name, got in runs.items():
        medians.append((statistics.median(i for i, _, _ in got), statistics.median(t for _, t, _ in got)))
        print(f"| {name} ({', '.join(VARIANTS[name]) or 'none set'}) | {medians[-1][0]:.2f} | {medians[-1][1]:.2f} "
              f"| {min(r for _, _, r in got):,} |")
    (base_i, base_t), *others = medians
    print()
    for name, (idle, busy) in zip(list(VARIANTS)[1:], others, strict=True):
        print(f"{name} / the sandbox's settings: idle {idle / base_i:.2f}x, under traffic {busy / base_t:.2f}x "
              f"(median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
