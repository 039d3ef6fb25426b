"""A real Spark Structured Streaming query moved to the new cluster and back by `cutover readers translate`:
its checkpoint's positions translated through the mirror's map, every record in its sink exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic
from tests.integration.stream_query_util import ROOT, canary, query, records, translate

pytestmark = pytest.mark.slow  # three Spark queries, a promote and a rollback: CI's slow lane


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _switch(plan_file: Path, action: str, most: int = 3) -> tuple[int, Any]:
    """`cutover ACTION --execute` until it finishes (a hook SIGKILLs it on cue); how often it was killed."""
    for killed in range(most):
        run = subprocess.run([sys.executable, "-m", "cutover", action, "--plan", str(plan_file), "--execute",
                              "-o", "json"], capture_output=True, text=True, timeout=600, check=False)
        if run.returncode == 0:
            return killed, json.loads(run.stdout)
        assert run.returncode == -9, f"{action} failed ({run.returncode}):\n{run.stderr[-3000:]}"
    raise AssertionError(f"{action} did not finish")


def test_a_streaming_query_moves_to_the_new_cluster_and_back_at_exactly_the_next_record(
        sandbox: Sandbox, plan: Plan, spark: Any, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    topics = [f"{ns}.orders", f"{ns}.payments"]  # two topics, one Kafka source
    for topic in topics:
        create_topic(old, topic, 2)
    kills, log = tmp_path / "kills", tmp_path / "hooks.log"
    kills.mkdir()
    kill = (f'f="{kills}/$CUTOVER_ACTION.$CUTOVER_STEP"\n'
            'if [ -f "$f" ]; then rm -f "$f"; kill -9 $PPID; while kill -0 $PPID 2>/dev/null; do :; done; fi\n')
    hooks = {"stop_reader": _script(tmp_path / "stop", f'echo "stop $CUTOVER_READER $CUTOVER_CLUSTER" >> "{log}"\n'),
             "start_reader": _script(tmp_path / "start", f'echo "start $CUTOVER_READER $CUTOVER_ACTIVE" >> "{log}"\n'),
             "after_step": _script(tmp_path / "after", kill)}
    plan_file = derive(sandbox.plan_file, tmp_path / f"{ns}.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                       mirror={"group_sync_interval": "1s"}, gates={"quiet_period": "2s"},
                       switch={"journal_dir": str(tmp_path / "journal"), "quiet_timeout": "60s"},
                       routing={"file": str(tmp_path / "routing.json")}, hooks=hooks, tables=[],
                       readers=[{"name": "orders-query", "kind": "spark-checkpoint",
                                 "checkpoint": str(tmp_path / "checkpoint"), "sink": str(tmp_path / "out")}]).file

    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    sent = records(old, topics, "1", 40)
    query(plan_file, "old", topics, str(checkpoint), str(out))  # batches of at most 20 records: 0 to 3
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())

    # Refused before the mirror has copied anything: no mapping yet; nothing written, no stack trace.
    refused = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", "--execute")
    assert refused.code == 3 and "have no mapping yet" in refused.err and "nothing was written" in refused.err
    assert "Traceback" not in refused.err
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0  # its transaction's marker
    sent += records(old, topics, "2", 160)  # after the query stopped: read on the new cluster, in 8 batches
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0  # shifts phase 2 on new

    dry = translate(plan_file, "--dry-run")
    n = dry["last_committed_batch"] + 1
    assert dry["next_batch"] == n and dry["written"] == []
    assert [(c["topic"], c["partition"], c["same"]) for c in dry["canary"]] == [(t, p, True) for t in topics
                                                                                for p in (0, 1)]  # same next record
    # the positions are the checkpoint's own (where phase 1 ended, per partition); the map is not the identity
    assert {(p["topic"], p["partition"]): p["source_offset"] for p in dry["positions"]} == \
        {(t, p): 20 for t in topics for p in (0, 1)}
    assert any(p["target_offset"] != p["source_offset"] for p in dry["positions"])
    canary(old, new, dry, source_is_old=True)  # read here too, not only by cutover's own canary
    starting = translate(plan_file, "--starting-offsets")["starting_offsets"]
    assert json.loads(starting["0"]) == {t: {str(p["partition"]): p["target_offset"] for p in dry["positions"]
                                             if p["topic"] == t} for t in topics}
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == files
    shown = cutover("promote", "--plan", str(plan_file), "--dry-run")
    assert shown.code == 0, shown.err
    assert "reader orders-query: read the last committed batch" in shown.out and "move-reader:orders-query" in shown.out

    (kills / "promote.move-reader:orders-query").touch()  # killed right after the move, before its journal entry
    killed, promoted = _switch(plan_file, "promote")
    assert killed == 1 and not list(kills.iterdir())
    names = [s["name"] for s in promoted["steps"]]
    assert names.index("move-reader:orders-query") < names.index("switch-clients") < names.index(
        "start-reader:orders-query")
    moves = [json.loads(line) for line in (tmp_path / "journal" / ns / "readers.jsonl").read_text().splitlines()]
    assert [m["direction"] for m in moves] == ["forward"]  # the re-run found it moved: not moved twice
    assert moves[0]["batch"] == n and moves[0]["positions"] == dry["positions"]
    sink_log = tmp_path / "out" / "_spark_metadata"
    assert moves[0]["written"] == [str(checkpoint / "offsets" / str(n)), str(sink_log / str(n)),
                                   str(checkpoint / "commits" / str(n))]
    again = translate(plan_file, "--execute")  # by hand, after the switch moved it: nothing to do
    assert again["already_moved"] and again["written"] == [] and again["last_committed_batch"] == n
    status = cutover("status", "--plan", str(plan_file), "-o", "json").json()["readers"]
    assert [(r["reader"], r["on"], r["last_committed_batch"], r["last_move"]["batch"]) for r in status] == \
        [("orders-query", "new", n, n)]

    query(plan_file, "new", topics, str(checkpoint), str(out))
    got = [r.asDict() for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert Counter(r["value"] for r in got) == Counter(sent)  # every record once: none skipped, none twice
    assert all(r["value"].split("|")[:2] == [r["topic"], str(r["partition"])] for r in got)
    assert max(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()) >= 10  # past a compaction

    sent += records(new, topics, "3", 30)  # the clients wrote on the new cluster; then rollback
    killed, _ = _switch(plan_file, "rollback")
    assert killed == 0
    moves = [json.loads(line) for line in (tmp_path / "journal" / ns / "readers.jsonl").read_text().splitlines()]
    assert [m["direction"] for m in moves] == ["forward", "reverse"] and moves[1]["from_batch"] > moves[0]["batch"]
    canary(old, new, moves[1], source_is_old=False)
    query(plan_file, "old", topics, str(checkpoint), str(out))
    assert Counter(r["value"] for r in spark.read.parquet(str(tmp_path / "out")).collect()) == Counter(sent)
    # the killed step ran again, its hook too (hooks are idempotent); its move was not repeated
    assert log.read_text().splitlines() == ["stop orders-query old", "stop orders-query old", "start orders-query new",
                                            "stop orders-query new", "start orders-query old"]


def test_a_query_that_still_runs_fails_at_its_next_batch_and_never_reads_the_wrong_range(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path, spark: Any) -> None:
    """Nothing outside Spark says whether a query runs (no lock, no group): one left running by mistake, idle
    when its checkpoint is moved, must fail at its next batch (Spark's own "Concurrent update to the log")
    without writing a record, and the moved checkpoint must stand."""
    old = plan.cluster("old")
    topics = [f"{ns}.orders", f"{ns}.payments"]
    for topic in topics:
        create_topic(old, topic, 2)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    plan_file = derive(sandbox.plan_file, tmp_path / f"{ns}.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                       switch={"journal_dir": str(tmp_path / "journal")}, tables=[],
                       readers=[{"name": "orders-query", "kind": "spark-checkpoint", "checkpoint": str(checkpoint),
                                 "sink": str(out)}]).file
    sent = records(old, topics, "1", 20)
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    log = tmp_path / "query.log"
    with log.open("w") as err:
        running = subprocess.Popen([sys.executable, "-m", "tests.integration.spark_stream_query", str(plan_file), "old",
                                    ",".join(topics), str(checkpoint), str(out), "running"],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    try:
        def read_all_of_it() -> bool:
            done = sorted(int(f.name) for f in (checkpoint / "commits").glob("[0-9]*")) if checkpoint.is_dir() else []
            return bool(done) and all(json.loads(line) == {t: {"0": 10, "1": 10} for t in topics} for line in
                                      (checkpoint / "offsets" / str(done[-1])).read_text().splitlines()[2:])

        wait_for(read_all_of_it, 300, "the running query to commit what the topics hold")
        assert running.poll() is None  # running, idle: nothing new to read
        moved = translate(plan_file, "--execute")
        n = moved["next_batch"]
        planned = (checkpoint / "offsets" / str(n)).read_text()

        sent_later = records(old, topics, "2", 10)  # the running query wakes up for these
        assert running.wait(300) != 0
    finally:
        running.kill()
        running.wait(30)
    assert "Concurrent update to the log" in log.read_text(), log.read_text()[-3000:]
    assert (checkpoint / "offsets" / str(n)).read_text() == planned  # cutover's batch stands
    assert not (checkpoint / "offsets" / str(n + 1)).exists()
    assert Counter(r["value"] for r in spark.read.parquet(str(out)).collect()) == Counter(sent)  # nothing more

    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    query(plan_file, "new", topics, str(checkpoint), str(out))  # from the moved batch: exactly the next records
    assert Counter(r["value"] for r in spark.read.parquet(str(out)).collect()) == Counter(sent + sent_later)
