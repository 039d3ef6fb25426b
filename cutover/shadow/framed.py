"""Decoders of the schema-registry formats (Confluent wire format): Avro, JSON Schema, Protobuf.

Each batch's schema ids are read on the driver (one small aggregation), the writer schemas of
ids not seen before are fetched from the registry once, and the records are decoded on the
executors:

- Avro with spark-avro's `from_avro`, one branch per writer schema, each read with the same
  reader schema (the table's: every field any version of the subject declares, each field a
  later version dropped made optional), so Avro's own resolution fills defaults and evolution.
- JSON Schema: the body is a JSON document; the columns come from the schema's properties.
- Protobuf: the body (after the message indexes) is parsed on the executors with the PyPI
  protobuf runtime from the writer schema's descriptor, compiled once on the driver.

A record that is not framed, carries an id the registry does not know, or has a body that
does not decode gets the reason in `_cutover_error` and goes to the dead-letter table.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutover.errors import Refused
from cutover.plan import ClusterSide, Plan, TablePair
from cutover.registry.client import RegistryClient, Schema
from cutover.shadow.decode import ERROR, NEW_SCHEMA_ID, UNKNOWN, Payload, meta_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("cutover.shadow")
KEY_COLUMN = "key"


def _framed(col: str) -> Column:
    from pyspark.sql import functions as F

    return (F.length(col) >= 5) & (F.hex(F.substring(col, 1, 1)) == "00")


def _schema_id(col: str) -> Column:
    from pyspark.sql import functions as F

    return F.conv(F.hex(F.substring(col, 2, 4)), 16, 10).cast("long")


def _body(col: str) -> Column:
    from pyspark.sql import functions as F

    return F.expr(f"substring(`{col}`, 6)")


# -- Avro: the reader schema ------------------------------------------------------------------------------


def _nullable(field_def: dict[str, Any], fill: str = "default") -> dict[str, Any]:
    """A field a reader can fill when a writer lacks it: its own default (else null), or null."""
    if "default" in field_def and fill == "default":
        return field_def
    out = dict(field_def)
    kind = out["type"]
    if isinstance(kind, list):
        out["type"] = ["null", *[k for k in kind if k != "null"]]
    else:
        out["type"] = ["null", kind]
    out["default"] = None
    return out


def reader_schema(writers: list[dict[str, Any]], fill: str = "default") -> dict[str, Any]:
    """One record schema that reads every writer schema given (oldest first): each field from the newest
    writer that has it, a field missing from any writer made optional (its default, else null; or null
    whatever its default, with `fill` "null")."""
    if not writers:
        raise ValueError("no writer schema")
    newest = copy.deepcopy(writers[-1])
    if newest.get("type") != "record":
        return newest
    order: list[str] = []
    latest: dict[str, dict[str, Any]] = {}
    count: dict[str, int] = {}
    for w in writers:
        for f in w.get("fields", []):
            if f["name"] not in latest:
                order.append(f["name"])
            latest[f["name"]] = f
            count[f["name"]] = count.get(f["name"], 0) + 1
    newest["fields"] = [latest[n] if count[n] == len(writers) else _nullable(latest[n], fill) for n in order]
    return newest


def inline_references(text: str, refs: dict[str, Any]) -> dict[str, Any]:
    """An Avro schema whose references (named types of other subjects) are defined in place, once each, so
    that a single schema text holds everything `from_avro` needs."""
    done: set[str] = set()

    def walk(node: Any, namespace: str | None) -> Any:
        if isinstance(node, str):
            full = node if "." in node or not namespace else f"{namespace}.{node}"
            for name in (node, full):
                if name in refs and name not in done:
                    done.add(name)
                    return walk(copy.deepcopy(refs[name]), namespace)
            return node
        if isinstance(node, list):
            return [walk(n, namespace) for n in node]
        if isinstance(node, dict):
            ns = node.get("namespace", namespace)
            if node.get("type") in ("record", "enum", "fixed") and "name" in node:
                name = node["name"] if "." in node["name"] or not ns else f"{ns}.{node['name']}"
                done.add(name)
                done.add(node["name"])
            out = dict(node)
            if "fields" in out:
                out["fields"] = [{**f, "type": walk(f["type"], ns)} for f in out["fields"]]
            for k in ("items", "values"):
                if k in out:
                    out[k] = walk(out[k], ns)
            if isinstance(out.get("type"), list | dict) or (isinstance(out.get("type"), str) and "fields" not in out
                                                             and out["type"] not in _PRIMITIVE_OR_COMPLEX):
                out["type"] = walk(out["type"], ns)
            return out
        return node

    return dict(walk(json.loads(text), None))


_PRIMITIVE_OR_COMPLEX = {"null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum",
                         "array", "map", "fixed"}


# -- the registry's schemas, fetched once on the driver ----------------------------------------------------


@dataclass
class Schemas:
    """Writer schemas by id, and a subject's versions, as the plan's registry holds them."""

    registry: RegistryClient
    by_id: dict[int, Schema | None] = field(default_factory=dict)

    def get(self, schema_id: int) -> Schema | None:
        if schema_id not in self.by_id:
            self.by_id[schema_id] = self.registry.schema(schema_id)
        return self.by_id[schema_id]

    def resolved(self, schema: Schema) -> str:
        """The schema text with its references defined in place (Avro)."""
        if not schema.references:
            return schema.text
        refs = {}
        for name, subject, version in schema.references:
            got = self.registry.version(subject, version, deleted=True)
            if got is None:
                raise Refused(f"schema reference {name} ({subject} version {version}) is not on "
                              f"{self.registry.describe()}", fix="run cutover registry sync --execute")
            refs[name] = inline_references(self.resolved(got.schema), {})
        return json.dumps(inline_references(schema.text, refs))

    def subject_history(self, subject: str) -> list[Schema]:
        """Every version of a subject, oldest first (none when the registry has no such subject)."""
        out = []
        for v in self.registry.versions(subject):
            got = self.registry.version(subject, v)
            if got is not None:
                self.by_id.setdefault(got.id, got.schema)
                out.append(got.schema)
        return out


# -- the decoders -------------------------------------------------------------------------------------------


@dataclass
class FramedPart:
    """One framed column (the value or the key) of a topic, in one registry format."""

    fmt: str
    subject: str
    schemas: Schemas
    #: reader schema (Avro): JSON text
    reader: str | None = None
    #: what a field a writer lacks reads as (tables[].missing_fields)
    fill: str = "default"
    ids: set[int] = field(default_factory=set)
    #: (reader schema, its Spark type)
    _typed: tuple[str, Any] | None = None

    def refresh(self, ids: list[int]) -> None:
        """Know the writer schemas of these ids; widen the reader schema to read them all."""
        fresh = [i for i in ids if i not in self.ids]
        if not fresh and self.reader is not None:
            return
        self.ids.update(fresh)
        if self.fmt == "avro":
            history = [json.loads(self.schemas.resolved(s)) for s in self.schemas.subject_history(self.subject)]
            seen = [json.loads(self.schemas.resolved(s)) for i in sorted(self.ids)
                    if (s := self.schemas.get(i)) is not None]
            writers = history + [w for w in seen if w not in history]
            if writers:
                self.reader = json.dumps(reader_schema(writers, self.fill))
        else:
            history = self.schemas.subject_history(self.subject)
            latest = history[-1] if history else next(
                (s for i in sorted(self.ids, reverse=True) if (s := self.schemas.get(i)) is not None), None)
            if latest is not None:
                self.reader = latest.text

    def spark_type(self, spark: SparkSession) -> Any:
        """The Spark type the reader schema decodes to (a struct), worked out once per reader schema (for
        Avro it asks Spark to plan a query: several times a batch otherwise)."""
        if self.reader is None:
            return None
        if self._typed is None or self._typed[0] != self.reader:
            self._typed = (self.reader, self._spark_type(spark, self.reader))
        return self._typed[1]

    def _spark_type(self, spark: SparkSession, reader: str) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        if self.fmt == "avro":
            return spark.range(0).select(from_avro(F.lit(b""), reader).alias("v")).schema["v"].dataType
        if self.fmt == "json-schema":
            return _json_schema_struct(json.loads(reader))
        from cutover.shadow import protobuf

        return protobuf.struct_of(reader)

    def decode(self, spark: SparkSession, col: str, ids: list[int]) -> tuple[Column, Column]:
        """(decoded struct, error) for the framed column `col`."""
        from pyspark.sql import functions as F

        sid = _schema_id(col)
        target = self.spark_type(spark)
        decoded: Any = F.lit(None).cast(target)
        known = [i for i in ids if self.schemas.get(i) is not None]
        if self.fmt == "avro":
            from pyspark.sql.avro.functions import from_avro

            branches: Any = None
            for i in known:
                schema = self.schemas.get(i)
                assert schema is not None and self.reader is not None
                if schema.type != "AVRO":
                    continue
                one = from_avro(_body(col), self.schemas.resolved(schema),
                                {"mode": "PERMISSIVE", "avroSchema": self.reader})
                branches = (F.when(sid == i, one) if branches is None else branches.when(sid == i, one))
            if branches is not None:
                decoded = branches
        elif self.fmt == "json-schema":
            decoded = F.from_json(_body(col).cast("string"), target, {"mode": "PERMISSIVE"})
        else:
            from cutover.shadow import protobuf

            decoded = protobuf.decode(col, {i: s.text for i in known if (s := self.schemas.get(i)) is not None},
                                      target)
        unknown = ~sid.isin(known) if known else F.lit(True)
        what = "key" if col == "key" else "value"
        error: Any = F.when(F.col(col).isNull(), F.lit(f"null {what} (a tombstone): there is no row to write"))
        error = error.when(~_framed(col), F.lit(f"{what} is not in the Confluent wire format (no 0x00 magic byte "
                                                "and 4-byte schema id)"))
        error = error.when(unknown, F.concat(F.lit(f"{what} has schema id "), sid.cast("string"),
                                             F.lit(f", which {self.schemas.registry.describe()} does not know")))
        error = error.when(decoded.isNull(), F.concat(F.lit(f"{what} does not decode as {self.fmt} with schema id "),
                                                      sid.cast("string")))
        return decoded, error


def _json_schema_struct(schema: dict[str, Any]) -> Any:
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        DataType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    def of(node: dict[str, Any]) -> DataType:
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if kind == "object" and "properties" in node:
            return StructType([StructField(k, of(v), True) for k, v in node["properties"].items()])
        if kind == "array":
            return ArrayType(of(node.get("items") or {}), True)
        return {"integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}.get(str(kind), StringType())

    out = of(schema)
    return out if isinstance(out, StructType) else StructType([StructField("value", out, True)])


@dataclass
class FramedDecoder:
    """The Decoder of a table pair in a registry format (value, and key when key_format says so)."""

    value: FramedPart
    key: FramedPart | None = None
    spark: SparkSession | None = None

    def payload(self, declared: Payload | None) -> Payload | None:
        return None  # from the registry: see registry_payload

    def registry_payload(self, spark: SparkSession) -> Payload:
        """The columns of a new table: the reader schema's fields (and the key's struct)."""
        self.spark = spark
        self.value.refresh([])
        if self.key is not None:
            self.key.refresh([])
        target = self.value.spark_type(spark)
        if target is None:
            raise Refused(f"subject {self.value.subject} is not on {self.value.schemas.registry.describe()}, so the "
                          "table's columns are unknown",
                          fix="run cutover registry sync --execute, or register the topic's schema")
        cols = [(f.name, f.dataType.simpleString(), True) for f in target.fields]
        if self.key is not None:
            key_type = self.key.spark_type(spark)
            if key_type is not None:
                cols.append((KEY_COLUMN, key_type.simpleString(), True))
        return Payload(tuple(cols))

    def column_types(self) -> dict[str, str]:
        """Spark types of every column the reader schemas give (for schema evolution)."""
        assert self.spark is not None
        out = {f.name: f.dataType.simpleString() for f in self.value.spark_type(self.spark).fields}
        if self.key is not None and (kt := self.key.spark_type(self.spark)) is not None:
            out[KEY_COLUMN] = kt.simpleString()
        return out

    def mark(self, records: DataFrame, payload: Payload, seen_only: bool = False) -> DataFrame:
        """The batch's schema ids are read first (a Spark job of their own) and their writer schemas fetched;
        `seen_only` skips that read for a part that has seen ids already: a record with another id is marked
        NEW_SCHEMA_ID in UNKNOWN, and the batch takes two passes."""
        from pyspark.sql import functions as F

        spark = records.sparkSession
        self.spark = spark
        parts = [("value", self.value)] + ([("key", self.key)] if self.key is not None else [])
        ids: dict[str, list[int]] = {}
        new_id: Any = None  # a framed record whose schema id this decode has no branch for
        for col, part in parts:
            if seen_only and part.ids:
                ids[col] = sorted(part.ids)
                fresh = _framed(col) & ~_schema_id(col).isin(ids[col])
                new_id = fresh if new_id is None else new_id | fresh
                continue
            found = [int(r[0]) for r in records.where(_framed(col)).select(_schema_id(col)).distinct().collect()]
            part.refresh(found)
            ids[col] = found
        value, value_error = self.value.decode(spark, "value", ids["value"])
        error: Any = value_error
        key = None
        if self.key is not None:
            key, key_error = self.key.decode(spark, "key", ids["key"])
            error = F.coalesce(value_error, key_error)
        if new_id is not None:  # not a bad record yet: the two passes decide
            error = F.when(new_id, F.lit(None).cast("string")).otherwise(error)
        have = {n.lower() for n in payload.names()}
        known = self.column_types()
        unknown = [n for n in known if n.lower() not in have]
        staged = records.select("*", value.alias("_v"), *([key.alias("_k")] if key is not None else []),
                                error.alias(ERROR))
        value_fields = set(self.value.spark_type(spark).fieldNames())
        cols = []
        for name, kind, _ in payload.columns:
            if name == KEY_COLUMN and self.key is not None:
                cols.append(F.col("_k").cast(kind).alias(name))
            elif name in value_fields:
                cols.append(F.col(f"_v.`{name}`").cast(kind).alias(name))
            else:
                cols.append(F.lit(None).cast(kind).alias(name))
        unknown_col = F.when(F.col(ERROR).isNull(), F.array(*[F.lit(n) for n in unknown])) if unknown else \
            F.array().cast("array<string>")
        if new_id is not None:
            unknown_col = F.when(new_id, F.array(F.lit(NEW_SCHEMA_ID))).otherwise(unknown_col)
        return staged.select(*cols, F.col("value"), *meta_columns(), F.col(ERROR), unknown_col.alias(UNKNOWN))


def decoder_for(plan: Plan, pair: TablePair, side: ClusterSide) -> FramedDecoder:
    """The decoder of a pair in a registry format, reading the registry of the cluster the shadow reads
    (after `registry sync`, ids mean the same on both)."""
    from cutover.registry.sync import clients

    old, new = clients(plan, 30.0)
    schemas = Schemas(new if side == "new" else old)
    value = FramedPart(pair.format, f"{pair.topic}-value", schemas, fill=pair.missing_fields)
    key = FramedPart(pair.key_format, f"{pair.topic}-key", schemas, fill=pair.missing_fields) \
        if pair.key_format != "raw" else None
    return FramedDecoder(value, key)
