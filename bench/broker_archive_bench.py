"""A Kafka broker's start without and with Kafka's class-data archive (cutover.local.broker.ensure_class_archive).

    .venv/bin/python bench/broker_archive_bench.py --rounds 5

Needs no sandbox: each round formats and starts a scratch single-node KRaft broker (the sandbox's
config, in a temporary folder on free loopback ports) twice, as the sandbox starts one: first without
the archive, then with it (the archive is made first if the machine has none). For each start it counts
the wall seconds until the broker says it has started and accepts connections, and the CPU seconds of
the broker process at that moment and of the storage format before it (Kafka's StorageTool, a JVM of
the same jars). Prints a Markdown table of medians and the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from cutover import jvm
from cutover.local import broker
from cutover.local.ports import free_port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def one_start(sharing: bool) -> tuple[float, float, float]:
    """A scratch broker formatted and started: (wall s to ready, broker CPU s at ready, format CPU s)."""
    version = jvm.KAFKA_VERSION
    with tempfile.TemporaryDirectory(prefix="cutover-bench-broker-") as scratch:
        spec = broker.BrokerSpec("bench", Path(scratch), free_port(), free_port(), broker.new_cluster_id(),
                                 version=version)
        spec.config_file.write_text(broker.render_config(spec, None))
        before = children_cpu()
        cmd = broker.jvm_cmd(version, "kafka.tools.StorageTool", "format", "-t", spec.cluster_id, "-c",
                             str(spec.config_file), "--standalone", sharing=sharing)
        subprocess.run(cmd, check=True, capture_output=True)
        formatted = children_cpu() - before
        started = time.monotonic()
        proc, offset = broker.launch_command(spec, broker.jvm_cmd(version, "kafka.Kafka", str(spec.config_file),
                                                                  sharing=sharing))
        try:
            broker.wait_ready(spec, proc, offset, broker.started)
            ready, cpu = time.monotonic() - started, cpu_seconds(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
    return ready, cpu, formatted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    archive = broker.ensure_class_archive(jvm.KAFKA_VERSION)
    assert archive is not None, "no class-data archive could be made (see the progress lines above)"
    runs: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for sharing in (False, True):
            runs[sharing].append(one_start(sharing))
    names = {False: "without the archive", True: "with the archive"}
    print(f"| a broker's start (Kafka {jvm.KAFKA_VERSION}, median of {args.rounds}) | wall s to ready "
          "| broker CPU s at ready | format CPU s |")
    print("|---|---:|---:|---:|")
    med = {s: [statistics.median(r[i] for r in runs[s]) for i in range(3)] for s in runs}
    for sharing, (wall, cpu, fmt) in med.items():
        print(f"| {names[sharing]} | {wall:.2f} | {cpu:.2f} | {fmt:.2f} |")
    (w0, c0, f0), (w1, c1, f1) = med[False], med[True]
    print()
    print(f"with / without: wall to ready {w1 / w0:.2f}x, broker CPU {c1 / c0:.2f}x, format CPU {f1 / f0:.2f}x")


if __name__ == "__main__":
    main()
