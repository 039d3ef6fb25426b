"""The old pipeline as the field runs it: Apache Kafka's Connect worker with Apache Iceberg's sink
connector (Maven Central jars, nothing written here), started by the sandbox on either cluster,
its connector created, paused, resumed and deleted through Connect's REST API, writing the old
table into the sandbox's catalog."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from cutover.kafka.connect import Connect
from cutover.lake import catalog as catalog_mod
from cutover.local.connect import sink_config
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all

CONTROL_PREFIX = "kafka.connect.offsets."


@pytest.fixture(scope="module")
def worker(sandbox: Sandbox) -> Iterator[Connect]:
    """The sandbox's Connect worker on the old cluster; connectors the tests made are deleted after."""
    rest = Connect(sandbox.start_connect("old")["url"])
    before = set(rest.connectors())
    yield rest
    for name in set(rest.connectors()) - before:
        rest.delete(name)


def _records(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"key": b"k%d" % i, "partition": i % 3, "timestamp": 1_700_000_000_000 + i,
             "value": json.dumps({"id": i, "name": f"n{i}", "amount": i / 4}).encode()}
            for i in range(start, start + n)]


def _rows(plan: Plan, table: str) -> list[dict[str, Any]]:
    assert plan.spec.catalog is not None
    cat = catalog_mod.load(plan.spec.catalog)
    if not cat.table_exists(table):
        return []
    return sorted(cat.load_table(table).scan().to_arrow().to_pylist(),
                  key=lambda r: (r["_kafka_metadata_partition"], r["_kafka_metadata_offset"]))


def _summary(plan: Plan, table: str) -> dict[str, str]:
    assert plan.spec.catalog is not None
    snap = catalog_mod.load(plan.spec.catalog).load_table(table).current_snapshot()
    assert snap is not None
    return dict(snap.summary.additional_properties)


def _committed(props: dict[str, str], group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({**props, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def test_the_iceberg_sink_writes_the_old_table_and_is_paused_resumed_and_deleted(
        worker: Connect, plan: Plan, ns: str) -> None:
    old = plan.cluster("old")
    topic, control, table, name = f"{ns}.orders", f"{ns}.control", f"{ns}.orders_old", f"{ns}-sink"
    create_topic(old, topic, 3)
    create_topic(old, control, 1)  # the sink does not create its control topic
    produce(old, topic, _records(300))
    assert plan.spec.catalog is not None
    # One task: with two on one worker, the second's join revokes the first's partitions while its
    # coordinator commits; Iceberg 1.11's sink then stops that coordinator mid-commit and no worker
    # answers a commit again (apache/iceberg#12372, #17637: its rebalance handling).
    worker.put(name, sink_config(plan.spec.catalog, [topic], table, control_topic=control,
                                 commit_interval_ms=1000))
    worker.wait(name, "RUNNING", 120)
    got = wait_for(lambda: (r := _rows(plan, table)) and len(r) >= 300 and r, 180, "the sink to commit 300 rows")

    # every record once, field by field, at its partition and offset
    sent = {(r.partition, r.offset): r for r in read_all(old, topic, 3)}
    assert len(got) == 300 and len(sent) == 300
    for row in got:
        rec = sent[(row["_kafka_metadata_partition"], row["_kafka_metadata_offset"])]
        body = json.loads(rec.value or b"")
        assert (row["id"], row["name"], row["amount"]) == (body["id"], body["name"], body["amount"])
        assert (row["_kafka_metadata_topic"], row["_kafka_metadata_timestamp"]) == (topic, rec.timestamp)

    # the sink's own state: its control-topic offsets in the snapshot, for its connector group
    summary = _summary(plan, table)
    stored = {k: v for k, v in summary.items() if k.startswith(CONTROL_PREFIX)}
    assert list(stored) == [f"{CONTROL_PREFIX}{control}.connect-{name}"]
    assert set(json.loads(next(iter(stored.values())))) == {"0"}
    assert summary["kafka.connect.commit-id"]
    # and the connector's consumer group at the end of each data partition
    wait_for(lambda: _committed(old, f"connect-{name}", topic, 3) == {0: 100, 1: 100, 2: 100}, 60,
             "the connector group committed at the data topic's end")

    worker.pause(name)
    assert worker.wait(name, "PAUSED", 60).tasks == {0: "PAUSED"}
    produce(old, topic, _records(30, start=300))
    worker.resume(name)
    worker.wait(name, "RUNNING", 60)
    wait_for(lambda: len(_rows(plan, table)) >= 330, 120, "the resumed sink to commit the 30 new rows")
    assert sorted(r["id"] for r in _rows(plan, table)) == list(range(330))

    assert worker.delete(name) and worker.state(name) is None and name not in worker.connectors()
    assert not worker.delete(name)  # a second delete: there is none


def test_the_worker_is_in_local_status_and_moves_between_clusters(sandbox: Sandbox, worker: Connect) -> None:
    status = cutover("local", "status", "--dir", str(sandbox.dir), "-o", "json")
    assert status.code == 0, status.err
    shown = json.loads(status.out)["connect"]
    assert shown["cluster"] == "old" and shown["running"] and shown["url"] == worker.url
    assert shown["log"].endswith("connect.log") and "Kafka Connect started" in Path(shown["log"]).read_text()
    old_id = worker.version()["kafka_cluster_id"]
    assert old_id == sandbox.status()["old"]["cluster_id"]
    try:
        moved = sandbox.start_connect("new")
        assert moved["cluster"] == "new" and moved["running"] and moved["url"] == worker.url
        assert worker.version()["kafka_cluster_id"] == sandbox.status()["new"]["cluster_id"]
    finally:
        sandbox.start_connect("old")
    assert worker.version()["kafka_cluster_id"] == old_id
    wrong = cutover("local", "start", "old", "--on", "new", "--dir", str(sandbox.dir))
    assert wrong.code == 2 and "--on is for the Connect worker" in wrong.err
