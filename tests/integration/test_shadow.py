"""cutover shadow against real Kafka, Spark and the Iceberg catalog: row shape, offsets in every
snapshot, resumption from the table, dead letters, schema drift, either cluster."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cutover.errors import Refused
from cutover.lake import catalog as catalog_mod
from cutover.lake import stamps
from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan
from cutover.shadow.writer import BadRecord, SchemaDrift
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.metrics_util import scrape, value
from tests.integration.shadow_util import as_rec, json_values, produce_txn, rows, shadow, shadow_plan, stamped

pytestmark = pytest.mark.usefixtures("spark")  # one SparkSession for the in-process runs

SCHEMA = [{"name": "id", "type": "long", "nullable": False}, {"name": "name", "type": "string"},
          {"name": "amount", "type": "decimal(12,2)"}]


def _raw_traffic(i: int) -> dict[str, Any]:
    rec: dict[str, Any] = {"value": None if i % 17 == 0 else b"v%d" % i, "partition": i % 3,
                           "headers": [("n", b"%d" % i), ("empty", None)] if i % 2 else []}
    if i % 5:
        rec["key"] = b"k%d" % i
    return rec


@pytest.mark.lake(only="rest")
@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_raw_rows_match_the_topic_field_by_field_and_each_snapshot_stamps_its_offsets(
        sandbox: Sandbox, tmp_path: Path, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = f"{ns}.events"
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.old", "new": f"{ns}.events",
                                                          "format": "raw"}], max_records_per_batch=40)
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    produce_txn(new, topic, f"{ns}-tx", [([_raw_traffic(i) for i in range(0, 60)], True),
                                         ([_raw_traffic(i) for i in range(60, 90)], False),
                                         ([_raw_traffic(i) for i in range(90, 150)], True)])

    first = shadow(plan)
    expected = read_all(new, topic, 3)
    assert len(expected) == 120  # the aborted transaction is not readable
    assert [as_rec(r) for r in rows(plan, f"{ns}.events")] == expected
    assert first.tables[0].rows == 120 and first.tables[0].batches >= 3
    # every committed batch timed each of its phases (no metrics port: no lag read)
    assert set(first.tables[0].phases) == {"status", "decode", "write", "commit"}
    assert 0 < sum(first.tables[0].phases.values()) <= first.seconds

    # Every stamped snapshot names exactly the offsets of the rows it added.
    catalog = catalog_mod.load(plan.spec.catalog)  # type: ignore[arg-type]
    table = catalog.load_table(f"{ns}.events")
    seen: set[tuple[int, int]] = set()
    snaps = stamped(plan, f"{ns}.events")
    assert len(snaps) == first.tables[0].batches
    for snap in snaps:
        at = {(r["kafka_partition"], r["kafka_offset"]) for r in table.scan(
            snapshot_id=snap.snapshot_id, selected_fields=("kafka_partition", "kafka_offset")).to_arrow().to_pylist()}
        added = at - seen
        by_partition: dict[int, list[int]] = {}
        for p, o in added:
            by_partition.setdefault(p, []).append(o)
        assert stamps.ranges(snap) == {p: (min(os), max(os)) for p, os in by_partition.items()}
        assert snap.summary[stamps.K_CLUSTER] == first.cluster_id
        seen = at

    # The run dropped its commit branch. A run that died leaves one: the next run drops it once its head is
    # older than the table's newest snapshot by STALE_BRANCH_MS (here 0), and keeps branches not its own.
    assert set(table.metadata.refs) == {"main"}
    oldest = snaps[0].snapshot_id
    table.manage_snapshots().create_branch(oldest, "cutover_deadrun").create_branch(oldest, "audit").commit()
    monkeypatch.setattr("cutover.shadow.job.STALE_BRANCH_MS", 0)

    # More records, a new run (fresh checkpoint), and a run told to start from the earliest
    # offsets: every record exactly once.
    produce_txn(new, topic, f"{ns}-tx", [([_raw_traffic(i) for i in range(150, 200)], True)])
    second = shadow(plan)
    assert second.tables[0].rows == 50
    assert set(catalog.load_table(f"{ns}.events").metadata.refs) == {"main", "audit"}
    again = shadow(plan, start="earliest")
    assert again.tables[0].rows == 0
    assert [as_rec(r) for r in rows(plan, f"{ns}.events")] == read_all(new, topic, 3)

    status = cutover("shadow", "status", "--plan", str(plan.file), "-o", "json")
    assert status.code == 0, status.err
    t = status.json()["tables"][0]
    assert t["lag"] == 0 and all(p["lag_exact"] for p in t["partitions"])
    ends = read_all(new, topic, 3)
    assert {p["partition"]: p["last_offset"] for p in t["partitions"]} == {
        p: max(r.offset for r in ends if r.partition == p) for p in range(3)}
    assert t["last_commit"] is not None and t["cluster_id"] == first.cluster_id


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_json_poison_records_go_to_the_dead_letter_table_and_new_fields_become_columns(
        sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.orders"
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": f"{ns}.orders",
                                                          "schema": SCHEMA, "partition_by": ["day(kafka_timestamp)"]}])
    new = plan.cluster("new")
    create_topic(new, topic, 2)
    poison = [{"value": b"not json", "partition": 0}, {"value": b'{"name": "no id"}', "partition": 1},
              {"value": b'{"id": 3, "amount": "many"}', "partition": 0}, {"value": None, "partition": 1},
              {"value": b"[1, 2]", "partition": 0}]
    produce(new, topic, json_values(10) + poison + json_values(4, start=10))
    port, began = free_port(), time.time()
    first = shadow(plan, metrics_at=plan.metrics_endpoint("shadow", port))
    assert first.tables[0].batches >= 1 and first.tables[0].two_pass_batches == 0  # read, decoded, written at once
    good = rows(plan, f"{ns}.orders")
    assert [(r["id"], r["name"], float(r["amount"])) for r in good] == sorted(
        [(i, f"n{i}", i / 4) for i in range(14)], key=lambda t: (t[0] % 2, t[0]))
    dead = sorted(rows(plan, f"{ns}.orders_dead_letter"), key=lambda r: r["kafka_value"] or b"")
    records = {(r.partition, r.value): r.offset for r in read_all(new, topic, 2)}
    assert {(r["kafka_partition"], r["kafka_offset"], r["kafka_value"]) for r in dead} == {
        (p["partition"], records[(p["partition"], p["value"])], p["value"]) for p in poison}
    by_value = {r["kafka_value"]: r["error"] for r in dead}
    assert "not a JSON object" in by_value[b"not json"] and "not a JSON object" in by_value[b"[1, 2]"]
    assert by_value[b'{"name": "no id"}'] == "required field id is missing or null"
    assert "not a JSON object" in by_value[b'{"id": 3, "amount": "many"}']
    assert "tombstone" in by_value[None]
    assert len(dead) == len(poison)
    in_table = {(r["kafka_partition"], r["kafka_offset"]) for r in good}
    in_dead = {(r["kafka_partition"], r["kafka_offset"]) for r in dead}
    assert not in_table & in_dead and len(in_table | in_dead) == 19  # every record somewhere, once

    # --metrics-port: what the shadow served, per table (scraped over HTTP after the run, the server still up)
    served, table = scrape(port), f"{ns}.orders"
    assert value(served, "cutover_shadow_rows_total", table=table) == 14
    batches = value(served, "cutover_shadow_batches_total", table=table)
    assert batches >= 1 and value(served, "cutover_shadow_batch_duration_seconds_count", table=table) == batches
    reasons = Counter(str(r["error"]).split(":", 1)[0] for r in dead)
    assert {labels["reason"]: n for labels, n in served["cutover_shadow_dead_letters_total"]} == reasons
    assert {labels["partition"]: n for labels, n in served["cutover_shadow_lag_records"]
            if labels["table"] == table} == {"0": 0, "1": 0}
    assert {labels["partition"]: n for labels, n in served["cutover_shadow_retention_gap_records"]
            if labels["table"] == table} == {"0": 0, "1": 0}
    assert began <= value(served, "cutover_shadow_last_commit_timestamp_seconds", table=table) <= time.time()
    assert value(served, "cutover_shadow_freshness_seconds", table=table) >= 0
    assert value(served, "cutover_shadow_commit_failures_total", table=table) == 0  # there from the start
    assert value(served, "cutover_shadow_commit_gave_up_total", table=table) == 0

    # Schema drift (evolve): a new field becomes a nullable column; earlier rows keep theirs.
    produce(new, topic, json_values(2, start=100, coupon="SPRING", score=7))
    result = shadow(plan)
    assert sorted(result.tables[0].added_columns) == ["coupon", "score"]
    assert result.tables[0].two_pass_batches == 1  # the batch with new fields: counted first, then written
    after = rows(plan, f"{ns}.orders")
    assert len(after) == 16
    assert [(r["id"], r["coupon"], r["score"]) for r in after if r["id"] >= 100] == [(100, "SPRING", 7),
                                                                                    (101, "SPRING", 7)]
    assert all(r["coupon"] is None and r["score"] is None for r in after if r["id"] < 100)
    assert {(r["id"], r["name"]) for r in after if r["id"] < 100} == {(r["id"], r["name"]) for r in good}

    status = cutover("shadow", "status", "--plan", str(plan.file), "-o", "json").json()["tables"][0]
    assert status["dead_letters"] == 5 and status["lag"] == 0


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_bad_record_and_drift_policies_that_stop_write_nothing(sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.strict"
    pair = {"topic": topic, "old": f"{ns}.o", "new": f"{ns}.strict", "schema": SCHEMA, "schema_drift": "fail"}
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [pair])
    new = plan.cluster("new")
    create_topic(new, topic, 1)
    produce(new, topic, [{"value": json.dumps({"id": 1}).encode()}, {"value": b"{oops"},
                         {"value": json.dumps({"id": 3}).encode()}])
    with pytest.raises(BadRecord, match=r"partition 0 offset 1: value is not a JSON object"):
        shadow(plan, on_bad_record="fail")
    assert rows(plan, f"{ns}.strict") == [] and stamped(plan, f"{ns}.strict") == []

    run = cutover("shadow", "--plan", str(plan.file), "--on-bad-record", "fail")
    assert run.code == 1 and "partition 0 offset 1" in run.err and "Traceback" not in run.err

    shadow(plan)  # dead-letter (the plan's default) lets the good records through
    assert [r["id"] for r in rows(plan, f"{ns}.strict")] == [1, 3]
    produce(new, topic, [{"value": json.dumps({"id": 4, "surprise": True}).encode()}])
    with pytest.raises(SchemaDrift, match=r"offset 3: field\(s\) surprise are not columns"):
        shadow(plan)
    assert [r["id"] for r in rows(plan, f"{ns}.strict")] == [1, 3]

    dl_plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{**pair, "schema_drift": "dead-letter"}])
    shadow(dl_plan)
    assert [r["id"] for r in rows(plan, f"{ns}.strict")] == [1, 3]
    drifted = [r for r in rows(plan, f"{ns}.strict_dead_letter") if r["kafka_offset"] == 3]
    assert len(drifted) == 1 and "surprise" in drifted[0]["error"]


def test_inferred_schema_and_text_format(sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": f"{ns}.inferred", "old": f"{ns}.a", "new": f"{ns}.inferred"},
        {"topic": f"{ns}.text", "old": f"{ns}.b", "new": f"{ns}.text", "format": "text"}])
    new = plan.cluster("new")
    create_topic(new, f"{ns}.inferred", 2)
    create_topic(new, f"{ns}.text", 1)
    produce(new, f"{ns}.inferred", json_values(6))
    produce(new, f"{ns}.text", [{"value": "héllo".encode()}, {"value": b"\xff\xfe"}, {"value": b"plain"}])
    shadow(plan)
    assert sorted((r["id"], r["name"], r["amount"]) for r in rows(plan, f"{ns}.inferred")) == [
        (i, f"n{i}", i / 4) for i in range(6)]
    assert [r["value"] for r in rows(plan, f"{ns}.text")] == ["héllo", "plain"]
    assert [(r["kafka_offset"], r["kafka_value"]) for r in rows(plan, f"{ns}.text_dead_letter")] == [(1, b"\xff\xfe")]


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_a_table_built_from_the_old_cluster_is_not_continued_from_the_new_one_without_offsets(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.replay"
    scoped = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.legacy",
                                                            "new": f"{ns}.replay", "schema": SCHEMA}])
    old, new = plan.cluster("old"), plan.cluster("new")
    for props in (old, new):
        create_topic(props, topic, 2)
    produce(old, topic, json_values(8))
    built = shadow(scoped, cluster="old")
    assert built.tables[0].rows == 8
    produce(new, topic, json_values(4, start=8))
    with pytest.raises(Refused, match="holds offsets of cluster"):
        shadow(scoped)
    refused = cutover("shadow", "--plan", str(scoped.file))
    assert refused.code == 3 and "cutover offsets translate" in refused.err
    # The hand-over: explicit (translated) start positions on the new cluster.
    shadow(scoped, start_offsets={topic: {0: 0, 1: 0}})
    assert sorted(r["id"] for r in rows(scoped, f"{ns}.replay")) == list(range(12))
    assert shadow(scoped).tables[0].rows == 0


def test_a_table_whose_first_snapshot_never_landed_is_completed_by_the_next_run(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    """The catalog failed between creating the table and its first (empty) snapshot, which every
    later commit compares against: the next run adds that snapshot and writes every record."""
    from cutover.lake import catalog

    topic = f"{ns}.half"
    pairs = [{"topic": topic, "old": f"{ns}.o", "new": f"{ns}.model", "schema": SCHEMA}]
    model = shadow_plan(sandbox.plan_file, f"{ns}_model", tmp_path, pairs, commit_timeout="5s")
    create_topic(plan.cluster("new"), topic, 2)
    shadow(model)  # a table of the shadow's own shape, to copy the shape from
    cat = catalog.load(model.spec.catalog)  # type: ignore[arg-type]
    shape = cat.load_table(f"{ns}.model")
    cat.create_table(f"{ns}.half", schema=shape.schema(), partition_spec=shape.spec(),
                     properties={"format-version": "2"})
    assert cat.load_table(f"{ns}.half").current_snapshot() is None

    half = shadow_plan(sandbox.plan_file, ns, tmp_path, [{**pairs[0], "new": f"{ns}.half"}], commit_timeout="5s")
    produce(plan.cluster("new"), topic, json_values(6))
    assert shadow(half).tables[0].rows == 6
    assert sorted((r["id"], r["kafka_partition"], r["kafka_offset"]) for r in rows(half, f"{ns}.half")) == sorted(
        (i, i % 2, i // 2) for i in range(6))
