"""The old pipeline on Avro: Apache Iceberg's Kafka Connect sink reading Confluent's Avro wire format
through Apicurio Registry's AvroConverter (Maven Central jars, jvm.APICURIO_CONNECT), the writer
schema of each record fetched by its id from the sandbox's old registry (Apicurio 2.4.2).

Records are produced with confluent-kafka's own AvroSerializer against the registry's Confluent API,
in three schema versions (v2 adds a field with a default, v3 removes an optional field); the sink
writes them into one Iceberg table, evolved as the versions come, and every row is compared field by
field with what was sent.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from cutover.kafka.connect import Connect
from cutover.lake import catalog as catalog_mod
from cutover.local.connect import AVRO_CONVERTER, apicurio_api, sink_config
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.test_connect_sink import _rows

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
# v2 adds a field with a default; v3 removes the optional field `note`
V2 = {**V1, "fields": [*V1["fields"], {"name": "currency", "type": "string", "default": "EUR"}]}
V3 = {**V1, "fields": [f for f in V2["fields"] if f["name"] != "note"]}
PER_VERSION = 6


@pytest.fixture(scope="module")
def old_registry(sandbox: Sandbox) -> Iterator[str]:
    """The sandbox with its registries up: the old one's Confluent API URL. The session's other modules
    get the sandbox back without them if it had none (as test_registry's fixture does)."""
    had = "registry" in sandbox.status()
    yield str(sandbox.up(registry=True)["registry"]["old"]["url"])
    if not had:
        sandbox.remove_registries()


@pytest.fixture(scope="module")
def worker(sandbox: Sandbox) -> Iterator[Connect]:
    """The sandbox's Connect worker on the old cluster; the connectors the tests made are deleted
    after, and the worker is stopped again if it was not running before."""
    before = sandbox.status().get("connect") or {}
    rest = Connect(sandbox.start_connect("old")["url"])
    existing = set(rest.connectors())
    yield rest
    for name in set(rest.connectors()) - existing:
        rest.delete(name)
    if not before.get("running"):
        sandbox.stop_connect()
    elif before.get("cluster") != "old":
        sandbox.start_connect(before["cluster"])


def _produce(url: str, props: dict[str, str], topic: str) -> list[tuple[int, dict[str, Any]]]:
    """PER_VERSION records of each schema version, spread over two partitions, values in Confluent's
    wire format; (schema version, value) as sent, in send order."""
    client = SchemaRegistryClient({"url": url})
    sent: list[tuple[int, dict[str, Any]]] = []
    records = []
    for version, schema in enumerate((V1, V2, V3), 1):
        ser = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True})
        for i in range(PER_VERSION):
            n = version * 100 + i
            value: dict[str, Any] = {"id": n, "name": f"order-{n}"}
            if version < 3:
                value["note"] = None if i % 2 else f"note-{n}"
            if version >= 2:
                value["currency"] = "USD" if i % 3 == 0 else "SEK"
            records.append({"key": str(n).encode(), "partition": n % 2,
                            "value": ser(value, SerializationContext(topic, MessageField.VALUE))})
            sent.append((version, value))
    produce(props, topic, records)
    return sent


def _meta(url: str, subject: str, version: int) -> dict[str, Any]:
    """A subject version's metadata in Apicurio's own API: its global id and its content id."""
    path = f"{apicurio_api(url)}/groups/default/artifacts/{subject}/versions/{version}/meta"
    with urllib.request.urlopen(path, timeout=30) as answer:
        return dict(json.loads(answer.read()))


def test_the_iceberg_sink_writes_confluent_avro_of_three_schema_versions_through_apicurios_converter(
        old_registry: str, worker: Connect, plan: Plan, ns: str) -> None:
    old = plan.cluster("old")
    topic, control, table, name = f"{ns}.orders", f"{ns}.control", f"{ns}.orders_avro", f"{ns}-avro-sink"
    subject = f"{topic}-value"
    # The first schema under another subject first: its content id is then shared, and the global ids
    # of this topic's versions differ from their content ids, which are what the Confluent API serves
    # and the records carry (a converter looking global ids up would read the wrong schemas, or none).
    SchemaRegistryClient({"url": old_registry}).register_schema(f"{ns}.other-value", Schema(json.dumps(V1), "AVRO"))
    create_topic(old, topic, 2)
    create_topic(old, control, 1)  # the sink does not create its control topic
    sent = _produce(old_registry, old, topic)
    framed = {int.from_bytes((r.value or b"")[1:5], "big") for r in read_all(old, topic, 2)}
    metas = [_meta(old_registry, subject, v) for v in (1, 2, 3)]
    assert framed == {m["contentId"] for m in metas}, "the records carry the versions' content ids"
    assert all(m["globalId"] != m["contentId"] for m in metas)

    assert plan.spec.catalog is not None
    config = sink_config(plan.spec.catalog, [topic], table, control_topic=control, commit_interval_ms=1000,
                         avro_registry=old_registry)
    assert config["value.converter"] == AVRO_CONVERTER
    assert config["value.converter.apicurio.registry.url"] == old_registry.replace("/apis/ccompat/v7",
                                                                                   "/apis/registry/v2")
    started = time.monotonic()
    worker.put(name, config)
    worker.wait(name, "RUNNING", 120)
    total = 3 * PER_VERSION
    got = wait_for(lambda: (r := _rows(plan, table)) and len(r) >= total and r, 180,
                   f"the sink to commit {total} Avro rows")
    print(f"\n{total} rows committed {time.monotonic() - started:.1f}s after the connector was created")

    # one table, evolved: created from v1 (its non-null fields required columns), v2's field added as an
    # optional column (a column added to a table with rows cannot be required), v3's removed field kept
    iceberg = catalog_mod.load(plan.spec.catalog).load_table(table).schema()
    columns = {f.name: (str(f.field_type), f.required) for f in iceberg.fields}
    assert [c for c in columns if not c.startswith("_kafka_metadata_")] == ["id", "name", "note", "currency"]
    assert {c: columns[c] for c in ("id", "name", "note", "currency")} == {
        "id": ("long", True), "name": ("string", True), "note": ("string", False), "currency": ("string", False)}

    # every record once, field by field, at its partition and offset
    assert len(got) == total
    by_id = {value["id"]: (version, value) for version, value in sent}
    offsets = {(r.partition, r.offset): r for r in read_all(old, topic, 2)}
    for row in got:
        version, value = by_id[row["id"]]
        record = offsets[(row["_kafka_metadata_partition"], row["_kafka_metadata_offset"])]
        assert record.key == str(row["id"]).encode() and row["_kafka_metadata_topic"] == topic
        assert row["name"] == value["name"]
        # v1 records have no currency: null, not v2's default "EUR" (the converter reads each record with
        # its own writer schema, which has no such field); v3 records have no note: null
        assert row["currency"] == (None if version == 1 else value["currency"])
        assert row["note"] == (None if version == 3 else value["note"])
    assert sorted(r["id"] for r in got) == sorted(by_id)
    assert sum(1 for r in got if r["currency"] is None) == PER_VERSION
    assert sum(1 for r in got if r["note"] is None) == PER_VERSION + 2 * (PER_VERSION // 2)  # v3's, and v1/v2's nulls

    assert worker.delete(name)
