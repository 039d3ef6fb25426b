"""Sample orders and payments traffic against a plan's active cluster, by hand.

    .venv/bin/python samples/generator.py --plan samples/plan.yaml --rate 200 --seconds 60

The same generator `cutover drill` and `cutover demo` use (cutover/drill/traffic.py):
JSON events keyed by customer, with `source` and `trace` headers, every tenth batch in
a transaction and one in five of those aborted. It writes to the cluster the plan's
routing file names (old before any switch) and prints how many records were
acknowledged per topic. Topics must exist (or the cluster must create them).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from cutover.drill.traffic import Traffic
from cutover.plan import load_plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--topics", nargs="*", help="default: the topics of the plan's table pairs")
    ap.add_argument("--rate", type=float, default=100.0, help="records per second, about")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--no-transactions", action="store_true")
    args = ap.parse_args()
    plan = load_plan(args.plan)
    topics = args.topics or [p.topic for p in plan.spec.tables]
    if not topics:
        raise SystemExit("name --topics: the plan has no table pairs to take them from")
    with tempfile.TemporaryDirectory(prefix="cutover-generator-") as ctl:
        traffic = Traffic(plan, Path(ctl), topics, args.rate, not args.no_transactions)
        traffic.start()
        time.sleep(args.seconds)
        traffic.stop()
    for topic, n in sorted(Counter(s.topic for s in traffic.sent).items()):
        print(f"{topic}: {n} records acknowledged")
    for e in traffic.errors[:5]:
        print(f"error: {e}")


if __name__ == "__main__":
    main()
