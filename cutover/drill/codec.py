"""How the drill's sample records are encoded: JSON, or Avro in the Confluent wire format through the
schema registry of the cluster written to (a table pair of the topic with `format: avro`).

The Avro side is confluent-kafka's own AvroSerializer and AvroDeserializer, as a real producer and
consumer use them: the producer registers its schema on the registry of the cluster it writes
(auto.register.schemas), the consumer fetches each writer schema by the record's id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from cutover.plan import ClusterSide, Plan

NAMESPACE = "cutover.drill"


def _schema(name: str, fields: list[tuple[str, str]], extra: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": NAMESPACE,
                       "fields": [{"name": n, "type": t} for n, t in fields] + (extra or [])})


ORDER_FIELDS = [("seq", "long"), ("order_id", "string"), ("customer", "string"), ("amount", "double"),
                ("currency", "string"), ("created_at", "long")]
PAYMENT_FIELDS = [("seq", "long"), ("payment_id", "string"), ("order_id", "string"), ("amount", "double"),
                  ("method", "string")]
#: Avro schemas by (kind, version): version 2 of the orders adds `channel`, with a default (a compatible change).
SCHEMAS = {("orders", 1): _schema("Order", ORDER_FIELDS),
           ("orders", 2): _schema("Order", ORDER_FIELDS, [{"name": "channel", "type": "string", "default": "web"}]),
           ("payments", 1): _schema("Payment", PAYMENT_FIELDS)}


class Codec(Protocol):
    def encode(self, topic: str, body: dict[str, Any]) -> bytes: ...
    def decode(self, topic: str, value: bytes | None) -> dict[str, Any]: ...


class JsonCodec:
    def encode(self, topic: str, body: dict[str, Any]) -> bytes:
        return json.dumps(body).encode()

    def decode(self, topic: str, value: bytes | None) -> dict[str, Any]:
        return dict(json.loads(value or b"{}"))


@dataclass
class AvroCodec:
    """Avro through the registry at `url` (the Confluent API), for the topics named in `topics`."""

    url: str
    topics: frozenset[str]
    _serializers: dict[str, Any] = field(default_factory=dict)
    _deserializer: Any = None
    _json: JsonCodec = field(default_factory=JsonCodec)

    def _client(self) -> Any:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.url})

    def encode(self, topic: str, body: dict[str, Any]) -> bytes:
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        if topic not in self.topics:
            return self._json.encode(topic, body)
        kind = "payments" if topic.endswith("payments") else "orders"
        schema = SCHEMAS[(kind, 2 if "channel" in body else 1)]
        ser = self._serializers.get(schema)
        if ser is None:
            ser = self._serializers[schema] = AvroSerializer(self._client(), schema,
                                                             conf={"auto.register.schemas": True})
        return bytes(ser(body, SerializationContext(topic, MessageField.VALUE)))

    def decode(self, topic: str, value: bytes | None) -> dict[str, Any]:
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        if topic not in self.topics:
            return self._json.decode(topic, value)
        if self._deserializer is None:
            self._deserializer = AvroDeserializer(self._client())
        return dict(self._deserializer(value, SerializationContext(topic, MessageField.VALUE)) or {})


def for_cluster(plan: Plan, side: ClusterSide) -> Codec:
    """The codec of the records on `side`: Avro through its registry for the topics of avro table pairs."""
    avro = frozenset(p.topic for p in plan.spec.tables if p.format == "avro")
    if not avro or plan.spec.registry is None:
        return JsonCodec()
    return AvroCodec(getattr(plan.spec.registry, side)["url"], avro)
