"""Switch bench: the freeze window of `cutover promote` vs the same switch done by hand.

    .venv/bin/python bench/switch_bench.py [--topics 12] [--partitions 12] [--groups 20] [--quiet 2] [--repeat 3]

Brings up a throwaway sandbox, creates TOPICS topics of PARTITIONS partitions on the old
cluster with 500 records per partition, GROUPS consumer groups with committed offsets on
three topics each, and mirrors everything. Then, on the same clusters:

1. baseline, by hand: after 50 more records per partition, the minimum an operator
   scripts without promote: `cutover mirror --until-caught-up` (drain) + `cutover offsets
   sync` + writing the routing file. No quiet check, no journal, no reverse mirror.
2. `cutover promote --execute` after another 50 records per partition, with no-op
   freeze/stop hooks: the freeze window it journals (producer freeze to clients
   switched), per step.

Then rollback, and again, REPEAT rounds (each promote after the first is a new cycle).
Prints a Markdown table, one row per round; the ratio is promote's window over the
baseline. The quiet period (`gates.quiet_period`, a policy wait) starts at wait-quiet and
is held on, if the drain and the groups' sync were shorter, in check-drained.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.kafka import batches
from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import commit_group
from cutover.local.sandbox import Sandbox


def cli(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "cutover", *args, "-o", "json"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"cutover {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout) if done.stdout.strip() else {}


def produce(props: dict[str, str], topics: list[str], partitions: int, per_partition: int) -> None:
    producer = Producer({**props, "enable.idempotence": True, "linger.ms": 20})
    for t in topics:
        for p in range(partitions):
            for i in range(per_partition):
                while True:
                    try:
                        producer.produce(t, value=b"x" * 200, key=b"%d" % i, partition=p)
                        break
                    except BufferError:  # 100 topics fill the local queue: let it drain
                        producer.poll(0.1)
            producer.poll(0)
    assert producer.flush(60) == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=12)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--quiet", type=float, default=10.0, help="gates.quiet_period, seconds (the default plan's)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of by hand, promote, rollback")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cutover-switch-bench-") as tmp:
        box = Sandbox(Path(tmp) / "sandbox")
        box.up()
        try:
            run(box, Path(tmp), args)
        finally:
            box.down()


def setup(box: Sandbox, tmp: Path, args: argparse.Namespace) -> tuple[dict[str, str], list[str], Path]:
    """The topics, records and groups on the old cluster, mirrored; the plan that selects them (and nothing
    else on the sandbox: args.prefix names them). Returns (old cluster's properties, topics, plan)."""
    prefix = getattr(args, "prefix", "bench")
    data = yaml.safe_load(box.plan_file.read_text())
    old = data["clusters"]["old"]
    topics = [f"{prefix}.t{i:02d}" for i in range(args.topics)]
    hook = tmp / "noop.sh"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    data.update({"name": f"switch-{prefix}"[:64], "topics": {"include": [re.escape(prefix) + "\\..*"]},
                 "groups": {"include": [re.escape(prefix) + "-g.*"]},
                 "env_file": str(box.plan_file.parent / data["env_file"]),
                 "gates": {"quiet_period": args.quiet}, "routing": {"file": str(tmp / "routing.json")},
                 "switch": {"journal_dir": str(tmp / "journal")},
                 "hooks": {e: str(hook) for e in ("freeze_producers", "stop_consumers", "switch_clients", "resume")}})
    plan = tmp / "plan.yaml"
    plan.write_text(yaml.safe_dump(data))
    admin = AdminClient(dict(old))
    for request in batches.split([NewTopic(t, args.partitions, 1) for t in topics], batches.topic_records):
        for f in admin.create_topics(request).values():
            f.result(60)
    produce(old, topics, args.partitions, getattr(args, "records", 500))
    ref = ClusterRef("old", old)
    for g in range(args.groups):
        mine = [topics[(g + k) % len(topics)] for k in range(3)]
        commit_group(ref, f"{prefix}-g{g:02d}", {(t, p): getattr(args, "records", 500) // 2 for t in mine
                                                 for p in range(args.partitions)})
    cli("mirror", "--plan", str(plan), "--until-caught-up")
    return old, topics, plan


def run(box: Sandbox, tmp: Path, args: argparse.Namespace) -> None:
    old, topics, plan = setup(box, tmp, args)
    rows = [one_round(old, topics, plan, tmp, args) for _ in range(args.repeat)]
    print("| topics x partitions | groups | round | by hand: drain + sync + routing (s) | promote freeze window (s) "
          "| wait-quiet (s) | quiet period held on in check-drained (s) | window / by hand |")
    print("|---|---|---|---|---|---|---|---|")
    for i, (by_hand, drain, window, took, _detail) in enumerate(rows, 1):
        print(f"| {args.topics} x {args.partitions} | {args.groups} | {i} | {by_hand:.1f} (drain {drain:.1f}) | "
              f"{window:.1f} | {took['wait-quiet']:.1f} | {took['check-drained']:.1f} | {window / by_hand:.2f}x |")
    ratios = sorted(r[2] / r[0] for r in rows)
    print(f"\nmedian window / by hand over {len(rows)} round(s): {ratios[len(ratios) // 2]:.2f}x")
    for i, (_b, _d, _w, took, detail) in enumerate(rows, 1):
        print(f"round {i} promote steps: " + ", ".join(f"{n} {sec:.1f}s" for n, sec in took.items()))
        print(f"round {i} reverse mirror: {detail}")


def one_round(old: dict[str, str], topics: list[str], plan: Path, tmp: Path,
           args: argparse.Namespace) -> tuple[float, float, float, dict[str, float], str]:
    """By hand, then promote, then rollback (which also makes the next round's promote a new cycle)."""
    produce(old, topics, args.partitions, 50)
    began = time.monotonic()
    cli("mirror", "--plan", str(plan), "--until-caught-up")
    drained = time.monotonic()
    synced = cli("offsets", "sync", "--plan", str(plan))
    (tmp / "routing.json").write_text(json.dumps({"active": "new"}))
    by_hand = time.monotonic() - began
    ok = [g for g in synced["groups"] if not g["reason"] and not g["skipped"]]
    assert len(ok) == args.groups, synced

    produce(old, topics, args.partitions, 50)
    result = cli("promote", "--plan", str(plan), "--execute")
    window = result["freeze_window"]["seconds"]
    took = {s["name"]: s["seconds"] for s in result["steps"]}
    start = next(s["detail"] for s in result["steps"] if s["name"] == "start-reverse-mirror")
    detail = "armed before the freeze" if start.get("armed_before_freeze") else "started inside the window"
    cli("rollback", "--plan", str(plan), "--execute")  # stops the detached reverse mirror
    return by_hand, drained - began, window, took, detail


if __name__ == "__main__":
    main()
