"""The measures of bench/README.md's table, each against its baseline run in the same function on the same
data, for `python -m bench` (bench/__main__.py). They reuse the single-purpose benches beside them (their
data makers, baselines and copy loops), so a figure here and there is the same measurement.

Each returns one Run per measure: the ratio (the way the table reads it), the seconds it came from, the
peak RSS of cutover's own processes (the Spark driver's JVM included) and any detail worth printing."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient, NewTopic
from rss import PeakRss, tree_rss

CLI = str(Path(sys.executable).with_name("cutover"))


@dataclass
class Run:
    #: the measure's key in MEASURES (bench/__main__.py)
    key: str
    ratio: float
    seconds: dict[str, float]
    rss_mb: float
    detail: dict[str, Any] = field(default_factory=dict)


def cli(args: list[str], timeout: float = 3600) -> tuple[dict[str, Any], float, float]:
    """`cutover ARGS -o json` as a user runs it: (its JSON, wall seconds, peak RSS of its process tree in MB)."""
    began = time.monotonic()
    proc = subprocess.Popen([CLI, *args, "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakRss(proc.pid) as peak:
        out, err = proc.communicate(timeout=timeout)
    if proc.returncode:
        raise SystemExit(f"cutover {' '.join(args)} failed ({proc.returncode}):\n{err[-3000:]}")
    return (json.loads(out) if out.strip() else {}), time.monotonic() - began, peak.mb


def plan_for(box: Any, folder: Path, name: str, **changes: Any) -> Path:
    data = yaml.safe_load(box.plan_file.read_text())
    data["env_file"] = str(box.dir / data["env_file"])
    data.update({"name": name, **changes})
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# -- the mirror against the bare Python copy loop, and against MirrorMaker 2 -----------------------------------


def mirror(box: Any, folder: Path, size: int, records: int, run: int, mm2: bool) -> list[Run]:
    import mirror_bench as mb

    st = box.status()
    old, new = st["old"]["bootstrap"], st["new"]["bootstrap"]
    topic, partitions = f"bench.m{size}.r{run}.{int(time.time())}", 12
    data = mb.records(records, partitions, size)
    mb.create(old, topic, partitions)
    mb.produce(old, topic, data)
    groups = [f"{topic}.g{i}" for i in range(8)]
    mb.commit_groups(old, topic, partitions, groups, records // partitions, random.Random(run))
    mb.create(new, f"{topic}.bare", partitions)
    bare = mb.bare_copy(old, new, topic, partitions, f"{topic}.bare")
    plan = plan_for(box, folder, f"bench-m{size}-r{run}", topics={"include": [re.escape(topic)]},
                    groups={"include": [re.escape(topic) + r"\.g.*"]})
    out, wall, rss = cli(["mirror", "--plan", str(plan), "--until-caught-up"])
    copy = float(out["seconds"])
    runs = [Run(f"mirror_{size}", bare / copy, {"bare": bare, "cutover": copy, "cutover_wall": wall}, rss,
                {"records": records, "size": size})]
    if mm2:
        from mm2 import run_mirror_maker

        admin = AdminClient({"bootstrap.servers": new})
        for f in admin.delete_topics([topic]).values():
            f.result(60)
        for f in admin.delete_consumer_groups(groups).values():
            f.result(60)
        mb.wait_gone(admin, topic)
        made = run_mirror_maker(old, new, [topic], groups, folder / f"mm2-{run}", timeout=1200)
        mm2_copy = made.seconds_to_caught_up - made.startup_seconds
        runs.append(Run(f"mirror_mm2_{size}", mm2_copy / copy, {"mm2": mm2_copy, "cutover": copy}, rss,
                        {"records": records, "size": size}))
    return runs


# -- the shadow against a plain Spark job that reads the same topic and appends to Iceberg ---------------------


def shadow(box: Any, folder: Path, records: int, run: int) -> list[Run]:
    import shadow_bench as sb

    st = box.status()
    new = st["new"]["bootstrap"]
    topic, partitions = f"bench.s.r{run}.{int(time.time())}", 12
    table = f"bench.s{run}_{int(time.time())}"
    plan = plan_for(box, folder, f"bench-s-r{run}", tables=[
        {"topic": topic, "old": f"{table}_old", "new": table, "schema": sb.SCHEMA}],
                    spark={**yaml.safe_load(box.plan_file.read_text())["spark"], "trigger_interval": "1s"})
    admin = AdminClient({"bootstrap.servers": new})  # held until the topic is made (a dropped handle aborts it)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    sb.produce(new, topic, partitions, 0, records, note=sb.NOTE_1KB)
    began_rss = tree_rss(os.getpid())
    with PeakRss(os.getpid()) as plain_peak:
        stream = sb.plain_stream(plan, topic, f"{table}_stream", folder / f"stream-ck-{run}")
    floor = sb.plain_copy(plan, topic, f"{table}_plain")
    out, wall, rss = cli(["shadow", "--plan", str(plan), "--table", table])
    assert out["tables"][0]["rows"] == records, out
    copy = float(out["seconds"])
    phases = out["tables"][0]["phases"]
    return [Run("shadow_1kb", stream / copy, {"plain_stream": stream, "plain_batch": floor, "shadow": copy,
                                              "shadow_wall": wall}, rss,
                {"records": records, "batches": out["tables"][0]["batches"],
                 "vs_one_batch_job": round(floor / copy, 2),
                 "plain_rss_mb": round(max(0, plain_peak.peak - began_rss) / 2**20, 1),
                 "shares": {p: round(s / copy, 3) for p, s in phases.items()}})]


def freshness(box: Any, folder: Path, rate: int, seconds: int) -> list[Run]:
    """Record-to-table delay at a steady `rate` (records of about 200 B): `cutover shadow --follow`, then a plain
    Structured Streaming job with the same trigger (1 s), each on its own topic fed at the same rate. The ratio
    is the shadow's p95 over the plain job's."""
    import shadow_bench as sb

    new = box.status()["new"]["bootstrap"]
    stamp = int(time.time())
    table, topics = f"bench.f_{stamp}", {side: f"bench.f{side}.{stamp}" for side in ("shadow", "plain")}
    plan = plan_for(box, folder, f"bench-f-{stamp}", tables=[
        {"topic": topics["shadow"], "old": f"{table}_old", "new": table, "schema": sb.SCHEMA}],
                    spark={**yaml.safe_load(box.plan_file.read_text())["spark"], "trigger_interval": "1s"})
    admin = AdminClient({"bootstrap.servers": new})
    for t in topics.values():
        admin.create_topics([NewTopic(t, 12, 1)])[t].result(30)
    n = rate * seconds
    lags: dict[str, list[float]] = {}

    def steady(side: str, name: str, alive: Any) -> None:
        sb.produce(new, topics[side], 12, 0, 1)  # one record through first: the job is running
        sb.wait_rows(plan, name, 1, 300, alive)
        sb.produce(new, topics[side], 12, 1, n, rate=rate)
        sb.wait_rows(plan, name, n + 1, 600, alive)

    proc = sb.shadow(plan, "--table", table, "--follow", "-o", "json")
    try:
        steady("shadow", table, lambda: proc.poll() is None)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    run = json.loads(out)["tables"][0]
    per_batch = {p: round(s / run["batches"], 3) for p, s in run["phases"].items()} if run["batches"] else {}
    lags["shadow"] = sb.added_lags(plan, table, "kafka_timestamp", skip=0)  # the first record waited for start-up
    stop, failed = threading.Event(), []
    job = threading.Thread(target=lambda: _catching(failed, lambda: sb.plain_stream(
        plan, topics["plain"], f"{table}_plain", folder / f"fresh-ck-{stamp}", follow=stop)))
    job.start()
    try:
        steady("plain", f"{table}_plain", job.is_alive)
    finally:
        stop.set()
        job.join(120)
    if failed:
        raise failed[0]
    lags["plain"] = sb.added_lags(plan, f"{table}_plain", "timestamp", skip=0)
    pct = {side: {q: round(sb.quantile(v, q / 100), 2) for q in (50, 95)} for side, v in lags.items()}
    return [Run(f"freshness_{rate}", pct["shadow"][95] / pct["plain"][95], {}, 0.0,
                {"records": n, "rate": rate, "shadow_p50_s": pct["shadow"][50], "shadow_p95_s": pct["shadow"][95],
                 "plain_p50_s": pct["plain"][50], "plain_p95_s": pct["plain"][95],
                 "rows": {side: len(v) for side, v in lags.items()}, "shadow_batches": run["batches"],
                 "shadow_seconds_per_batch": per_batch})]


def _catching(failed: list[BaseException], fn: Any) -> None:
    try:
        fn()
    except BaseException as exc:  # the main thread raises it
        failed.append(exc)


# -- verify against one hashing scan of both tables ------------------------------------------------------------


def verify(box: Any, folder: Path, rows: int, run: int, differences: bool, label: int) -> list[Run]:
    """`label`: the size the table names the figure by (the rows at --scale 1)."""
    import verify_bench as vb

    from cutover.verify import run as verify_run

    plan, spark, old, new = vb.two_tables(box, folder, f"v{rows}r{run}t{int(time.time())}", rows)
    vb.floor(spark, old, new)  # warm the session and the file listing once
    t_floor, _ = vb.timed(lambda: vb.floor(spark, old, new))
    out = []
    with PeakRss(os.getpid()) as peak:
        t_equal, res = vb.timed(lambda: verify_run.verify(plan, verify_run.Options()).as_dict())
    assert res["passed"], res["tables"][0]["counts"]
    out.append(Run(f"verify_equal_{label}", t_equal / t_floor, {"floor": t_floor, "verify": t_equal}, peak.mb,
                   {"rows": rows}))
    if differences:
        vb.plant(spark, new, rows)
        with PeakRss(os.getpid()) as peak:
            t_diff, res = vb.timed(lambda: verify_run.verify(plan, verify_run.Options()).as_dict())
        c = res["tables"][0]["counts"]
        assert (c["mismatched"], c["missing"], c["duplicates_new"]) == (10, 5, 5), c
        out.append(Run(f"verify_diff_{label}", t_diff / t_floor, {"floor": t_floor, "verify": t_diff}, peak.mb,
                       {"rows": rows, "differences": 20}))
    return out


# -- the freeze window of promote against the same switch by hand ----------------------------------------------


def freeze(box: Any, folder: Path, topics: int, partitions: int, groups: int, rounds: int,
           key: str) -> list[Run]:
    import argparse

    import switch_bench as swb

    args = argparse.Namespace(topics=topics, partitions=partitions, groups=groups, quiet=10.0, repeat=rounds,
                              prefix=f"bench.f{topics}x{partitions}t{int(time.time())}")
    sub = folder / f"freeze-{topics}x{partitions}"
    sub.mkdir(exist_ok=True)
    old, names, plan = swb.setup(box, sub, args)
    out = []
    for _ in range(rounds):
        by_hand, drain, window, took, detail = swb.one_round(old, names, plan, sub, args)
        shares = {step: round(sec / window, 3) for step, sec in inside_window(took).items() if sec and window}
        out.append(Run(key, window / by_hand,
                       {"by_hand": by_hand, "drain": drain, "window": window}, 0.0,
                       {"steps": took, "shares": shares, "reverse_mirror": detail, "topics": topics, "groups": groups}))
    return out


def inside_window(took: dict[str, float]) -> dict[str, float]:
    """The steps inside the freeze window, in order: from freeze-producers to switch-clients (arm-reverse-mirror
    runs before it; resume and hold after)."""
    steps = list(took)
    if "freeze-producers" not in steps or "switch-clients" not in steps:
        return took
    inside = steps[steps.index("freeze-producers"):steps.index("switch-clients") + 1]
    return {s: took[s] for s in inside}
