"""A real Flink job (a KafkaSource, a keyed running count in state, in a local MiniCluster) stopped with a
savepoint, moved to the new cluster by promote and back by rollback: each time its source's splits are read
from the savepoint, translated, and the job restarted from the savepoint with a new source uid at exactly the
next record. Every record is read once, and the count kept in state carries on."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from cutover import jvm
from cutover.kafka.java_client import java_properties
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from cutover.readers.flink import JAVA17_OPENS
from tests.conftest import cutover, wait_for
from tests.integration.app_process import AppProcess, reader_plan
from tests.integration.kafka_util import committed, create_topic, produce

pytestmark = pytest.mark.slow  # three runs of a Flink job, a promote and a rollback

APP = Path(__file__).parent / "apps" / "FlinkJob.java"


class Job(AppProcess):
    """One run of the Flink job on one cluster."""

    def __init__(self, plan: Plan, side: str, topic: str, group: str, savepoints: Path, classes: Path,
                 tmp: Path, start: Path | None = None) -> None:
        props = tmp / f"{side}.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in java_properties(side, plan.cluster(side)).items()))
        classpath = ":".join([*(str(p) for p in jvm.resolve(jvm.FLINK)), str(classes)])
        super().__init__([jvm.java(), *jvm.LEAN, *JAVA17_OPENS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                          "-cp", classpath, "FlinkJob", str(props), topic, "clicks-source", group, str(savepoints),
                          *([str(start)] if start else [])], tmp / f"job-{side}.log")

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "event" not in line]

    def read(self, values: set[str]) -> None:
        wait_for(lambda: self.running() and values <= {r["value"] for r in self.rows}, 180,
                 f"the job to read {len(values)} records", interval=0.5)

    def stop(self) -> str:
        """Stop with a savepoint: the job prints its path and exits."""
        self.end("stop\n")
        return str(next(e["path"] for e in self.lines if e.get("event") == "savepoint"))


def _produce(props: dict[str, str], topic: str, phase: str, n: int, aborted: bool = False) -> set[str]:
    """n records over 2 partitions; with `aborted`, a transaction of 3 records aborted in the middle (its
    records and marker take offsets the mirror does not copy, so offsets differ between the clusters)."""
    values = [f"{phase}-{i}" for i in range(n)]
    produce(props, topic, [{"value": v.encode(), "partition": i % 2} for i, v in enumerate(values[: n // 2])])
    if aborted:
        tx = Producer({**props, "transactional.id": f"{topic}-aborted"})
        tx.init_transactions(30)
        tx.begin_transaction()
        for i in range(3):
            tx.produce(topic, value=f"aborted-{phase}-{i}".encode(), partition=i % 2)
        assert tx.flush(30) == 0  # written, then aborted (an abort drops what is still queued)
        tx.abort_transaction(30)
    produce(props, topic, [{"value": v.encode(), "partition": i % 2}
                           for i, v in enumerate(values[n // 2:], start=n // 2)])
    return set(values)


def test_a_flink_job_moves_from_its_savepoint_and_reads_every_record_once(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    topic, group, savepoints = f"{ns}.clicks", f"{ns}.flink", tmp_path / "savepoints"
    savepoints.mkdir()
    classes = tmp_path / "classes"
    jars = ":".join(str(p) for p in jvm.resolve(jvm.FLINK))
    subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", str(classes), str(APP)], check=True)
    create_topic(old, topic, 2)
    log = tmp_path / "hooks.log"
    plan_file = reader_plan(sandbox.plan_file, tmp_path, ns, {
        "name": "clicks", "kind": "flink", "job": "clicks", "source_uid": "clicks-source",
        "savepoints": str(savepoints), "start": "committed", "group": group}, "$CUTOVER_SAVEPOINTS $CUTOVER_START_FILE")
    start_file = savepoints / "cutover-start.json"
    sent = _produce(old, topic, "1", 40, aborted=True)

    first = Job(plan, "old", topic, group, savepoints, classes, tmp_path)
    first.read(sent)
    first_savepoint = first.stop()

    # Before the mirror has copied the topic: no mapping, refused, nothing written.
    refused = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "clicks", "--execute")
    assert refused.code == 3 and "have no mapping yet" in refused.err and "nothing was written" in refused.err
    assert "Traceback" not in refused.err and not start_file.exists()

    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    dry = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "clicks", "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err
    moved = dry.json()
    assert moved["savepoint"] == first_savepoint.removeprefix("file:")
    assert [(c["partition"], c["source_offset"], c["target_offset"], c["same"]) for c in moved["canary"]] == [
        (0, 23, 20, True), (1, 22, 20, True)]
    assert [(p["topic"], p["partition"], p["source_offset"]) for p in moved["positions"]] == [
        (topic, 0, 23), (topic, 1, 22)]  # 20 records each, the aborted ones (2 and 1) and their markers
    assert all(p["target_offset"] == 20 for p in moved["positions"])  # on new: only the 20 committed records
    assert "OffsetResetStrategy.NONE" in moved["java"] and "resets an out-of-range offset to earliest" in \
        moved["warnings"][0] and not start_file.exists()

    promoted = cutover("promote", "--plan", str(plan_file), "--execute", "-o", "json", timeout=600)
    assert promoted.code == 0, promoted.err
    names = [s["name"] for s in promoted.json()["steps"]]
    assert names.index("move-reader:clicks") < names.index("switch-clients") < names.index("start-reader:clicks")
    handoff = json.loads(start_file.read_text())
    assert handoff["source_uid"] == "clicks-source-new" and handoff["cluster"] == "new"
    assert handoff["offsets"] == [{"topic": topic, "partition": p, "offset": 20} for p in (0, 1)]
    assert committed(new, group, topic, 2) == {0: 20, 1: 20}  # start: committed
    status = cutover("status", "--plan", str(plan_file))
    assert "reader clicks: on the new cluster, source uid clicks-source-new" in status.out, status.out
    assert f"{topic}[0] 23 -> 20" in status.out

    on_new = Job(plan, "new", topic, group, savepoints, classes, tmp_path, start=start_file)
    later = _produce(new, topic, "2", 30)
    on_new.read(later)
    assert {r["value"] for r in on_new.rows} == later  # exactly the next records: none again, none skipped
    second_savepoint = on_new.stop()

    written_while_stopped = _produce(new, topic, "3", 10)
    rolled = cutover("rollback", "--plan", str(plan_file), "--execute", "-o", "json", timeout=600)
    assert rolled.code == 0, rolled.err
    handoff = json.loads(start_file.read_text())
    assert handoff["source_uid"] == "clicks-source" and handoff["cluster"] == "old"
    assert handoff["savepoint"] == second_savepoint.removeprefix("file:")
    # The newest savepoint was taken on new: a forward move of it (the old source's uid) is refused.
    wrong = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "clicks", "--dry-run")
    assert wrong.code == 3 and "gives no splits of source uid clicks-source:" in wrong.err, wrong.err
    assert "taken while the job ran on the new cluster" in wrong.err and "Traceback" not in wrong.err
    back = Job(plan, "old", topic, group, savepoints, classes, tmp_path, start=start_file)
    back.read(written_while_stopped)
    assert {r["value"] for r in back.rows} == written_while_stopped
    back.stop()

    runs = [first.rows, on_new.rows, back.rows]
    values = [r["value"] for rows in runs for r in rows]
    assert sorted(values) == sorted(sent | later | written_while_stopped)  # each record exactly once
    count: dict[int, int] = defaultdict(int)
    for r in (r for rows in runs for r in rows):  # the count in state carried on across both moves
        count[r["partition"]] += 1
        assert r["n"] == count[r["partition"]], r
    moves = [json.loads(line) for line in (tmp_path / "journal" / ns / "readers.jsonl").read_text().splitlines()]
    assert [(m["direction"], m["phase"]) for m in moves] == [("forward", "done"), ("reverse", "done")]
    assert log.read_text().splitlines() == [f"{verb} {side} clicks {savepoints} {start_file}" for verb, side in (
        ("stop", "old"), ("start", "new"), ("stop", "new"), ("start", "old"))]
