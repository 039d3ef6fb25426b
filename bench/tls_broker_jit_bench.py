"""A broker whose listener encrypts (SASL_SSL): C1 alone (cutover.jvm.LEAN, what the sandbox runs) vs the full tiers.

    .venv/bin/python bench/tls_broker_jit_bench.py --dir /tmp/bench-tls --rounds 3 --seconds 60

Brings up a sandbox at --dir whose old cluster is one SASL_SSL broker (it must be otherwise idle, and
so must the machine). Each round restarts that broker with each variant's flags, then gives it what
a test gives the sandbox's brokers: a producer and a consumer of 1 KB records at about 1 MB/s, and a
new client connecting every 2 s (a TLS handshake and SCRAM each time: every cutover command connects
anew). Measured: the broker process's CPU seconds from its start to the end of the traffic, so the
JIT's warm-up counts (the tests' brokers live minutes, not days). Prints a Markdown table and the
ratio. JAVA_TOOL_OPTIONS is cleared.
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

from cutover import jvm
from cutover.local.sandbox import Sandbox

TOPIC = "bench-tls-jit"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def traffic(props: dict[str, str], seconds: float) -> int:
    """Produce and consume 1 KB records for `seconds`, a new admin connection every 2 s; records read."""
    admin = AdminClient(props)
    if TOPIC not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(TOPIC, 6, 1)])[TOPIC].result()
    producer = Producer({**props, "linger.ms": 5})
    consumer = Consumer({**props, "group.id": f"{TOPIC}-{time.monotonic_ns()}", "auto.offset.reset": "latest"})
    consumer.subscribe([TOPIC])
    read, n, started, connected = 0, 0, time.monotonic(), 0.0
    while time.monotonic() - started < seconds:
        for _ in range(100):
            producer.produce(TOPIC, b"x" * 1000, key=b"%d" % n)
            n += 1
        producer.poll(0)
        if time.monotonic() - connected >= 2:
            AdminClient(props).list_topics(timeout=30)
            connected = time.monotonic()
        pause_until = time.monotonic() + 0.1
        while time.monotonic() < pause_until:
            m = consumer.poll(0.05)
            read += m is not None and m.error() is None
    producer.flush(30)
    consumer.close()
    return read


def one(box: Sandbox, flags: tuple[str, ...], props: dict[str, str], seconds: float) -> tuple[float, int]:
    jvm.LEAN = flags  # what broker.jvm_cmd puts on the broker's command line, for this run
    box.stop("old")
    box.start("old")
    pid = int(box.status()["old"]["pid"])
    read = traffic(props, seconds)
    return cpu_seconds(pid), read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "cutover-bench-tls")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    os.environ.pop("JAVA_TOOL_OPTIONS", None)
    subprocess.run([sys.executable, "-m", "cutover", "local", "up", "--dir", str(args.dir), "--security",
                    "old=sasl_ssl"], check=True, stdout=subprocess.DEVNULL)
    box = Sandbox(args.dir)
    from cutover.plan import load_plan
    props = dict(load_plan(box.plan_file).cluster("old"))
    full = ("-XX:TieredStopAtLevel=4", "-XX:CICompilerCount=2")  # the JVM's default tiers, two compiler threads
    variants = {f"C1 alone ({' '.join(jvm.LEAN)})": jvm.LEAN, f"full tiers ({' '.join(full)})": full}
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, flags in variants.items():
            runs[name].append(one(box, flags, props, args.seconds))
    print(f"| SASL_SSL broker: start + {args.seconds:.0f} s of traffic | broker CPU s (median) | records read |")
    print("|---|---:|---:|")
    medians = []
    for name, got in runs.items():
        medians.append(statistics.median(c for c, _ in got))
        print(f"| {name} | {medians[-1]:.1f} | {min(r for _, r in got):,} |")
    print(f"\nfull tiers / C1 alone: broker CPU {medians[1] / medians[0]:.2f}x (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
