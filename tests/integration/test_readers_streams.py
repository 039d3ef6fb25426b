"""A real Kafka Streams application (a word count, exactly-once v2, a RocksDB store) moved to the new
cluster by promote and back by rollback: its stores' checkpoints translated, so it carries on without
restoring, every word counted exactly once."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cutover import jvm
from cutover.kafka.java_client import java_properties
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.app_process import AppProcess, reader_plan
from tests.integration.kafka_util import create_topic, produce, read_all

pytestmark = pytest.mark.slow  # four runs of a Streams application, a promote and a rollback

APP = Path(__file__).parent / "apps" / "WordCount.java"
WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]


class App(AppProcess):
    """One run of the word count on one cluster."""

    def __init__(self, plan: Plan, side: str, app_id: str, state: Path, topics: tuple[str, str], tmp: Path) -> None:
        props = tmp / f"{side}.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in java_properties(side, plan.cluster(side)).items()))
        classpath = ":".join(str(p) for p in jvm.resolve(jvm.KAFKA_STREAMS))
        super().__init__([jvm.java(), "-cp", classpath, str(APP), str(props), app_id, str(state), *topics],
                         tmp / f"app-{side}.log")

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.lines

    def restored(self) -> int:
        return sum(e["records"] for e in self.events if e["event"] == "restored")

    def close(self) -> None:
        """Close it cleanly (its stdin ends): it commits, writes its checkpoints and leaves."""
        self.end(timeout=120)
        # "closed" follows close(); the state listener's NOT_RUNNING may come from another thread after it
        assert {"event": "closed"} in self.events, self.events[-5:]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)


def _lines(props: dict[str, str], topic: str, phase: str, n: int) -> Counter[str]:
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(1 + i % 3)) for i in range(n)]
    produce(props, topic, [{"key": f"{phase}-{i}".encode(), "value": line.encode(), "partition": i % 2}
                           for i, line in enumerate(lines)])
    return Counter(w for line in lines for w in line.split(" "))


def _counts(props: dict[str, str], topic: str) -> dict[str, int]:
    """Each word's latest count in the output topic."""
    latest: dict[str, int] = {}
    for r in read_all(props, topic, partitions=2):
        latest[r.key.decode()] = int.from_bytes(r.value, "big")
    return latest


def _counted(app: App, props: dict[str, str], topic: str, want: Counter[str]) -> None:
    def done() -> bool:
        return app.running() and _counts(props, topic) == dict(want)
    wait_for(done, 180, f"the word count to reach {dict(want)}", interval=1)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and "rocksdb" not in p.parts}


def test_a_streams_application_moves_with_its_stores_and_counts_every_word_once(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    app_id, state = f"{ns}.wc", tmp_path / "state"
    topics = (f"{ns}.lines", f"{ns}.counts")
    for t in topics:
        create_topic(old, t, 2)
    log = tmp_path / "hooks.log"
    plan_file = reader_plan(sandbox.plan_file, tmp_path, ns, {
        "name": "word-count", "kind": "kafka-streams", "application_id": app_id, "state_dir": str(state)})
    want = _lines(old, topics[0], "1", 60)

    # Killed under exactly-once: its tasks have store data and no checkpoint. Refused, nothing changed.
    first = App(plan, "old", app_id, state, topics, tmp_path)
    _counted(first, old, topics[1], want)
    first.kill()
    before = _files(state)
    refused = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "word-count", "--execute")
    assert refused.code == 3 and "was not closed cleanly" in refused.err and "nothing was written" in refused.err
    assert "Traceback" not in refused.err and _files(state) == before
    # Started again it wipes and restores the stores (what the refusal said), then closes cleanly.
    again = App(plan, "old", app_id, state, topics, tmp_path)
    want += _lines(old, topics[0], "2", 40)
    _counted(again, old, topics[1], want)
    again.close()
    assert again.restored() > 0

    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    dry = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "word-count", "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err
    moved = dry.json()
    changelog = [p for p in moved["positions"] if p["topic"] == f"{app_id}-counts-changelog"]
    assert sorted(p["partition"] for p in changelog) == [0, 1]
    assert moved["canary"] and all(c["same"] for c in moved["canary"])  # one verdict per partition, each the same
    assert any(p["target"] != p["offset"] for p in changelog)  # transaction markers fall elsewhere on new

    promoted = cutover("promote", "--plan", str(plan_file), "--execute", "-o", "json", timeout=600)
    assert promoted.code == 0, promoted.err
    names = [s["name"] for s in promoted.json()["steps"]]
    assert names.index("move-reader:word-count") < names.index("switch-clients") < names.index(
        "start-reader:word-count")
    for p in changelog:  # each task's checkpoint now holds the new cluster's offset of the same record
        task = state / app_id / f"1_{p['partition']}" / ".checkpoint"
        assert f"{p['topic']} {p['partition']} {p['target']}\n" in task.read_text()
    status = cutover("status", "--plan", str(plan_file))
    assert "reader word-count: on the new cluster, " in status.out and "; last moved forward at " in status.out
    assert f"{p['topic']}[{p['partition']}] {p['offset']} -> {p['target']}" in status.out

    on_new = App(plan, "new", app_id, state, topics, tmp_path)
    want += _lines(new, topics[0], "3", 50)
    _counted(on_new, new, topics[1], want)  # every word exactly once: none lost, none counted twice
    on_new.close()
    assert on_new.restored() == 0  # the stores carried on: nothing restored from the new changelogs

    want += _lines(new, topics[0], "4", 30)  # written on new while the application is stopped; then rollback
    rolled = cutover("rollback", "--plan", str(plan_file), "--execute", "-o", "json", timeout=600)
    assert rolled.code == 0, rolled.err
    back = App(plan, "old", app_id, state, topics, tmp_path)
    _counted(back, old, topics[1], want)
    back.close()
    assert back.restored() == 0
    moves = [json.loads(line) for line in (tmp_path / "journal" / ns / "readers.jsonl").read_text().splitlines()]
    assert [(m["direction"], m["phase"]) for m in moves] == [("forward", "planned"), ("forward", "done"),
                                                             ("reverse", "planned"), ("reverse", "done")]
    assert log.read_text().splitlines() == ["stop old word-count", "start new word-count", "stop new word-count",
                                            "start old word-count"]
