"""Row shape: Kafka records in, table rows (or dead letters) out.

Every table row carries the record's Kafka metadata (`kafka_topic`, `kafka_partition`,
`kafka_offset`, `kafka_timestamp`, `kafka_key`, `kafka_headers`) beside the payload
columns the table pair's format decodes from the value. A decoder never drops a record:
it marks each one good or gives the reason it is not, in `_cutover_error`, and the job
sends the marked ones to the dead-letter table (or stops, as the plan says).

Formats are a registry (`DECODERS`): a schema-registry format (Avro, Protobuf) is one
more class with the same two methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cutover.lake.tables import META_NAMES

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

ERROR = "_cutover_error"
UNKNOWN = "_cutover_unknown_fields"
#: In UNKNOWN: the record has a schema id the decoder has not read yet (see Decoder.mark's `seen_only`).
NEW_SCHEMA_ID = "<a schema id new to this run>"


def meta_columns() -> list[Column]:
    from pyspark.sql import functions as F

    return [F.col("topic").alias("kafka_topic"), F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"), F.col("timestamp").alias("kafka_timestamp"),
            F.col("key").alias("kafka_key"), F.col("headers").alias("kafka_headers")]


def dead_letters(marked: DataFrame) -> DataFrame:
    """The dead-letter rows of marked records: raw key and value, metadata, the reason."""
    from pyspark.sql import functions as F

    return marked.where(F.col(ERROR).isNotNull()).select(
        *[F.col(n) for n in META_NAMES[:5]], F.col("value").alias("kafka_value"), F.col("kafka_headers"),
        F.col(ERROR).alias("error"), F.current_timestamp().alias("dead_lettered_at"))


@dataclass(frozen=True)
class Payload:
    """The payload columns of a table: name, Spark type, nullable."""

    columns: tuple[tuple[str, str, bool], ...]

    @classmethod
    def of_struct(cls, schema: StructType) -> Payload:
        return cls(tuple((f.name, f.dataType.simpleString(), f.nullable) for f in schema.fields
                         if f.name not in META_NAMES))

    def names(self) -> list[str]:
        return [n for n, _, _ in self.columns]

    def ddl(self, with_nullability: bool = True) -> str:
        return ", ".join(f"`{n}` {t}" + ("" if nullable or not with_nullability else " NOT NULL")
                         for n, t, nullable in self.columns)


class Decoder(Protocol):
    def payload(self, declared: Payload | None) -> Payload | None:
        """The payload columns of a new table; None when they must be inferred from the topic."""

    def mark(self, records: DataFrame, payload: Payload, seen_only: bool = False) -> DataFrame:
        """Kafka source rows -> payload columns + metadata + `value` + ERROR (+ UNKNOWN for drift).

        `seen_only` (one pass): a decoder that must learn something from the batch before it can decode it
        (a registry format's schema ids) decodes with what it has learnt so far, without reading the batch
        first, and puts NEW_SCHEMA_ID in UNKNOWN for a record it cannot decode yet: the batch then takes two
        passes, the first of which learns it."""


class RawDecoder:
    """The value as bytes: every record is good."""

    def payload(self, declared: Payload | None) -> Payload | None:
        return Payload((("value", "binary", True),))

    def mark(self, records: DataFrame, payload: Payload, seen_only: bool = False) -> DataFrame:
        from pyspark.sql import functions as F

        return records.select(F.col("value"), *meta_columns(), F.lit(None).cast("string").alias(ERROR))


class TextDecoder:
    """The value as a UTF-8 string: invalid UTF-8 is a bad record, never a mangled row."""

    def payload(self, declared: Payload | None) -> Payload | None:
        return Payload((("value", "string", True),))

    def mark(self, records: DataFrame, payload: Payload, seen_only: bool = False) -> DataFrame:
        from pyspark.sql import functions as F

        text = F.col("value").cast("string")
        error = F.when(F.col("value").isNotNull() & ~F.expr("is_valid_utf8(cast(value as string))"),
                       F.lit("value is not valid UTF-8"))
        # `value` keeps the raw bytes for the dead letter; the row gets the text.
        return records.select(F.col("value"), text.alias("_text"), *meta_columns(), error.alias(ERROR))


class JsonDecoder:
    """A JSON object per value, decoded against the table's payload columns.

    Bad: a null value (tombstone), a value that is not a JSON object of the declared
    types, a required field that is missing or null. Fields the table does not have yet
    are listed in UNKNOWN for the schema-drift policy.
    """

    def payload(self, declared: Payload | None) -> Payload | None:
        return declared

    def mark(self, records: DataFrame, payload: Payload, seen_only: bool = False) -> DataFrame:
        from pyspark.sql import functions as F

        text = F.col("value").cast("string")
        corrupt = "_cutover_corrupt"
        schema = f"{payload.ddl(with_nullability=False)}, `{corrupt}` string"
        parsed = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt})
        known = [n.lower() for n in payload.names()]
        keys = F.coalesce(F.json_object_keys(text), F.array().cast("array<string>"))
        # The exact names off first (compiled, no lambda a key); then, case-insensitively, on the few keys left.
        unknown = F.filter(F.array_except(keys, F.array(*[F.lit(n) for n in payload.names()])),
                           lambda k: ~F.lower(k).isin(known))
        error: Any = F.when(F.col("value").isNull(), F.lit("null value (a tombstone): there is no row to write"))
        error = error.when(F.col("_j").isNull() | F.col(f"_j.{corrupt}").isNotNull(),
                           F.lit(f"value is not a JSON object with fields of these types: {payload.ddl(False)}"))
        for name, _type, nullable in payload.columns:
            if not nullable:
                error = error.when(F.col(f"_j.`{name}`").isNull(), F.lit(f"required field {name} is missing or null"))
        staged = records.select("*", parsed.alias("_j"), unknown.alias(UNKNOWN)).withColumn(ERROR, error)
        # The raw value is kept only where it is still needed (a dead letter, or a record with new fields whose
        # types are inferred from it): a decoded good row does not carry its 1 KB twice through the cache.
        needed = F.col(ERROR).isNotNull() | (F.size(UNKNOWN) > 0)
        return staged.select(*[F.col(f"_j.`{n}`").alias(n) for n in payload.names()],
                             F.when(needed, F.col("value")).alias("value"), *meta_columns(), F.col(ERROR),
                             F.col(UNKNOWN))


DECODERS: dict[str, Decoder] = {"json": JsonDecoder(), "raw": RawDecoder(), "text": TextDecoder()}


def table_rows(marked: DataFrame, payload: Payload) -> DataFrame:
    """The good rows, in the table's column order (not those with a schema id new to the run: their columns are
    not decoded, and the batch takes two passes)."""
    from pyspark.sql import functions as F

    cols = [F.col("_text").alias("value") if n == "value" and "_text" in marked.columns else F.col(f"`{n}`")
            for n in payload.names()]
    good = F.col(ERROR).isNull()
    if UNKNOWN in marked.columns:
        good = good & ~F.array_contains(F.col(UNKNOWN), NEW_SCHEMA_ID)
    return marked.where(good).select(*cols, *[F.col(n) for n in META_NAMES])
