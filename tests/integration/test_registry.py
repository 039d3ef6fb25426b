"""Schemas move with the topics: real registries (Apicurio 2.4.2, Confluent API), real clusters, real Spark.

Records are produced with confluent-kafka's own AvroSerializer against the old registry,
mirrored, the registry synced with its ids, the wire format audited, and the topic
shadowed into Iceberg with spark-avro; every row is compared field by field with what
the Avro deserializer reads from the new cluster through the new registry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive, load_plan
from cutover.registry import apicurio
from cutover.registry.client import RegistryClient, Version
from cutover.registry.client import Schema as CutoverSchema
from tests.conftest import answering, cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.listen_util import exposed, serving
from tests.integration.mirror_util import scoped_plan
from tests.integration.shadow_util import rows, shadow, shadow_plan

KEY = {"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
# v2 adds a field with a default; v3 removes the optional field `note`
V2 = {**V1, "fields": [*V1["fields"], {"name": "currency", "type": "string", "default": "EUR"}]}
V3 = {**V1, "fields": [f for f in V2["fields"] if f["name"] != "note"]}


def _produce_avro(url: str, props: dict[str, str], topic: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Records of three schema versions, keys in Avro too; (key, value) as sent, in send order."""
    client = SchemaRegistryClient({"url": url})
    sent: list[tuple[dict[str, Any], dict[str, Any]]] = []
    records = []
    key_ser = AvroSerializer(client, json.dumps(KEY), conf={"auto.register.schemas": True})
    for version, schema in enumerate((V1, V2, V3), 1):
        ser = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True})
        for i in range(6):
            n = version * 100 + i
            value: dict[str, Any] = {"id": n, "name": f"order-{n}"}
            if "note" in [f["name"] for f in schema["fields"]]:
                value["note"] = None if i % 2 else f"note-{n}"
            if version >= 2:
                value["currency"] = "USD" if i % 3 == 0 else "SEK"
            key = {"id": n}
            records.append({"key": key_ser(key, SerializationContext(topic, MessageField.KEY)),
                            "value": ser(value, SerializationContext(topic, MessageField.VALUE)),
                            "partition": n % 2})
            sent.append((key, value))
    produce(props, topic, records)
    return sent


def _mirror(plan_file: Path) -> None:
    run = cutover("mirror", "--plan", str(plan_file), "--until-caught-up", timeout=300)
    assert run.code == 0, run.err


def _decode_all(url: str, props: dict[str, str], topic: str) -> list[tuple[int, int, Any, Any]]:
    """(partition, offset, key, value) of every record, decoded with the registry at `url`."""
    client = SchemaRegistryClient({"url": url})
    key_de, value_de = AvroDeserializer(client), AvroDeserializer(client)
    out = []
    for r in read_all(props, topic, partitions=2):
        try:
            key = key_de(r.key, SerializationContext(topic, MessageField.KEY))
            value = value_de(r.value, SerializationContext(topic, MessageField.VALUE))
        except Exception:
            continue  # the test's deliberately broken records
        out.append((r.partition, r.offset, key, value))
    return out


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_an_avro_topic_moves_with_its_schema_ids_and_is_shadowed_row_for_row(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path, spark: Any) -> None:
    plan: Plan = load_plan(sandbox.plan_file)
    old, new = plan.cluster("old"), plan.cluster("new")
    topic = f"{ns}.orders"
    create_topic(old, topic, partitions=2)
    sent = _produce_avro(registries["old"], old, topic)
    # a record framed with an id no registry holds, and one not framed at all
    produce(old, topic, [{"key": b"\x00\x00\x0f\x42\x3f", "value": b"\x00\x00\x0f\x42\x3f\x02\x04", "partition": 0},
                         {"key": None, "value": b"plain text, not framed", "partition": 1}])
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    _mirror(mirror_plan)

    # The sync: planned read-only, then carried out, then nothing left to do.
    dry = cutover("registry", "sync", "--plan", str(mirror_plan), "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err
    planned = dry.json()
    assert planned["subjects"] == [f"{topic}-key", f"{topic}-value"]
    assert planned["to_copy"] == 4 and planned["refusals"] == [] and not planned["executed"]
    old_reg = RegistryClient("old", {"url": registries["old"]})
    new_reg = RegistryClient("new", {"url": registries["new"]})
    assert new_reg.versions(f"{topic}-value") == []  # a dry run writes nothing
    done = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "-o", "json")
    assert done.code == 0, done.err
    assert done.json()["copied"] == 4
    again = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "-o", "json")
    assert again.code == 0 and again.json()["copied"] == 0 and again.json()["present"] == 4, again.err
    for subject in (f"{topic}-key", f"{topic}-value"):
        assert new_reg.versions(subject) == old_reg.versions(subject)
        for v in old_reg.versions(subject):
            a, b = old_reg.version(subject, v), new_reg.version(subject, v)
            assert a is not None and b is not None
            assert (b.id, b.schema.canonical()) == (a.id, a.schema.canonical())

    # Every mirrored record decodes through the new registry to what was sent.
    decoded = _decode_all(registries["new"], new, topic)
    assert sorted((k["id"], json.dumps(v, sort_keys=True)) for _p, _o, k, v in decoded) == \
        sorted((k["id"], json.dumps(v, sort_keys=True)) for k, v in sent)

    # The audit reads every record: the two broken ones are named with their place.
    audit = cutover("registry", "audit", "--plan", str(mirror_plan), "--all", "-o", "json")
    assert audit.code == 4, audit.err
    report = audit.json()
    assert report["records"] == len(sent) + 2
    ids = {old_reg.version(s, v).id for s in (f"{topic}-key", f"{topic}-value")  # type: ignore[union-attr]
           for v in old_reg.versions(s)}
    assert set(report["ids_checked"]) == ids | {999999}
    kinds = {(f["kind"], f["topic"], f["partition"]) for f in report["failures"]}
    assert kinds == {("unknown-id", topic, 0), ("not-framed", topic, 1)}

    # The shadow decodes with spark-avro: v1 rows read `currency` as its default, v3 rows `note` as null.
    # In batches of 4 records, so that later batches bring ids the run has not seen: such a batch is decoded
    # in two passes (the first reads its ids), the others in one with the ids seen so far.
    pairs = [{"topic": topic, "old": f"{ns}.old_orders", "new": f"{ns}.orders", "format": "avro",
              "key_format": "avro", "writer_offsets": "group", "writer_group": "x"}]
    splan = shadow_plan(mirror_plan, ns, tmp_path, pairs, max_records_per_batch=4)
    summary = shadow(splan, start="earliest")
    assert summary.tables[0].rows == len(sent) and summary.tables[0].dead_letters == 2
    assert summary.tables[0].batches >= 5 and 1 <= summary.tables[0].two_pass_batches < summary.tables[0].batches
    got = {r["id"]: r for r in rows(splan, f"{ns}.orders")}
    assert len(got) == len(sent)
    for key, value in sent:
        row = got[key["id"]]
        assert row["name"] == value["name"]
        assert row["currency"] == value.get("currency", "EUR")
        assert row["note"] == value.get("note")
        assert row["key"] == {"id": key["id"]}
    dead = rows(splan, f"{ns}.orders_dead_letter")
    reasons = sorted(d["error"] for d in dead)
    assert "999999" in reasons[0] and "does not know" in reasons[0]
    assert "not in the Confluent wire format" in reasons[1]


def test_a_different_schema_under_a_needed_id_on_the_target_is_refused_and_nothing_is_written(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path) -> None:
    plan = load_plan(sandbox.plan_file)
    topic = f"{ns}.pay"
    create_topic(plan.cluster("old"), topic)
    client = SchemaRegistryClient({"url": registries["old"]})
    first = client.register_schema(f"{topic}-value", Schema(json.dumps({**V1, "name": "Pay"}), "AVRO"))
    second = client.register_schema(f"{topic}-value", Schema(json.dumps({**V2, "name": "Pay"}), "AVRO"))
    new_reg = RegistryClient("new", {"url": registries["new"]})
    # The target already holds another schema under the second id (as a registry used before would).
    other = CutoverSchema(json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}))
    apicurio.import_versions(new_reg, [Version(f"{ns}-elsewhere", 1, second, other)], {})
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    run = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute")
    assert run.code == 3, run.err
    assert f"id {second}" in run.out and "different" in run.out
    assert new_reg.versions(f"{topic}-value") == []  # nothing written, not even the first version
    dry = cutover("promote", "--plan", str(_switch_plan(sandbox, ns, tmp_path).file), "--dry-run", "-o", "json")
    assert dry.code == 3, dry.err
    check = {c["name"]: c for c in dry.json()["checks"]}["registry-ids-match"]
    assert not check["passed"] and f"id {second}" in check["reason"]
    assert new_reg.schema(first) is None or new_reg.schema(first).canonical() != \
        RegistryClient("old", {"url": registries["old"]}).schema(first).canonical()  # type: ignore[union-attr]


@pytest.mark.parametrize("case", ["refused", "silent", "not-a-registry", "denied"])
def test_a_registry_that_cannot_be_used_is_named_with_its_url_and_a_fix(
        case: str, sandbox: Sandbox, tmp_path: Path, closed_port: int, silent_port: int, http_port: int,
        denying_port: int) -> None:
    port = {"refused": closed_port, "silent": silent_port, "not-a-registry": http_port, "denied": denying_port}[case]
    plan = derive(sandbox.plan_file, tmp_path / "plan.yaml", registry={
        "old": {"url": f"http://someone:s3cr3t-pw@127.0.0.1:{port}", "basic.auth.user.info": "u:hunter22"},
        "new": {"url": "http://127.0.0.1:1"}}).file
    run = cutover("registry", "sync", "--plan", str(plan), "--dry-run", "--timeout", "3", timeout=60)
    expected = {"refused": 5, "silent": 5, "not-a-registry": 2, "denied": 6}[case]
    assert run.code == expected, run.err
    assert f"old schema registry (http://127.0.0.1:{port})" in run.err
    assert "fix:" in run.err and "Traceback" not in run.err
    assert "s3cr3t-pw" not in run.err + run.out and "hunter22" not in run.err + run.out


@pytest.fixture
def denying_port() -> Any:
    """A loopback HTTP server that answers every request 401 with a JSON error, as a registry with
    authentication does to a wrong password."""
    with answering(401, "application/json", b'{"error_code":401,"message":"Unauthorized"}') as port:
        yield port


PROTO = """syntax = "proto3";
package shop;

message Payment {
  int64 id = 1;
  string method = 2;
  repeated string tags = 3;
  Amount amount = 4;
  Status status = 5;
  message Amount { double value = 1; string currency = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
"""
JSON_SCHEMA = {"type": "object", "title": "Refund", "properties": {
    "id": {"type": "integer"}, "reason": {"type": "string"}, "amount": {"type": "number"},
    "final": {"type": "boolean"}}, "required": ["id"]}


def _payment_class() -> Any:
    """The Payment message class, compiled from PROTO with the protoc cutover uses."""
    from google.protobuf import message_factory

    from cutover.shadow import protobuf

    return message_factory.GetMessageClass(protobuf.message_descriptor(protobuf.descriptor_set(PROTO), (0,)))


def test_protobuf_and_json_schema_topics_through_mirror_sync_audit_and_shadow(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path, spark: Any) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    from cutover.registry import wire

    plan = load_plan(sandbox.plan_file)
    old = plan.cluster("old")
    client = SchemaRegistryClient({"url": registries["old"]})
    pay, refund = f"{ns}.payments", f"{ns}.refunds"
    for t in (pay, refund):
        create_topic(old, t, partitions=2)
    # Protobuf, framed as Confluent's serializer frames it: the id, message indexes [0], the body.
    proto_id = client.register_schema(f"{pay}-value", Schema(PROTO, "PROTOBUF"))
    cls = _payment_class()
    payments = []
    for i in range(8):
        msg = cls(id=i, method=f"card-{i}", tags=[f"t{i}", "x"], status=i % 2)
        if i % 3:
            msg.amount.value, msg.amount.currency = i * 1.5, "EUR"
        payments.append(msg)
    produce(old, pay, [{"value": b"\x00" + proto_id.to_bytes(4, "big") + wire.zigzag([0]) + m.SerializeToString(),
                        "partition": i % 2} for i, m in enumerate(payments)])
    ser = JSONSerializer(json.dumps(JSON_SCHEMA), client, conf={"auto.register.schemas": True})
    refunds = [{"id": i, "reason": f"r{i}", "amount": i / 4, "final": bool(i % 2)} for i in range(5)]
    produce(old, refund, [{"value": ser(r, SerializationContext(refund, MessageField.VALUE)), "partition": i % 2}
                          for i, r in enumerate(refunds)])

    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    _mirror(mirror_plan)
    done = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "-o", "json")
    assert done.code == 0, done.err
    assert done.json()["copied"] == 2
    audit = cutover("registry", "audit", "--plan", str(mirror_plan), "-o", "json")
    assert audit.code == 0, audit.err
    assert audit.json()["records"] == 13 and len(audit.json()["ids_checked"]) == 2

    pairs = [{"topic": pay, "old": f"{ns}.old_pay", "new": f"{ns}.pay", "format": "protobuf",
              "writer_offsets": "group", "writer_group": "x"},
             {"topic": refund, "old": f"{ns}.old_refund", "new": f"{ns}.refund", "format": "json-schema",
              "writer_offsets": "group", "writer_group": "x"}]
    splan = shadow_plan(mirror_plan, ns, tmp_path, pairs)
    summary = shadow(splan, start="earliest")
    assert [(t.rows, t.dead_letters) for t in summary.tables] == [(8, 0), (5, 0)]
    got = {r["id"]: r for r in rows(splan, f"{ns}.pay")}
    for m in payments:
        row = got[m.id]
        assert (row["method"], row["tags"], row["status"]) == (m.method, list(m.tags), ["NEW", "PAID"][m.status])
        assert row["amount"] == ({"value": m.amount.value, "currency": "EUR"} if m.HasField("amount") else None)
    got_refunds = {r["id"]: {k: r[k] for k in ("id", "reason", "amount", "final")} for r in rows(splan, f"{ns}.refund")}
    assert got_refunds == {r["id"]: r for r in refunds}


def _switch_plan(sandbox: Sandbox, ns: str, tmp: Path) -> Plan:
    return derive(sandbox.plan_file, tmp / f"{ns}-switch.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  mirror={"group_sync_interval": "1s"}, gates={"quiet_period": "1s"},
                  switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s"},
                  routing={"file": str(tmp / "routing.json")}, tables=[])


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_promote_moves_the_registry_and_rollback_brings_back_what_new_producers_registered(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path) -> None:
    from cutover.switch import background

    plan = _switch_plan(sandbox, ns, tmp_path)
    old, new = plan.cluster("old"), plan.cluster("new")
    topic = f"{ns}.orders"
    create_topic(old, topic, partitions=2)
    sent = _produce_avro(registries["old"], old, topic)
    _mirror(plan.file)
    dry = cutover("promote", "--plan", str(plan.file), "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err
    explained = dry.json()
    names = [s["name"] for s in explained["steps"]]
    assert names.index("sync-registry") < names.index("freeze-producers")
    assert names.index("check-drained") < names.index("open-registry") < names.index("switch-clients")
    assert {c["name"]: c["passed"] for c in explained["checks"]}["registry-ids-match"] is True
    assert "4 version(s) to copy now" in json.dumps(explained)
    try:
        promoted = cutover("promote", "--plan", str(plan.file), "--execute", "-o", "json")
        assert promoted.code == 0, promoted.err
        # Producers now on the new cluster register a fourth version on the new registry.
        # its own content (a doc naming the test): the registries dedupe identical schemas under one id
        v4 = {**V3, "doc": ns, "fields": [*V3["fields"], {"name": "channel", "type": "string", "default": "web"}]}
        client = SchemaRegistryClient({"url": registries["new"]})
        ser = AvroSerializer(client, json.dumps(v4), conf={"auto.register.schemas": True})
        key_ser = AvroSerializer(client, json.dumps(KEY), conf={"auto.register.schemas": True})
        after = [({"id": 900 + i}, {"id": 900 + i, "name": f"late-{i}", "currency": "NOK", "channel": "app"})
                 for i in range(4)]
        produce(new, topic, [{"key": key_ser(k, SerializationContext(topic, MessageField.KEY)),
                              "value": ser(v, SerializationContext(topic, MessageField.VALUE)), "partition": i % 2}
                             for i, (k, v) in enumerate(after)])
        new_id = client.get_latest_version(f"{topic}-value").schema_id
        old_reg = RegistryClient("old", {"url": registries["old"]})
        assert old_reg.schema(new_id) is None or old_reg.schema(new_id).canonical() != \
            RegistryClient("new", {"url": registries["new"]}).schema(new_id).canonical()  # type: ignore[union-attr]
        wait_for(lambda: len(read_all(old, topic, 2)) == len(sent) + len(after), 60,
                 "the reverse mirror to carry the new writes back")
        rolled = cutover("rollback", "--plan", str(plan.file), "--execute", "-o", "json")
        assert rolled.code == 0, rolled.err
    finally:
        background.stop(plan)
    # The fourth version is on the old registry under the id the new one gave it, and every record on the
    # old cluster (those it always had, and those written on the new one) decodes through the old registry.
    back = old_reg.schema(new_id)
    assert back is not None and back.canonical() == \
        RegistryClient("new", {"url": registries["new"]}).schema(new_id).canonical()  # type: ignore[union-attr]
    decoded = _decode_all(registries["old"], old, topic)
    assert sorted(json.dumps(v, sort_keys=True) for *_r, v in decoded) == sorted(
        json.dumps(v, sort_keys=True) for _k, v in sent + after)


def test_a_running_mirror_follows_new_registrations_and_plan_check_reports_the_registries(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path) -> None:
    from tests.integration.mirror_util import start_mirror, stop

    plan = load_plan(sandbox.plan_file)
    topic = f"{ns}.events"
    create_topic(plan.cluster("old"), topic)
    mirror_plan = derive(scoped_plan(sandbox.plan_file, ns, tmp_path), tmp_path / f"{ns}-follow.yaml", merge=True,
                         registry={"sync_interval": "1s"})
    check = cutover("plan", "check", "--plan", str(mirror_plan.file), "-o", "json")
    report = check.json()
    assert report["registry"]["old"]["reachable"] and report["registry"]["new"]["reachable"], check.out
    assert report["registry"]["new"]["ids_kept_by"] == "apicurio-import" and report["registry"]["new"]["admin"]
    old_client = SchemaRegistryClient({"url": registries["old"]})
    new_reg = RegistryClient("new", {"url": registries["new"]})
    proc = start_mirror(mirror_plan.file)
    try:
        first = old_client.register_schema(f"{topic}-value", Schema(json.dumps({**V1, "name": "Event"}), "AVRO"))
        wait_for(lambda: new_reg.versions(f"{topic}-value") == [1], 60, "the mirror to copy version 1")
        second = old_client.register_schema(f"{topic}-value", Schema(json.dumps({**V2, "name": "Event"}), "AVRO"))
        wait_for(lambda: new_reg.versions(f"{topic}-value") == [1, 2], 60, "the mirror to copy version 2")
    finally:
        code, _out, err = stop(proc)
    assert code == 0, err
    assert [new_reg.version(f"{topic}-value", v).id for v in (1, 2)] == [first, second]  # type: ignore[union-attr]


def test_the_sandbox_registries_keep_their_schemas_across_stop_and_start(
        sandbox: Sandbox, registries: dict[str, str], ns: str) -> None:
    status = cutover("local", "status", "--dir", str(sandbox.dir), "-o", "json").json()
    assert {s: r["url"] for s, r in status["registry"].items()} == registries
    assert all(r["running"] and r["url"].startswith("http://127.0.0.1:") for r in status["registry"].values())
    client = SchemaRegistryClient({"url": registries["old"]})
    sid = client.register_schema(f"{ns}-kept-value", Schema(json.dumps({**V1, "name": "Kept"}), "AVRO"))
    stopped = cutover("local", "stop", "registry", "--dir", str(sandbox.dir), "--kill")
    assert stopped.code == 0, stopped.err
    down = RegistryClient("old", {"url": registries["old"]}, timeout=2)
    with pytest.raises(Exception, match="did not answer"):
        down.subjects()
    started = cutover("local", "start", "registry", "--dir", str(sandbox.dir), "-o", "json")
    assert started.code == 0, started.err
    assert {s: r["url"] for s, r in started.json().items()} == registries  # the same ports
    assert RegistryClient("old", {"url": registries["old"]}).version(f"{ns}-kept-value", 1).id == sid  # type: ignore[union-attr]


def test_the_audit_ends_at_a_range_closed_by_an_aborted_transaction_with_another_open(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path) -> None:
    """read_committed never delivers an aborted record or a marker, and an open transaction beyond them holds
    back the end-of-partition event: the audit must see from the consumer's position that it is done."""
    from confluent_kafka import Producer

    plan = load_plan(sandbox.plan_file)
    new = plan.cluster("new")
    topic = f"{ns}.tx"
    create_topic(plan.cluster("old"), topic)
    create_topic(new, topic)
    sid = SchemaRegistryClient({"url": registries["old"]}).register_schema(
        f"{topic}-value", Schema(json.dumps({**V1, "name": "Tx"}), "AVRO"))
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("registry", "sync", "--plan", str(mirror_plan), "--execute").code == 0
    framed = b"\x00" + sid.to_bytes(4, "big") + b"\x02\x02a\x00"
    produce(new, topic, [{"value": framed} for _ in range(5)])
    aborted = Producer({**new, "transactional.id": f"{ns}-a"})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(topic, b"not framed, never committed")
    aborted.flush(30)
    aborted.abort_transaction(30)
    still_open = Producer({**new, "transactional.id": f"{ns}-b", "transaction.timeout.ms": 600_000})
    still_open.init_transactions(30)
    still_open.begin_transaction()
    still_open.produce(topic, b"open")
    still_open.flush(30)
    try:
        run = cutover("registry", "audit", "--plan", str(mirror_plan), "--all", "-o", "json", "--timeout", "20")
        assert run.code == 0, run.err
        assert (run.json()["records"], run.json()["ids_checked"]) == (5, [sid])
    finally:
        still_open.abort_transaction(30)


def test_the_sampling_audit_reads_every_window_of_a_long_partition(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path) -> None:
    """A sample reads ten windows spread over each partition's retained range, one after another."""
    from cutover.registry import audit

    plan = load_plan(sandbox.plan_file)
    topic = f"{ns}.long"
    for side in ("old", "new"):
        create_topic(plan.cluster(side), topic)
    sid = SchemaRegistryClient({"url": registries["old"]}).register_schema(
        f"{topic}-value", Schema(json.dumps({**V1, "name": "Long"}), "AVRO"))
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("registry", "sync", "--plan", str(mirror_plan), "--execute").code == 0
    produce(plan.cluster("new"), topic, [{"value": b"\x00" + sid.to_bytes(4, "big") + b"%d" % i}
                                         for i in range(audit.SAMPLE_PER_PARTITION * 2)])
    run = cutover("registry", "audit", "--plan", str(mirror_plan), "-o", "json", "--timeout", "20")
    assert run.code == 0, run.err
    assert (run.json()["records"], run.json()["mode"]) == (audit.SAMPLE_PER_PARTITION, "sample")


def test_a_sync_cut_short_by_the_registry_dying_finishes_exactly_when_run_again(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path) -> None:
    """The target registry SIGKILLed: the sync fails, named (exit 5). A sync that had written part of its
    versions (here: the first two, as a kill between two writes leaves it) finishes with the rest on the
    re-run, each under its id, and a third run has nothing to do."""
    plan = load_plan(sandbox.plan_file)
    topic = f"{ns}.cut"
    create_topic(plan.cluster("old"), topic)
    client = SchemaRegistryClient({"url": registries["old"]})
    for i, schema in enumerate((V1, V2, V3, {**V3, "fields": [*V3["fields"], {"name": "x", "type": "int",
                                                                                "default": 0}]})):
        client.register_schema(f"{topic}-value", Schema(json.dumps({**schema, "name": f"Cut{i // 10}"}), "AVRO"))
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    old_reg = RegistryClient("old", {"url": registries["old"]})
    new_reg = RegistryClient("new", {"url": registries["new"]})
    versions = [old_reg.version(f"{topic}-value", v) for v in old_reg.versions(f"{topic}-value")]
    assert len(versions) == 4
    assert cutover("local", "stop", "registry", "--cluster", "new", "--kill", "--dir", str(sandbox.dir)).code == 0
    assert RegistryClient("old", {"url": registries["old"]}).subjects()  # the other one still answers
    try:
        dead = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "--timeout", "3")
        assert dead.code == 5 and "the new schema registry (http://127.0.0.1:" in dead.err, dead.err
        assert "did not answer" in dead.err and new_reg.base in dead.err
    finally:
        assert cutover("local", "start", "registry", "--dir", str(sandbox.dir)).code == 0
    apicurio.import_versions(new_reg, [v for v in versions[:2] if v is not None], {})  # what a cut-short run wrote
    rerun = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "-o", "json")
    assert rerun.code == 0, rerun.err
    assert (rerun.json()["copied"], rerun.json()["present"]) == (2, 2)
    assert [new_reg.version(f"{topic}-value", v.version).id for v in versions if v] == [v.id for v in versions if v]
    third = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "-o", "json")
    assert third.code == 0 and (third.json()["copied"], third.json()["present"]) == (0, 4)


def test_a_schema_that_references_another_subject_moves_with_it_and_decodes(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path, spark: Any) -> None:
    from confluent_kafka.schema_registry import SchemaReference

    plan = load_plan(sandbox.plan_file)
    old = plan.cluster("old")
    topic = f"{ns}.people"
    create_topic(old, topic)
    client = SchemaRegistryClient({"url": registries["old"]})
    address = {"type": "record", "name": "Address", "namespace": f"{ns}.shop",
               "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}
    person = {"type": "record", "name": "Person", "namespace": f"{ns}.shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "home", "type": f"{ns}.shop.Address"}]}
    # The referenced subject is not a topic's: the sync takes it because Person's version references it.
    client.register_schema(f"{ns}-address", Schema(json.dumps(address), "AVRO"))
    ser = AvroSerializer(client, Schema(json.dumps(person), "AVRO", [SchemaReference(
        f"{ns}.shop.Address", f"{ns}-address", 1)]), conf={"auto.register.schemas": True})
    people = [{"id": i, "home": {"city": f"city-{i}", "zip": f"{1000 + i}"}} for i in range(6)]
    produce(old, topic, [{"value": ser(p, SerializationContext(topic, MessageField.VALUE))} for p in people])
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    _mirror(mirror_plan)
    done = cutover("registry", "sync", "--plan", str(mirror_plan), "--execute", "-o", "json")
    assert done.code == 0, done.err
    moved = [(v["subject"], v["action"]) for v in done.json()["versions"]]
    assert moved == [(f"{ns}-address", "copy"), (f"{topic}-value", "copy")]  # the reference first
    audit = cutover("registry", "audit", "--plan", str(mirror_plan), "--all", "-o", "json")
    assert audit.code == 0 and audit.json()["records"] == 6, audit.err
    pairs = [{"topic": topic, "old": f"{ns}.old_people", "new": f"{ns}.people", "format": "avro",
              "writer_offsets": "group", "writer_group": "x"}]
    summary = shadow(shadow_plan(mirror_plan, ns, tmp_path, pairs), start="earliest")
    assert (summary.tables[0].rows, summary.tables[0].dead_letters) == (6, 0)
    got = sorted(({"id": r["id"], "home": r["home"]} for r in rows(load_plan(tmp_path / f"{ns}.yaml"),
                                                                 f"{ns}.people")), key=lambda r: r["id"])
    assert got == people


def test_the_registries_listen_on_loopback_only(sandbox: Sandbox, registries: dict[str, str]) -> None:
    assert exposed(serving(sandbox.dir, "registries.old", "registries.new")) == {}
