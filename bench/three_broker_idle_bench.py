"""The production shape's brokers idle (three per cluster, SASL_SSL, KRaft): the sandbox's settings against
variants that make an idle follower poll its leaders less often.

    .venv/bin/python bench/three_broker_idle_bench.py --dir /tmp/bench-three --rounds 2 --seconds 60

Uses the sandbox at --dir (brought up with the production shape if needed; it must be otherwise idle, and so
must the machine). Each round, for each variant: the variant's lines are appended to every broker's
server.properties, both clusters restart, and after 20 s to settle the six brokers' CPU is counted (from /proc,
the broker processes only) over --seconds. Prints a Markdown table and the ratios; the brokers' config is
restored at the end. CI keeps this shape up for the whole production-three suite (about half its run).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cutover.local.sandbox import Sandbox

sys.path.insert(0, str(Path(__file__).parent))
from broker_threads_bench import cpu_seconds

VARIANTS: dict[str, tuple[str, ...]] = {
    "the sandbox's settings": (),
    "followers long-poll 5 s": ("replica.fetch.wait.max.ms=5000",),
}
SHAPE = ["--brokers", "old=3", "--brokers", "new=3", "--security", "old=sasl_ssl", "--security", "new=sasl_ssl"]


def broker_pids(box: Sandbox) -> list[int]:
    status = box.status()
    return [int(b["pid"]) for side in ("old", "new") for b in status[side]["brokers"]]


def restart(box: Sandbox) -> None:
    for side in ("old", "new"):
        box.stop(side)
        box.start(side)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "cutover-bench-three")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "cutover", "local", "up", "--dir", str(args.dir), *SHAPE], check=True,
                   stdout=subprocess.DEVNULL)
    box = Sandbox(args.dir)
    originals = {p: p.read_text() for p in sorted(args.dir.glob("*/**/server.properties"))}
    runs: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        for _ in range(args.rounds):
            for name, extra in VARIANTS.items():
                for path, text in originals.items():
                    path.write_text(text + "".join(f"{line}\n" for line in extra))
                restart(box)
                pids = broker_pids(box)
                time.sleep(20)  # the bench's settling time, not a wait for a condition
                c0 = cpu_seconds(pids)
                time.sleep(args.seconds)
                runs[name].append(cpu_seconds(pids) - c0)
                print(name, f"{runs[name][-1]:.2f} CPU s over {len(pids)} brokers", file=sys.stderr)
    finally:
        for path, text in originals.items():
            path.write_text(text)
        restart(box)
    print(f"| six brokers idle, {args.seconds:.0f} s | CPU s (median of {args.rounds}) |")
    print("|---|---:|")
    medians = {name: statistics.median(got) for name, got in runs.items()}
    for name, m in medians.items():
        print(f"| {name} ({', '.join(VARIANTS[name]) or 'none set'}) | {m:.2f} |")
    base, *others = medians.values()
    print()
    for name, m in zip(list(VARIANTS)[1:], others, strict=True):
        print(f"{name} / the sandbox's settings: {m / base:.2f}x")


if __name__ == "__main__":
    main()
