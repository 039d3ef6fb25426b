"""One bench command: every measure of bench/README.md's table, on one throwaway sandbox.

    bench/run [--quick] [--runs N] [--scale F] [--only KEY ...] [--out bench/results]

Each figure is a ratio against a baseline run in the same function on the same data (bench/measures.py);
by default the median of 3 runs (--quick: 1). --scale shrinks (or grows) every data size for a smoke run;
the table says the sizes it ran at. Prints the table with today's figures and the goals, writes
bench/results/<date>.json (every run, its seconds and its peak RSS), and draws bench/results/<date>.png,
the ratios against their goals (matplotlib).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the single-purpose benches beside this file are scripts, not a package

import measures  # noqa: E402
from measures import Run  # noqa: E402


@dataclass(frozen=True)
class Measure:
    key: str
    what: str
    #: ">=" when higher is better (throughput ratios), "<=" when lower is (time ratios)
    better: str
    #: None: the issue asks for the figure, and sets no goal
    goal: float | None
    run: Callable[[Any, Path, float, int], list[Run]]
    #: one call makes all the runs (its last argument is then how many): the freeze window's rounds share
    #: their topics and groups, each round a new promote/rollback cycle on them
    once: bool = False


def _sized(n: int, scale: float, floor: int) -> int:
    return max(floor, int(n * scale))


MEASURES = [
    Measure("freeze_12x12", "freeze window at promote vs by hand, 12 topics x 12 partitions, 20 groups", "<=", 1.1,
            lambda box, f, s, n: measures.freeze(box, f, 12, 12, 20, n, "freeze_12x12"), once=True),
    Measure("freeze_100x12", "freeze window at promote vs by hand, 100 topics x 12 partitions, 20 groups", "<=",
            1.1, lambda box, f, s, n: measures.freeze(box, f, _sized(100, s, 13), 12, 20, n, "freeze_100x12"),
            once=True),
    Measure("shadow_1kb", "shadow vs a plain Structured Streaming job (same trigger) appending to Iceberg, 1 KB JSON",
            ">=", 0.8, lambda box, f, s, r: measures.shadow(box, f, _sized(1_000_000, s, 20_000), r)),
    Measure("freshness_5000", "shadow --follow vs a plain streaming job (1 s trigger): p95 delay from a record's "
            "Kafka timestamp to its table, 5,000 rec/s steady", "<=", None,
            lambda box, f, s, r: measures.freshness(box, f, 5000, _sized(30, s, 10))),
    Measure("verify_diff_1000000", "verify with 20 differences vs one hashing scan of both tables", "<=", 1.5,
            lambda box, f, s, r: measures.verify(box, f, _sized(1_000_000, s, 100_000), r, True,
                                                     1_000_000)),
    Measure("verify_equal_5000000", "verify with no difference vs one hashing scan, 5 M rows", "<=", 1.1,
            lambda box, f, s, r: measures.verify(box, f, _sized(5_000_000, s, 100_000), r, True,
                                                     5_000_000)),
    Measure("mirror_100", "mirror vs the bare Python copy loop, 100 B records, from the command line", ">=", 0.9,
            lambda box, f, s, r: measures.mirror(box, f, 100, _sized(1_000_000, s, 50_000), r, mm2=True)),
    Measure("mirror_1024", "mirror vs the bare Python copy loop, 1 KB records", ">=", 0.9,
            lambda box, f, s, r: measures.mirror(box, f, 1024, _sized(600_000, s, 20_000), r, mm2=False)),
    Measure("mirror_65536", "mirror vs the bare Python copy loop, 64 KB records", ">=", 0.9,
            lambda box, f, s, r: measures.mirror(box, f, 65536, _sized(20_000, s, 1_000), r, mm2=False)),
]
#: Figures a measure's run yields beside its own key (verify with differences also times verify equal at 1 M,
#: and verify at 5 M plants the 20 differences too; the 100 B mirror also runs MirrorMaker 2).
EXTRA = {"verify_equal_1000000": ("verify with no difference vs one hashing scan, 1 M rows", "<=", 1.1),
         "verify_diff_5000000": ("verify with 20 differences vs one hashing scan, 5 M rows", "<=", 1.5),
         "mirror_mm2_100": ("mirror vs MirrorMaker 2 (copy phase), 100 B records", ">=", 2.0)}


#: For each goal not met: where the time goes (the profile), what stands in the way, and what was tried, with
#: the section of bench/README.md that has the runs. bench/run prints it under the table for every goal its run
#: did not meet; a measure that meets its goal prints nothing of it.
STANDING = {
    "shadow_1kb": (
        "profile: 86 % of the shadow's time is its one job a batch (read, decode, count, write), 11 % is outside "
        "the batches (its table and dead-letter table made, stale branches looked for, the final offsets); a "
        "batch takes 3.6 s against the plain job's 2.75 s. In the way: each JSON value is parsed twice "
        "(from_json, and json_object_keys for the drift check). Tried: one pass (0.47x to 0.62x), the drift "
        "check's known names dropped first (0.67x), the commit's branches dropped through pyiceberg. Not made: "
        "one parse into Spark's Variant, then casts, which changes how a value of the wrong JSON type reads (a "
        "cast where from_json gives null): a change of behaviour. README: 'the shadow in one pass'."),
    "verify_diff_1000000": (
        "profile (1 M rows, warm): the one scan 0.7 to 0.8 s; verify's row pass 0.7 to 0.8 s, of which the "
        "reread of both tables 0.4 s; catalog and maps 0.4 s. In the way: the reread of the bench's two "
        "whole-table files, which the 20 spread differences keep from skipping any file or row group. Tried: "
        "the row pass in one job (3.18x to 2.02x), the maps read side by side (1.87x), keeping the rows between "
        "passes (cost the equal case more). Not tried: Parquet page-level statistics to skip within a file. On "
        "tables written by batch, as the shadow writes them, verify with differences is 1.09x (met). README: "
        "'verify's row pass in one job'."),
    "mirror_1024": (
        "profile: the transactional copy commits each 256 MB batch and waits for every acknowledgement, so the "
        "producer's pipeline empties once a batch; the bare loop never commits. In the way: that wait and the "
        "per-record Python work of the copy (offset map, headers), at 1 KB about 600,000 records. Tried: the "
        "batch from 64 MB to 256 MB (the 1 KB copy in 0.96x the time; 0.74x to 0.80x, 0.91x in another run: "
        "the bare loop's own time varies 1.8 to 3.7 s between runs). README: 'The mirror's batch'."),
    "mirror_mm2_100": (
        "profile: cutover's copy 2.6 to 2.9 s against MirrorMaker 2's copy phase 3.8 to 3.9 s (5.1 to 5.4 s "
        "before the sandbox's brokers lost their idle threads, which gave MM2's Connect JVM more of the two "
        "cores). In the way: one Python process against a JVM on two shared cores; --workers against MM2's "
        "tasks.max of the same count not measured here. README: 'Results (2026-11-29, bench/run)'."),
}
STANDING["verify_diff_5000000"] = STANDING["verify_diff_1000000"]


def standing(rows: list[dict[str, Any]]) -> list[str]:
    """For each goal this run did not meet: its profile, what stands in the way and what was tried."""
    return [f"\n{r['key']} ({r['median']:.2f}x, goal {r['goal']}x) not met: "
            + STANDING.get(r["key"], "no profile recorded yet: see bench/README.md")
            for r in rows if r["met"] is False]


def main() -> None:
    ap = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one run per measure instead of three")
    ap.add_argument("--runs", type=int, help="runs per measure (default 3; --quick: 1)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every data size (e.g. 0.1 for a smoke run)")
    ap.add_argument("--only", nargs="+", choices=[m.key for m in MEASURES], help="run only these measures")
    ap.add_argument("--out", type=Path, default=HERE / "results", help="where the JSON and the plot go")
    args = ap.parse_args()
    runs = args.runs or (1 if args.quick else 3)
    chosen = [m for m in MEASURES if not args.only or m.key in args.only]
    results: list[Run] = []
    failed: dict[str, str] = {}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="cutover-bench-") as tmp:
        box = _sandbox(Path(tmp) / "box")
        try:
            for m in chosen:
                for r in [runs] if m.once else range(runs):
                    print(f"bench: {m.key}, " + (f"{runs} run(s)" if m.once else f"run {r + 1} of {runs}"),
                          file=sys.stderr, flush=True)
                    try:
                        results += m.run(box, Path(tmp), args.scale, r)
                    except Exception as exc:  # one measure that fails is reported; the others still run
                        traceback.print_exc()
                        failed[m.key] = f"{type(exc).__name__}: {exc}"
        finally:
            subprocess.run([measures.CLI, "local", "down", "--purge", "--dir", str(box.dir)], capture_output=True,
                           check=False)
    rows = summarize(results)
    print(table(rows))
    print("\n".join(standing(rows)))
    for key, why in failed.items():
        print(f"\nFAILED {key}: {why}")
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / dt.date.today().isoformat()
    n = 2
    while stem.with_suffix(".json").exists():  # a second run the same day keeps the first
        stem, n = args.out / f"{dt.date.today().isoformat()}-{n}", n + 1
    stem.with_suffix(".json").write_text(json.dumps({
        "date": dt.date.today().isoformat(), "started": started, "seconds": round(time.time() - started),
        "runs_per_measure": runs, "scale": args.scale, "figures": rows, "failed": failed,
        "runs": [dataclasses.asdict(r) for r in results]}, indent=1, default=str) + "\n")
    plot(rows, stem.with_suffix(".png"))
    print(f"\nwritten: {stem.with_suffix('.json')}, {stem.with_suffix('.png')}", file=sys.stderr)


def _sandbox(folder: Path) -> Any:
    from cutover.local.sandbox import Sandbox

    subprocess.run([measures.CLI, "local", "fetch", "--with-mirror-maker"], check=True, capture_output=True)
    subprocess.run([measures.CLI, "local", "up", "--dir", str(folder)], check=True, capture_output=True)
    return Sandbox(folder)


def summarize(results: list[Run]) -> list[dict[str, Any]]:
    """One row per figure: the median ratio of its runs, their spread, the goal, and the peak RSS seen."""
    goals = {m.key: (m.what, m.better, m.goal) for m in MEASURES} | EXTRA
    rows = []
    for key, (what, better, goal) in goals.items():
        mine = [r for r in results if r.key == key]
        if not mine:
            continue
        ratios = sorted(r.ratio for r in mine)
        median = statistics.median(ratios)
        met = None if goal is None else median >= goal if better == ">=" else median <= goal
        rows.append({"key": key, "what": what, "median": round(median, 2), "low": round(ratios[0], 2),
                     "high": round(ratios[-1], 2), "runs": len(mine),
                     "goal": "-" if goal is None else f"{better} {goal}", "met": met,
                     "rss_mb": max(r.rss_mb for r in mine), "detail": mine[-1].detail})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| measure | today (median) | range | runs | goal | met | peak RSS (MB) | sizes |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sizes = ", ".join(f"{k} {v:,}" for k, v in r["detail"].items() if isinstance(v, int))
        out.append(f"| {r['what']} | {r['median']:.2f}x | {r['low']:.2f}x to {r['high']:.2f}x | {r['runs']} | "
                   f"{r['goal']}{'x' if r['met'] is not None else ''} | "
                   f"{'-' if r['met'] is None else 'yes' if r['met'] else 'no'} | {r['rss_mb'] or '-'} | {sizes} |")
    for r in rows:
        if r["key"].startswith("freshness_"):
            d = r["detail"]
            out.append(f"\n{r['key']}: p50 / p95 seconds, shadow {d['shadow_p50_s']} / {d['shadow_p95_s']}, "
                       f"plain streaming job {d['plain_p50_s']} / {d['plain_p95_s']} ({d['records']:,} records each); "
                       f"the shadow's {d['shadow_batches']} batches, seconds a batch: " + ", ".join(
                           f"{p} {s}" for p, s in d["shadow_seconds_per_batch"].items()))
        if "shares" in r["detail"]:
            whole = "freeze window" if r["key"].startswith("freeze_") else "time"
            out.append(f"\n{r['key']}: where the last run's {whole} went: " + ", ".join(
                f"{step} {share:.0%}" for step, share in sorted(r["detail"]["shares"].items(), key=lambda x: -x[1])))
    return "\n".join(out)


#: a bar by whether its goal is met (None: no goal)
_COLOURS = {True: "#2e7d32", False: "#c62828", None: "#757575"}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.5))
    names = [r["key"] for r in rows]
    ax.barh(names, [r["median"] for r in rows], color=[_COLOURS[r["met"]] for r in rows],
            xerr=[[r["median"] - r["low"] for r in rows], [r["high"] - r["median"] for r in rows]])
    for i, r in enumerate(rows):
        if r["met"] is None:
            continue
        goal = float(r["goal"].split()[1])
        ax.plot([goal, goal], [i - 0.4, i + 0.4], color="black", linewidth=2)
    ax.invert_yaxis()
    ax.set_xlabel("ratio against the baseline (black: the goal; green: met)")
    ax.set_title(f"cutover bench, {dt.date.today().isoformat()}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
