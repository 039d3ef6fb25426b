"""New tables a platform writes itself (plan `tables[].new_writer`), read as cutover's columns.

cutover shadow writes a pair's new table by default (`new_writer: shadow`). A Kafka-compatible
platform that writes its topics into Iceberg tables itself (Table Topic style) writes it instead,
and cutover does not run the shadow for that pair: verify reads the platform's table through its
writer's layout, as the payload's columns plus Kafka's metadata (`kafka_partition`,
`kafka_timestamp`). What a writer keeps decides what verify can prove:

- `tansu`: Tansu 0.6.0's Iceberg sink, for a topic with a JSON schema. Columns `meta` (partition,
  timestamp as RFC 3339 text to the millisecond, year, month, day), `key` (the record key,
  decoded as JSON) and `value` (the value decoded as JSON: a struct for an object). It keeps no
  offset and no header, and commits once per produced batch: verify compares rows by the plan's
  `key` columns (else by content) and each row's partition, never offsets (docs/guide/platforms.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Writer = Literal["shadow", "tansu"]
WRITERS: tuple[Writer, ...] = ("shadow", "tansu")
#: What each platform's table cannot say, for verify's report and the docs.
CANNOT_PROVE = {"tansu": "offsets (Tansu's table keeps none) and headers (not written)"}


def flatten(df: DataFrame, writer: str) -> DataFrame:
    """The platform's table as the old table's columns: its payload's fields, then kafka_partition and
    kafka_timestamp. A table cutover shadow wrote is already so."""
    if writer != "tansu":
        return df
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    names = df.schema.fieldNames()
    value = df.schema["value"].dataType if "value" in names else None
    payload = ([F.col(f"value.`{f.name}`").alias(f.name) for f in value.fields] if isinstance(value, StructType)
               else [F.col("value")] if value is not None else [])
    return df.select(*payload, F.col("meta.partition").cast("int").alias("kafka_partition"),
                     record_time(writer).alias("kafka_timestamp"))


def record_time(writer: str) -> Column:
    """The record's Kafka timestamp in a table of this writer, as a Spark timestamp."""
    from pyspark.sql import functions as F

    if writer == "tansu":
        return F.to_timestamp(F.col("meta.timestamp"))
    return F.col("kafka_timestamp")
