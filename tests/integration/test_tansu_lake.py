"""Tansu's own Iceberg table (Table Topic style) run beside the old pipeline's: what Tansu 0.6.0 writes, found
on Tansu itself; and the pilot's path: the mirror onto Tansu (idempotent, its state on the old cluster: Tansu with
its Iceberg sink refuses every topic without a schema), the platform's table verified against the old table by
key, partition and timestamp, with both tables' freshness.

Marked `tansu`: it needs the binary scripts/tansu builds once per machine, and the sandbox's REST catalog over
S3 storage (`cutover local up --platform new=tansu --catalog rest`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from cutover.lake import tables
from cutover.local.sandbox import Sandbox
from cutover.plan import derive, load_plan
from tests.conftest import cutover, wait_for
from tests.integration.conftest import shaped_sandbox
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import content
from tests.integration.shadow_util import shadow_plan

pytestmark = pytest.mark.tansu

T0 = 1_700_000_000_000
RUNBOOKS = Path(__file__).parents[2] / "runbooks"
#: A JSON schema as Tansu reads it (`schemas/<topic>.json`): the key and the value, each validated.
SCHEMA = {"type": "object", "properties": {
    "key": {"type": "string"},
    "value": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                               "amount": {"type": "number"}}}}}
COLUMNS = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "amount", "type": "double"}]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """Set CUTOVER_TEST_TANSU_LAKE=DIR to reuse a sandbox of this shape that is up."""
    with shaped_sandbox(tmp_path_factory, "tansu-lake", "--platform", "new=tansu", "--catalog", "rest",
                        reuse_env="CUTOVER_TEST_TANSU_LAKE", timeout=600) as box:
        yield box


def _schema(box: Sandbox, topic: str) -> None:
    (box.dir / "new" / "schemas" / f"{topic}.json").write_text(json.dumps(SCHEMA))


def _records(start: int, n: int, partitions: int = 1) -> list[dict[str, Any]]:
    return [{"key": json.dumps(f"k{i}").encode(), "partition": i % partitions, "timestamp": T0 + i,
             "value": json.dumps({"id": i, "name": f"n{i}", "amount": i / 4}).encode(),
             "headers": [("seq", b"%d" % i)]} for i in range(start, start + n)]


def _iceberg(box: Sandbox, topic: str) -> Any:
    return tables.load_table(load_plan(box.plan_file), f"tansu.{topic}")


def _mirror_plan(box: Sandbox, tmp_path: Path, ns: str) -> Path:
    """The sandbox plan (its mirror keys kept: idempotent, state on the old cluster) for this test's topics."""
    return derive(box.plan_file, tmp_path / "mirror.yaml", merge=True, name=ns, topics={"include": [f"{ns}_.*"]},
                  groups={"include": [f"{ns}_.*"]}).file


def test_what_tansu_writes_to_iceberg_and_what_it_refuses(lake: Sandbox, ns: str) -> None:
    new = dict(load_plan(lake.plan_file).cluster("new"))
    bare = f"{ns}_bare"
    create_topic(new, bare, 1)
    errors: list[KafkaError] = []
    producer = Producer({**new, "message.timeout.ms": 10_000})
    producer.produce(bare, b'{"id": 1}', b'"k"', on_delivery=lambda err, _m: errors.append(err) if err else None)
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.UNKNOWN], errors  # a topic without a schema: refused
    topic = f"{ns}_orders"
    _schema(lake, topic)
    create_topic(new, topic, 1)
    produce(new, topic, _records(0, 3))  # one batch
    produce(new, topic, _records(3, 2))  # another
    table = wait_for(lambda: _iceberg(lake, topic) if tables.exists(load_plan(lake.plan_file), f"tansu.{topic}")
                     else None, 60, "Tansu's table")
    fields = {f.name: f for f in table.schema().fields}
    assert list(fields) == ["meta", "key", "value"]  # no offset, no headers
    assert [f.name for f in fields["meta"].field_type.fields] == ["day", "month", "partition", "timestamp",
                                                                         "year"]
    assert [f.name for f in fields["value"].field_type.fields] == ["amount", "id", "name"]  # ordered by name
    assert len(table.snapshots()) == 2  # one commit per produced batch
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["value"]["id"])
    assert [(r["key"], r["value"]["id"], r["meta"]["partition"]) for r in rows] == [
        (f"k{i}", i, 0) for i in range(5)]
    assert rows[1]["meta"]["timestamp"] == "2023-11-14T22:13:20.001+00:00"  # T0 + 1 ms: each record's own
    assert content(read_all(new, topic)) == [(0, json.dumps(f"k{i}").encode(), r["value"], (("seq", b"%d" % i),),
                                              T0 + i) for i, r in enumerate(_records(0, 5))]  # its log keeps all


def test_the_pilot_mirrors_onto_tansu_and_verifies_its_table_against_the_old_pipelines(lake: Sandbox,
                                                                                      tmp_path: Path,
                                                                                      ns: str) -> None:
    plan = load_plan(lake.plan_file)
    assert (plan.spec.mirror.mode, plan.spec.mirror.state_cluster) == ("idempotent", "old")
    old, new = plan.cluster("old"), plan.cluster("new")
    topic = f"{ns}_orders"
    _schema(lake, topic)
    create_topic(old, topic, 2)
    produce(old, topic, [{k: v for k, v in r.items() if k != "timestamp"} for r in _records(0, 30, 2)])  # now
    scoped = _mirror_plan(lake, tmp_path, ns)
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", "-o", "json", timeout=300)
    assert run.code == 0, run.err
    assert content(read_all(new, topic, 2)) == content(read_all(old, topic, 2))
    # The old pipeline's table (its stand-in: cutover's writer on the old cluster), then the platform's, compared.
    legacy = shadow_plan(lake.plan_file, f"{ns}_legacy", tmp_path, [
        {"topic": topic, "old": f"{ns}.unused", "new": f"{ns}.legacy", "schema": COLUMNS}])
    # In its own process: its SparkSession reads the REST catalog (the test session's reads the session's catalog).
    wrote = cutover("shadow", "--plan", str(legacy.file), "--cluster", "old", "--until-caught-up", timeout=600)
    assert wrote.code == 0, wrote.err
    pilot = shadow_plan(lake.plan_file, ns, tmp_path, [
        {"topic": topic, "old": f"{ns}.legacy", "new": f"tansu.{topic}", "new_writer": "tansu", "key": ["id"],
         "old_offset_columns": {"partition": "kafka_partition", "offset": "kafka_offset",
                                "timestamp": "kafka_timestamp"}}])
    wait_for(lambda: tables.exists(pilot, f"tansu.{topic}") and
             len(_iceberg(lake, topic).scan().to_arrow()) == 30, 120, "Tansu's table to hold the 30 records")
    verified = cutover("verify", "--plan", str(pilot.file), "-o", "json", timeout=600)
    assert verified.code == 0, verified.err
    t = verified.json()["tables"][0]
    assert (t["mode"], t["counts"]["matched"], t["counts"]["missing"], t["counts"]["extra"]) == ("key", 30, 0, 0)
    assert t["freshness"]["new"]["rows"] == t["freshness"]["old"]["rows"] == 30
    assert t["freshness"]["cannot_prove"].startswith("offsets")


def test_the_demo_onto_tansu_runs_the_pilot_and_hands_the_table_over_and_back(lake: Sandbox) -> None:
    """`cutover demo --platform new=tansu`: runbooks/platform-table-pilot.yaml on this sandbox, every step passed,
    both tables compared by key with their freshness, every record exactly once on each cluster and in the old
    pipeline's table, through a promote (the name handed to Tansu's table) and a rollback."""
    run = cutover("demo", "--dir", str(lake.dir), "--platform", "new=tansu", "--rate", "25", "--records", "100",
                  "-o", "json", timeout=2400)
    assert run.code == 0, run.err[-3000:]
    s = run.json()
    assert (s["platform"], s["old_pipeline"], s["catalog"]) == ("tansu", "stand-in", "rest")
    assert s["passed"] and s["verify_passed"] and s["verify_after_round_trip_passed"], s
    assert s["each_cluster_exactly_once"] and s["old_table_exactly_once"] and s["records"] >= 300
    assert s["freeze_window_seconds"] > 0 and s["carried_back"] > 0
    # the catalog taken away while records flowed: Tansu refused every write, the mirror stopped naming the record
    # and the broker's answer, and went on once the catalog was back (exactly once: the checks above)
    assert "failed writing the record of" in s["catalog_outage"]["mirror_stopped_saying"], s
    assert "UNKNOWN_SERVER_ERROR" in s["catalog_outage"]["mirror_stopped_saying"] and s["catalog_outage"]["resumed"]
    assert s["replay_passed"], s
    result = json.loads((Path(s["report"]).parent / "result.json").read_text())
    assert result["runbook"] == "platform-table-pilot"
    assert [st["outcome"] for st in result["steps"]] == ["passed"] * len(result["steps"])
    # compared by key, every row of both tables at each quiet moment; each side's freshness measured
    for name in ("the tables agree", "the replay agrees with the platform's table",
                 "the tables agree after the round trip"):
        detail = next(st for st in result["steps"] if st["name"] == name)["detail"]
        assert len(detail["tables"]) == 2, detail
        assert all(c["matched"] == c["old_rows"] == c["new_rows"] > 0 and c["missing"] == c["extra"] == c["mismatched"]
                   == c["duplicates_old"] == c["duplicates_new"] == 0 for c in detail["tables"].values()), detail
        assert name == "the replay agrees with the platform's table" or all(
            f["old"]["rows"] > 0 and f["new"]["rows"] > 0 and f["new"]["p95_ms"] is not None
            for f in detail["freshness"].values()), detail
    routing = json.loads((Path(s["plan"]).parent / "report" / "routing.json").read_text())
    assert routing["active"] == "old"  # rolled back: each canonical name is the old table's again
    assert len(routing["tables"]) == 2 and all(old == now for old, now in routing["tables"].items()), routing



def test_the_schema_change_drill_stops_the_mirror_at_the_first_record_tansu_refuses_and_loses_nothing(
        lake: Sandbox, tmp_path: Path) -> None:
    """runbooks/platform-table-schema-change.yaml on the pilot's plan, run as a user would (`cutover drill run`):
    the order events gain a field mid-stream; Tansu 0.6.0 refuses the first one the mirror copies; the mirror
    stops there naming it; the old cluster holds every record sent and Tansu's table every record its topic holds.
    The refused record has the new field, and the new cluster holds nothing from it on in its partition."""
    import re
    import time

    from cutover.drill.demo import pilot_plan

    ns = "sc_" + time.strftime("%H%M%S")
    plan = pilot_plan(lake, tmp_path / "pilot", ns)
    run = cutover("drill", "run", str(RUNBOOKS / "platform-table-schema-change.yaml"), "--plan", str(plan.file),
                  "--dir", str(lake.dir), "--auto", "--report", str(tmp_path / "report"), "-o", "json", timeout=1200)
    assert run.code == 0, run.err[-3000:]
    result = run.json()
    assert result["passed"] and [st["outcome"] for st in result["steps"]] == ["passed"] * len(result["steps"])
    stopped = next(st for st in result["steps"] if st["name"].startswith("the mirror stops"))["detail"]
    assert stopped["exit"] == 1 and "UNKNOWN_SERVER_ERROR" in stopped["error"], stopped
    found = re.search(r"failed writing the record of (\S+) partition (\d+) offset (\d+)", stopped["error"])
    assert found, stopped
    topic, partition, offset = found[1], int(found[2]), int(found[3])
    at = {r.offset: json.loads(r.value) for r in read_all(plan.cluster("old"), topic, 3) if r.partition == partition}
    assert "channel" in at[offset], at[offset]  # the refused record is one with the new field
    assert all("channel" not in v for o, v in at.items() if o < offset)  # the first one in its partition
    copied = [r.offset for r in read_all(plan.cluster("new"), topic, 3) if r.partition == partition]
    assert copied == list(range(offset)), copied  # every record before it, nothing from it on


def test_a_new_field_tansus_table_cannot_take_stops_the_mirror_naming_the_record(lake: Sandbox, tmp_path: Path,
                                                                                 ns: str) -> None:
    """Tansu 0.6.0 fixes its table's schema at the first batch: a record with a field the table lacks is refused
    (UNKNOWN_SERVER_ERROR), even once the topic's schema file has the field. The mirror stops at that record, naming
    it and the broker's answer (not "could not reach"); nothing after it is written."""
    plan = load_plan(lake.plan_file)
    old, new = plan.cluster("old"), plan.cluster("new")
    topic = f"{ns}_evolving"
    _schema(lake, topic)
    create_topic(old, topic, 1)
    produce(old, topic, [{k: v for k, v in r.items() if k != "timestamp"} for r in _records(0, 3)])  # recent
    scoped = _mirror_plan(lake, tmp_path, ns)
    first = cutover("mirror", "--plan", str(scoped), "--until-caught-up", timeout=300)
    assert first.code == 0, first.err
    schema = json.loads(json.dumps(SCHEMA))  # the producers' new field, in the schema file first
    schema["properties"]["value"]["properties"]["channel"] = {"type": "string"}
    (lake.dir / "new" / "schemas" / f"{topic}.json").write_text(json.dumps(schema))
    produce(old, topic, [{"key": b'"k3"', "value": json.dumps({"id": 3, "name": "n3", "amount": 0.75,
                                                                  "channel": "web"}).encode()}])
    run = cutover("mirror", "--plan", str(scoped), "--until-caught-up", timeout=300)
    assert run.code == 1, run.err
    assert (f"failed writing the record of {topic} partition 0 offset 3" in run.err
            and "with an error it did not name (UNKNOWN_SERVER_ERROR)" in run.err), run.err
    assert "could not reach" not in run.err and "Traceback" not in run.err
    assert [r.offset for r in read_all(new, topic)] == [0, 1, 2]  # nothing beyond the refused record
