"""The old pipeline as the field runs it: Apache Kafka's Connect worker with Apache Iceberg's sink
connector (Maven Central jars, nothing written here), started by the sandbox on either cluster,
its connector created, paused, resumed and deleted through Connect's REST API, writing the old
table into the sandbox's catalog."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cutover.errors import Refused
from cutover.kafka.connect import Connect
from cutover.lake import catalog as catalog_mod
from cutover.local.connect import sink_config
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import committed, create_topic, produce, read_all
from tests.integration.listen_util import exposed, serving

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
    # timestamps of now: records older than the topic's retention (7 days) go at the broker's next
    # retention check, which comes 5 minutes into a session's sandbox
    now = int(time.time() * 1000)
    return [{"key": b"k%d" % i, "partition": i % 3, "timestamp": now + i,
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


def _topics(props: dict[str, str]) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient(dict(props)).list_topics(timeout=30).topics)


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
    wait_for(lambda: committed(old, f"connect-{name}", topic, 3) == {0: 100, 1: 100, 2: 100}, 60,
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
    wrong = cutover("local", "start", "old", "--cluster", "new", "--dir", str(sandbox.dir))
    assert wrong.code == 2 and "--cluster is for the Connect worker" in wrong.err


def _shadow_rows(plan: Plan, table: str) -> list[dict[str, Any]]:
    assert plan.spec.catalog is not None
    cat = catalog_mod.load(plan.spec.catalog)
    return cat.load_table(table).scan().to_arrow().to_pylist() if cat.table_exists(table) else []


def _sink_plan(sandbox: Sandbox, ns: str, tmp: Path, worker: Connect, **pair: Any) -> Plan:
    from cutover.plan import derive

    return derive(sandbox.plan_file, tmp / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  switch={"journal_dir": str(tmp / "journal")},
                  tables=[{"topic": f"{ns}.orders", "old": f"{ns}.orders_old", "new": f"{ns}.orders_new",
                           "writer_offsets": "iceberg-connect", "connector": f"{ns}-sink",
                           "control_topic": f"control-{ns}", "connect_url": worker.url,
                           "old_offset_columns": {"partition": "_kafka_metadata_partition",
                                                  "offset": "_kafka_metadata_offset",
                                                  "topic": "_kafka_metadata_topic",
                                                  "timestamp": "_kafka_metadata_timestamp"}, **pair}])


def _sink_writing(sandbox: Sandbox, worker: Connect, ns: str, tmp: Path, n: int) -> tuple[Plan, dict[str, str]]:
    """A plan whose old table the sink writes from the old cluster: `n` records written there, and
    mirrored to the new cluster; the plan and the connector's configuration."""
    main = _sink_plan(sandbox, ns, tmp, worker)
    pair, old = main.spec.tables[0], main.cluster("old")
    create_topic(old, pair.topic, 3)
    create_topic(old, pair.control_topic, 1)  # the sink does not create its control topic
    produce(old, pair.topic, _records(n))
    assert main.spec.catalog is not None and pair.connector
    config = sink_config(main.spec.catalog, [pair.topic], pair.old, control_topic=pair.control_topic,
                         commit_interval_ms=1000)
    worker.put(pair.connector, config)
    wait_for(lambda: len(_rows(main, pair.old)) >= n, 120, f"the sink to write {n} rows from the old cluster")
    mirrored = cutover("mirror", "--plan", str(main.file), "--until-caught-up", "-o", "json")
    assert mirrored.code == 0, mirrored.err
    return main, config


def _ids(plan: Plan, table: str) -> list[int]:
    return sorted(r["id"] for r in _rows(plan, table))


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_the_same_sink_connector_goes_on_from_the_new_cluster_at_the_next_record(
        sandbox: Sandbox, worker: Connect, plan: Plan, ns: str, tmp_path: Path) -> None:
    from cutover.switch import sink

    main, config = _sink_writing(sandbox, worker, ns, tmp_path, 150)
    pair = main.spec.tables[0]
    new = main.cluster("new")

    # a running connector is refused before anything changes
    with pytest.raises(Refused, match="is RUNNING"):
        sink.move(main, pair, "t1", 30, "forward")
    assert pair.control_topic not in _topics(new)

    worker.pause(f"{ns}-sink")
    worker.wait(f"{ns}-sink", "PAUSED", 60)
    detail = sink.move(main, pair, "t1", 60, "forward")
    assert detail["old_positions"] == {0: 50, 1: 50, 2: 50}
    # every record was read: the group sits right after each partition's last copy on the new cluster
    copies = read_all(new, pair.topic, 3)
    last = {p: max(r.offset for r in copies if r.partition == p) for p in range(3)}
    assert len(copies) == 150 and detail["new_positions"] == {p: o + 1 for p, o in last.items()}
    assert detail["control_topic_ends"] == {0: 0} and pair.control_topic in _topics(new)
    assert committed(new, pair.sink_group, pair.topic, 3) == detail["new_positions"]

    sandbox.start_connect("new")  # the operator moves the Connect cluster and creates the connector again
    worker.put(f"{ns}-sink", config)
    worker.wait(f"{ns}-sink", "RUNNING", 120)
    produce(new, pair.topic, _records(90, start=150))  # the clients write the new cluster now
    wait_for(lambda: len(_rows(main, pair.old)) >= 240, 120, "the sink to write the new cluster's 90 rows")
    assert _ids(main, pair.old) == list(range(240)), "every record once: no gap, no duplicate"
    fresh = [r for r in _rows(main, pair.old) if r["id"] >= 150]
    assert {(r["_kafka_metadata_partition"], r["_kafka_metadata_offset"]) for r in fresh} == \
        {(r.partition, r.offset) for r in read_all(new, pair.topic, 3) if json.loads(r.value or b"")["id"] >= 150}
    # a re-run of the hand-over (a crash after it) leaves the connector's own progress alone
    worker.pause(f"{ns}-sink")
    worker.wait(f"{ns}-sink", "PAUSED", 60)
    progressed = committed(new, pair.sink_group, pair.topic, 3)
    again = sink.move(main, pair, "t1", 60, "forward")
    assert again["stamped_before"] and again["new_positions"] == detail["new_positions"]
    assert committed(new, pair.sink_group, pair.topic, 3) == progressed != detail["new_positions"]
    worker.delete(f"{ns}-sink")
    sandbox.start_connect("old")


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_a_hand_over_is_refused_before_anything_changes_when_the_sinks_state_does_not_add_up(
        sandbox: Sandbox, worker: Connect, ns: str, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from cutover.switch import sink

    main, _config = _sink_writing(sandbox, worker, ns, tmp_path, 30)
    pair = main.spec.tables[0]
    old, new = main.cluster("old"), main.cluster("new")
    worker.stop(pair.connector or "")
    worker.wait(pair.connector or "", "STOPPED", 60)

    def refused(other: Any, match: str) -> None:
        with pytest.raises(Refused, match=match) as exc:
            sink.move(main, other, "t", 3, "forward")
        assert exc.value.exit_code == 3
        assert pair.control_topic not in _topics(new), "nothing made on the new cluster"
        assert committed(new, pair.sink_group, pair.topic, 3) == {0: -1001, 1: -1001, 2: -1001}

    # the plan names another connector: the table holds offsets of a group other than the configured one
    refused(dataclasses.replace(pair, connector="billing-sink", connect_url=None),
            f"hold Iceberg sink offsets for kafka.connect.offsets.{pair.control_topic}.{pair.sink_group}")
    # a DataWritten of the group past the table's positions: files whose records the group counts as done
    # are not in the table (the connector stopped between sending them and its coordinator's commit)
    written = next(m for m in _control_events(old, pair.control_topic) if sink.event(m, "")[0] == "DataWritten")
    producer = Producer(old)
    producer.produce(pair.control_topic, written, partition=0)
    assert producer.flush(30) == 0
    refused(pair, "DataWritten event.* are not committed to the table")


def _control_events(props: dict[str, str], topic: str) -> list[bytes]:
    return [r.value or b"" for r in read_all(props, topic, 1)]


_SINK_HOOK = '''#!{python}
"""The old pipeline's hooks: pause the sink connector, or move the Connect worker to a cluster and have the
connector (created there if it is not) run. Killed cutover on cue, once (a crash inside the hand-over)."""
import json, os, signal, subprocess, sys
from cutover.kafka.connect import Connect

action, cluster = sys.argv[1], sys.argv[2]
kill = "{kills}/" + os.environ["CUTOVER_ACTION"] + "." + action + "." + cluster
if os.path.exists(kill):
    os.remove(kill)
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(1)
rest, name = Connect("{url}"), "{name}"
if action == "pause":
    rest.pause(name)
    rest.wait(name, "PAUSED", 120)
else:
    subprocess.run(["{cutover}", "local", "start", "connect", "--cluster", cluster, "--dir", "{sandbox}"], check=True)
    if rest.config(name) is None:
        rest.put(name, json.loads(open("{config}").read()))
    else:
        rest.resume(name)
    rest.wait(name, "RUNNING", 120)
print(f"connector {{name}}: {{action}} on {{cluster}}")
'''


def _sink_hooks(folder: Path, sandbox: Sandbox, worker: Connect, name: str, config: dict[str, str],
                kills: Path) -> dict[str, str]:
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    script = folder / "sink-hook"
    script.write_text(_SINK_HOOK.format(python=sys.executable, url=worker.url, name=name, sandbox=sandbox.dir,
                                        cutover=Path(sys.executable).parent / "cutover",
                                        config=folder / "config.json", kills=kills))
    script.chmod(0o755)
    out = {}
    for event, args in {"stop_old_writer": "pause old", "start_new_writer": "run new",
                        "stop_new_writer": "pause new", "start_old_writer": "run old"}.items():
        (folder / event).write_text(f'#!/bin/sh\nexec "{script}" {args}\n')
        (folder / event).chmod(0o755)
        out[event] = str(folder / event)
    return out


#: How long a sink may take to write on after `_crash_the_worker` (seconds).
AFTER_CRASH = 300


def _crash_the_worker(sandbox: Sandbox, worker: Connect, name: str, cluster: str) -> None:
    """SIGKILL the Connect worker as its sink's coordinator starts a commit, then start it again."""
    log = Path(sandbox.status()["connect"]["log"])
    seen = log.read_text().count("Sending event of type: START_COMMIT")
    wait_for(lambda: log.read_text().count("Sending event of type: START_COMMIT") > seen, 60,
             "the sink's coordinator to start a commit")
    assert sandbox.stop_connect(kill=True)["was_running"]
    assert sandbox.start_connect(cluster)["cluster"] == cluster
    worker.wait(name, "RUNNING", 180)


@pytest.mark.slow
def test_promote_and_rollback_hand_the_sink_connector_over_with_live_traffic_and_a_crash_in_each_hand_over(
        sandbox: Sandbox, worker: Connect, plan: Plan, ns: str, tmp_path: Path) -> None:
    import subprocess
    import sys
    from collections import Counter

    from cutover.drill.context import control_hooks
    from cutover.drill.demo import ORDERS
    from cutover.drill.traffic import Traffic
    from cutover.plan import derive
    from cutover.switch import background
    from tests.integration.shadow_util import kill_group, start_shadow
    from tests.integration.test_switch import _until_done

    ctl, kills, name = tmp_path / "ctl", tmp_path / "kills", f"{ns}-sink"
    ctl.mkdir()
    kills.mkdir()
    topic, table, control = f"{ns}.orders", f"{ns}.legacy", f"control-{ns}"
    assert plan.spec.catalog is not None
    config = sink_config(plan.spec.catalog, [topic], table, control_topic=control, commit_interval_ms=1000)
    hooks = {**control_hooks(tmp_path / "hooks", ctl), **_sink_hooks(tmp_path / "hooks", sandbox, worker, name,
                                                                       config, kills)}
    main = derive(sandbox.plan_file, tmp_path / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  mirror={"group_sync_interval": "1s"}, spark={"checkpoint_dir": str(tmp_path / "ck")},
                  gates={"quiet_period": "2s", "verify_max_age": "1h", "max_lag_rows": {"old_ahead": 600}},
                  switch={"journal_dir": str(tmp_path / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s",
                          "hook_timeout": "180s"},
                  routing={"file": str(tmp_path / "routing.json")}, hooks=hooks,
                  tables=[{"topic": topic, "old": table, "new": f"{ns}.orders", "schema": ORDERS,
                           "checks": ["sink_orders"], "writer_offsets": "iceberg-connect", "connector": name,
                           "control_topic": control, "connect_url": worker.url,
                           "old_offset_columns": {"partition": "_kafka_metadata_partition",
                                                  "offset": "_kafka_metadata_offset",
                                                  "topic": "_kafka_metadata_topic",
                                                  "timestamp": "_kafka_metadata_timestamp"}}])
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "sink_orders.json").write_text(json.dumps({"name": "sink_orders", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "seq"}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "seq"}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 1,
                                                                  "max_value": 900}}]}))
    create_topic(main.cluster("old"), topic, 3)
    create_topic(main.cluster("old"), control, 1)
    producer = Traffic(main, ctl, [topic], rate=30)
    shadowing = None
    producer.start()
    worker.put(name, config)
    mirror = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(main.file)],
                              stdout=subprocess.DEVNULL, stderr=(tmp_path / "mirror.err").open("w"))
    try:
        wait_for(lambda: len(_rows(main, table)) >= 100, 120, "the sink to write the old cluster's traffic")
        _crash_the_worker(sandbox, worker, name, "old")  # SIGKILL at a commit; it comes back and goes on
        # After a SIGKILL at a commit the worker rejoins and the sink's coordinator starts over: within 120 s here,
        # not always in CI's loaded lane (a local CI run of 2026-11-29). The deadline bounds a failure only.
        wait_for(lambda: len(_rows(main, table)) >= 200, AFTER_CRASH, "the sink to write on after the crash")
        wait_for(lambda: cutover("mirror", "status", "--plan", str(main.file), "-o", "json").json()["lag"] < 300,
                 60, f"the mirror to catch up (its log: {tmp_path / 'mirror.err'})")
        shadowing = start_shadow(main, tmp_path / "shadow.err", "--follow")  # the parallel write path, from new
        wait_for(lambda: len(_shadow_rows(main, f"{ns}.orders")) >= 150, 180,
                 f"the shadow to write from the new cluster (its log: {tmp_path / 'shadow.err'})")
        # cutover is SIGKILLed once inside the hand-over, after the table is stamped, before the connector
        # runs on the new cluster: the re-run finds the stamp and only starts it
        checked = cutover("verify", "--plan", str(main.file), "-o", "json", timeout=600)
        assert checked.code == 0, checked.err
        result = checked.json()["tables"][0]  # the sink's table against the shadow's, by Kafka offsets
        assert result["mode"] == "offsets" and result["counts"]["matched"] >= 150, result["counts"]
        assert [(x["side"], x["success"]) for x in result["suites"]] == [("old", True), ("new", True)]
        (kills / "promote.run.new").touch()
        killed, promoted = _until_done(main, "promote", kills, 3, "--verify")
        assert killed == 1 and promoted["phase"] == "promoted"
        mirror.terminate()
        mirror.wait(60)
        wait_for(lambda: sum(1 for s in producer.sent if s.cluster == "new") >= 150, 90,
                 "the traffic to go on on the new cluster")
        # the same connector writes them from the new cluster (before any rollback could carry them back)
        on_new = {s.seq for s in producer.sent if s.cluster == "new"}
        wait_for(lambda: on_new <= {r["seq"] for r in _rows(main, table)}, 120,
                 "the sink to write the new cluster's records from the new cluster")
        _crash_the_worker(sandbox, worker, name, "new")
        on_new = {s.seq for s in producer.sent if s.cluster == "new"}
        wait_for(lambda: on_new <= {r["seq"] for r in _rows(main, table)}, AFTER_CRASH,
                 "the sink to write on from the new cluster after the crash")
        (kills / "rollback.run.old").touch()
        killed, rolled = _until_done(main, "rollback", kills, 3)
        assert killed == 1 and rolled["phase"] == "rolled-back"
        wait_for(lambda: sum(1 for s in producer.sent[-100:] if s.cluster == "old") >= 100, 90,
                 "the traffic to go on on the old cluster")
        (ctl / "pause").touch()
        wait_for(lambda: (ctl / "producer.paused").exists(), 60, "the producer to pause")
    finally:
        producer.stop()
        if mirror.poll() is None:
            mirror.kill()
        if shadowing is not None:
            kill_group(shadowing)
        background.stop(main)
    seqs = [s.seq for s in producer.sent]
    assert len(set(seqs)) == len(seqs) and not producer.errors
    assert {s.cluster for s in producer.sent} == {"old", "new"}
    wait_for(lambda: len(_rows(main, table)) >= len(seqs), 180, "the sink to write every record")
    in_table = Counter(r["seq"] for r in _rows(main, table))
    assert in_table == Counter(seqs), "the sink's table holds every record exactly once through both switches"
    worker.delete(name)


def test_the_connect_worker_listens_on_loopback_only(sandbox: Sandbox, worker: Connect) -> None:
    assert exposed(serving(sandbox.dir, "connect")) == {}
