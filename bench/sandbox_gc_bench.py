"""The sandbox's JVMs with G1 (the JVM's and Kafka's choice) vs the serial collector: brokers idle and
under a test's light traffic, and a Spark session's start and a small Iceberg write.

    .venv/bin/python bench/sandbox_gc_bench.py --dir /tmp/bench-gc --rounds 2 --seconds 45

Uses the sandbox at --dir (brought up if needed; it must be otherwise idle, and so must the
machine). Brokers: each round, for each collector, both clusters restart with it and after 20 s
to settle the two brokers' CPU is counted (from /proc, the broker processes only) over --seconds
idle, then over --seconds of 100 records a second produced and read. Spark: each round, for each
collector, a fresh Python process starts a session on the sandbox plan (with its class-data
archive), writes 20,000 rows to an Iceberg table, counts them and stops; measured are its wall
seconds and the machine's busy core-seconds from /proc/stat around it. Prints Markdown tables
and the ratios; the sandbox is restarted with its own flags at the end.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from broker_threads_bench import restart_and_measure, sandbox_bench

from cutover import jvm
from cutover.local import broker
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan

COLLECTORS = {"G1": "-XX:+UseG1GC", "serial": "-XX:+UseSerialGC"}

SPARK_JOB = """
import sys
from pathlib import Path
from cutover.plan import load_plan
from cutover.lake import spark
s = spark.session(load_plan(sys.argv[1]), "bench-gc")
table = sys.argv[2] + ".bench_gc"
s.sql(f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, v STRING) USING iceberg")
s.range(20000).selectExpr("id", "repeat('x', 200) AS v").writeTo(table).append()
assert s.table(table).count() % 20000 == 0
pid = s.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
mapped = any(".jsa" in line for line in Path(f"/proc/{pid}/maps").read_text().splitlines())
s.sql(f"DROP TABLE {table}")
s.stop()
print("archive mapped" if mapped else "archive NOT mapped", file=sys.stderr)
"""


def busy() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / 100


def brokers(box: Sandbox, flag: str, props: dict[str, str], seconds: float) -> tuple[float, float]:
    def with_collector(version: str, main: str, *args: str) -> list[str]:
        return [flag if part == "-XX:+UseSerialGC" else part for part in _JVM_CMD(version, main, *args)]

    broker.jvm_cmd = with_collector  # the brokers this process starts use `flag`
    try:
        idle, load, _read = restart_and_measure(box, props, seconds)
    finally:
        broker.jvm_cmd = _JVM_CMD
    return idle, load


_JVM_CMD: Callable[..., list[str]] = broker.jvm_cmd


def spark_job(plan_file: Path, flag: str, namespace: str, tmp: Path) -> tuple[float, float]:
    data = yaml.safe_load(plan_file.read_text())
    data.setdefault("spark", {}).setdefault("conf", {})["spark.driver.extraJavaOptions"] = " ".join(
        (*(f for f in jvm.LEAN if not f.endswith("GC")), flag))  # one collector: the JVM refuses two
    variant = plan_file.parent / f"plan-bench-{flag.rsplit('+', 1)[-1]}.yaml"  # beside it: its env_file resolves
    variant.write_text(yaml.safe_dump(data))
    b0, t0 = busy(), time.monotonic()
    done = subprocess.run([sys.executable, "-c", SPARK_JOB, str(variant), namespace], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    wall, cores = time.monotonic() - t0, busy() - b0
    if done.returncode != 0 or "archive mapped" not in done.stderr:
        raise SystemExit(f"the Spark job with {flag} failed or ran without the archive:\n{done.stderr[-3000:]}")
    return wall, cores


def main() -> None:
    args, box = sandbox_bench(__doc__, "cutover-bench-gc", 2, 45)
    plan = load_plan(box.plan_file)
    props = dict(plan.cluster("old"))
    namespace = next(iter(plan.spec.tables)).old.rsplit(".", 1)[0] if plan.spec.tables else "cutover"
    runs_b: dict[str, list[tuple[float, float]]] = {n: [] for n in COLLECTORS}
    runs_s: dict[str, list[tuple[float, float]]] = {n: [] for n in COLLECTORS}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for _ in range(args.rounds):
                for name, flag in COLLECTORS.items():
                    runs_s[name].append(spark_job(box.plan_file, flag, namespace, Path(tmp)))
                    print("spark", name, runs_s[name][-1], file=sys.stderr)
                for name, flag in COLLECTORS.items():
                    runs_b[name].append(brokers(box, flag, props, args.seconds))
                    print("brokers", name, runs_b[name][-1], file=sys.stderr)
        finally:
            for side in ("old", "new"):
                box.stop(side)
                box.start(side)
    print(f"| two brokers, {args.seconds:.0f} s | idle: CPU s (median) | 100 rec/s: CPU s (median) |")
    print("|---|---:|---:|")
    med_b = {n: (statistics.median(i for i, _ in r), statistics.median(t for _, t in r)) for n, r in runs_b.items()}
    for name, (idle, load) in med_b.items():
        print(f"| {name} (`{COLLECTORS[name]}`) | {idle:.2f} | {load:.2f} |")
    print()
    print("| Spark session, 20,000 rows into Iceberg | wall s (median) | busy core-s (median) |")
    print("|---|---:|---:|")
    med_s = {n: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for n, r in runs_s.items()}
    for name, (wall, cores) in med_s.items():
        print(f"| {name} (`{COLLECTORS[name]}`) | {wall:.1f} | {cores:.1f} |")
    print()
    (gi, gt), (si, st) = med_b["G1"], med_b["serial"]
    (gw, gc), (sw, sc) = med_s["G1"], med_s["serial"]
    print(f"serial / G1 (median of {args.rounds} rounds): brokers idle {si / gi:.2f}x, under traffic {st / gt:.2f}x; "
          f"Spark {sw / gw:.2f}x wall, {sc / gc:.2f}x core-seconds")


if __name__ == "__main__":
    main()
