"""How promote's freeze window grows with the work, against the same switch by hand.

    .venv/bin/python bench/freeze_scaling.py [--sizes 12x20 100x20 12x200 12x2000] [--rounds 1]

Each size is TOPICSxGROUPS: TOPICS topics of 12 partitions on the old cluster (100 records per
partition), GROUPS groups with committed offsets on three topics each, mirrored; then rounds of
`switch_bench.one_round` (by hand: drain + offsets sync + routing file; then promote with no-op
hooks and the default 10 s quiet period; then rollback). All sizes share one throwaway sandbox.
Prints, per size, the window, by hand, their ratio and each step's seconds inside the window;
writes bench/results/<date>-freeze-scaling.json and a plot of both against partitions and groups,
so that a user can read off what their freeze will cost.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import switch_bench as swb
from measures import inside_window

from cutover.local.sandbox import Sandbox

HERE = Path(__file__).parent
PARTITIONS, RECORDS = 12, 100


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", default=["12x20", "100x20", "12x200", "12x2000"],
                    help="TOPICSxGROUPS, each topic of 12 partitions")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cutover-freeze-scaling-") as tmp:
        box = Sandbox(Path(tmp) / "sandbox")
        box.up()
        try:
            for size in args.sizes:
                topics, groups = (int(x) for x in size.split("x"))
                rows += measure(box, Path(tmp) / size, topics, groups, args.rounds)
                print(line(rows[-1]), flush=True)
        finally:
            box.down()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{date.today().isoformat()}-freeze-scaling"
    stem.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    plot(rows, stem.with_suffix(".png"))
    print("\n| partitions | groups | by hand (s) | promote's freeze window (s) | window / by hand | steps inside "
          "the window (s) |\n|---|---|---|---|---|---|")
    for r in rows:
        print(line(r))
    print(f"written: {stem.with_suffix('.json')}, {stem.with_suffix('.png')}")


def measure(box: Sandbox, folder: Path, topics: int, groups: int, rounds: int) -> list[dict[str, Any]]:
    folder.mkdir(parents=True)
    args = argparse.Namespace(topics=topics, partitions=PARTITIONS, groups=groups, quiet=10.0, repeat=rounds,
                              records=RECORDS, prefix=f"bench.sc{topics}x{groups}t{int(time.time())}")
    old, names, plan = swb.setup(box, folder, args)
    out = []
    for _ in range(rounds):
        by_hand, _drain, window, took, _detail = swb.one_round(old, names, plan, folder, args)
        out.append({"partitions": topics * PARTITIONS, "groups": groups, "by_hand": round(by_hand, 3),
                    "window": round(window, 3), "ratio": round(window / by_hand, 3), "steps": inside_window(took)})
    return out


def line(r: dict[str, Any]) -> str:
    steps = ", ".join(f"{k} {v:.2f}" for k, v in r["steps"].items() if v >= 0.05)
    return (f"| {r['partitions']:,} | {r['groups']:,} | {r['by_hand']:.1f} | {r['window']:.1f} | {r['ratio']:.2f}x | "
            f"{steps} |")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (axis, fixed, label) in zip(axes, (("partitions", "groups", "partitions (12 per topic)"),
                                               ("groups", "partitions", "consumer groups")), strict=True):
        base = min(r[fixed] for r in rows)
        chosen = sorted((r for r in rows if r[fixed] == base), key=lambda r: r[axis])
        xs = [r[axis] for r in chosen]
        ax.plot(xs, [r["window"] for r in chosen], "o-", label="promote's freeze window")
        ax.plot(xs, [r["by_hand"] for r in chosen], "s--", label="by hand (drain + offsets sync + routing)")
        ax.set_xscale("log")
        ax.set_xlabel(f"{label} ({fixed} {base:,})")
        ax.set_ylabel("seconds")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle("cutover promote: the freeze window as the work grows (default 10 s quiet period, no-op hooks)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()
