"""A Spark session's start without and with cutover's class-data archive (cutover.lake.class_archive).

    .venv/bin/python bench/class_archive_bench.py --dir /tmp/bench-sandbox --rounds 5

Uses the sandbox at --dir (brought up if needed, which makes the archive; it must be otherwise
idle, and so must the machine). Each round runs, in a fresh Python process each, the sandbox
plan with `spark.class_archive: false` and then as it is (true): a Spark session, `SELECT 1`
and `SHOW NAMESPACES`, then stop, as in bench/sandbox_jvm_bench.py (wall seconds and the
machine's busy core-seconds). Prints a Markdown table and the ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from sandbox_jvm_bench import compare

from cutover.lake import class_archive, spark
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "cutover-bench-jvm")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    box = Sandbox(args.dir)
    subprocess.run([sys.executable, "-m", "cutover", "local", "up", "--dir", str(args.dir)], check=True,
                   stdout=subprocess.DEVNULL)
    archive = class_archive.path(spark.session_conf(load_plan(box.plan_file), "bench"))
    assert archive.is_file(), f"local up made no class-data archive at {archive}"
    doc = yaml.safe_load(box.plan_file.read_text())
    catalog = doc["catalog"]["name"]
    plans = {}
    for name, use in (("without the archive (class_archive: false)", False), ("with the archive", True)):
        doc.setdefault("spark", {})["class_archive"] = use
        plans[name] = box.dir / f"bench-plan-archive-{str(use).lower()}.yaml"  # beside the sandbox's plan
        plans[name].write_text(yaml.safe_dump(doc, sort_keys=False))
    print(f"archive: {archive} ({archive.stat().st_size / 1e6:.0f} MB)\n")
    (base_w, base_c), (with_w, with_c) = compare(plans, catalog, args.rounds)
    print(f"\nwith / without: wall {with_w / base_w:.2f}x, core-seconds {with_c / base_c:.2f}x "
          f"(median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
