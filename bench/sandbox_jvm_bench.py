"""The sandbox's JVM flags: a Spark session with the JVM's server defaults vs with cutover.jvm.LEAN.

    .venv/bin/python bench/sandbox_jvm_bench.py --dir /tmp/bench-sandbox --rounds 3

Uses the sandbox at --dir (brought up if needed; it must be otherwise idle, and so must the
machine). Each round runs, in a fresh Python process each, with the JVM defaults and then with
the sandbox's flags: a Spark session on the sandbox plan (local[2], Iceberg, the SQLite
catalog), `SELECT 1` and `SHOW NAMESPACES`, then stop: what every `cutover shadow`,
`cutover verify` and drill pays before its first record. Measured: wall seconds and the
machine's busy core-seconds from /proc/stat around the process (so the JVM's compiler and
collector threads count, and the idle brokers' small share is in both columns alike).
Prints a Markdown table and the ratio. JAVA_TOOL_OPTIONS is cleared for both.
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

import yaml

from cutover import jvm
from cutover.local.sandbox import Sandbox

SESSION = """
import sys
from cutover.plan import load_plan
from cutover.lake import spark
s = spark.session(load_plan(sys.argv[1]), "bench")
s.sql("SELECT 1").collect()
s.sql("SHOW NAMESPACES IN " + sys.argv[2]).collect()
s.stop()
"""


def busy() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def variant_plan(base: Path, folder: Path, flags: str | None) -> Path:
    doc = yaml.safe_load(base.read_text())
    conf = doc.setdefault("spark", {}).setdefault("conf", {})
    conf.pop("spark.driver.extraJavaOptions", None)
    if flags:
        conf["spark.driver.extraJavaOptions"] = flags
    out = folder / f"bench-plan-{'lean' if flags else 'default'}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def one(plan: Path, catalog: str) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    b0, t0 = busy(), time.monotonic()
    subprocess.run([sys.executable, "-c", SESSION, str(plan), catalog], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0, busy() - b0


def compare(plans: dict[str, Path], catalog: str, rounds: int) -> list[tuple[float, float]]:
    """Run each plan's session `rounds` times, alternating, then delete the plans; print a Markdown
    table; each plan's median (wall s, busy core-s), in order."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in plans}
    try:
        one(next(iter(plans.values())), catalog)  # warm the page cache: the jars, Python's imports
        for _ in range(rounds):
            for name, plan in plans.items():
                runs[name].append(one(plan, catalog))
    finally:
        for plan in plans.values():
            plan.unlink()
    print("| Spark session start + 2 queries | wall s (median) | busy core-s (median) |")
    print("|---|---:|---:|")
    medians = []
    for name, got in runs.items():
        medians.append((statistics.median(w for w, _ in got), statistics.median(c for _, c in got)))
        print(f"| {name} | {medians[-1][0]:.1f} | {medians[-1][1]:.1f} |")
    return medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "cutover-bench-jvm")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    box = Sandbox(args.dir)
    subprocess.run([sys.executable, "-m", "cutover", "local", "up", "--dir", str(args.dir)], check=True,
                   stdout=subprocess.DEVNULL)
    catalog = yaml.safe_load(box.plan_file.read_text())["catalog"]["name"]
    # beside the sandbox's own plan: its env_file and routing file are relative to it
    plans = {"JVM defaults (C2)": variant_plan(box.plan_file, box.dir, None),
             f"sandbox ({' '.join(jvm.LEAN)})": variant_plan(box.plan_file, box.dir, " ".join(jvm.LEAN))}
    (base_w, base_c), (lean_w, lean_c) = compare(plans, catalog, args.rounds)
    print(f"\nsandbox flags / defaults: wall {lean_w / base_w:.2f}x, core-seconds {lean_c / base_c:.2f}x "
          f"(median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
