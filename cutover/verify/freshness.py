"""How fresh each table of a pair is: the delay from a record's Kafka timestamp to the commit that made
its row visible (the Iceberg snapshot that added the row's data file), p50 and p95, in milliseconds.

A reader of the table sees a row once that commit is done: this is the delay a query feels, the
write path's own (batching, commit interval) plus the traffic's (a producer's clock). Both tables of a
pair are measured on the same rows' timestamps, so their difference is the paths'. A table whose
record timestamps are not kept (an old table without old_offset_columns.timestamp) is not measured,
and said so. Measured on the files as their snapshots added them: after a compaction rewrote files,
their rows count from the rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class Freshness:
    rows: int
    p50_ms: float | None
    p95_ms: float | None
    #: Why it was not measured (None when it was).
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "note": self.note}


def measure(spark: SparkSession, qualified: str, raw: DataFrame, record_time: Column | None,
            missing: str = "") -> Freshness:
    """p50/p95 of (commit time - record time) over `raw` (the table as read: its rows' `_file`), with
    `record_time` the record's Kafka timestamp there (None: not kept; `missing` says why)."""
    from pyspark.sql import functions as F

    if record_time is None:
        return Freshness(0, None, None, missing)
    files = (spark.table(f"{qualified}.entries").where(F.col("status") != 2)
             .select(F.col("data_file.file_path").alias("_f"), F.col("snapshot_id").alias("_s")).distinct())
    snaps = spark.table(f"{qualified}.snapshots").select(F.col("snapshot_id").alias("_s"),
                                                        F.col("committed_at").alias("_at"))
    rows = raw.select(F.col("_file").alias("_f"), record_time.alias("_ts"))
    delay = (F.unix_millis(F.col("_at")) - F.unix_millis(F.col("_ts"))).cast("double")
    got = (rows.join(files, "_f").join(snaps, "_s").where(F.col("_ts").isNotNull())
           .agg(F.count(F.lit(1)).alias("n"), F.percentile_approx(delay, [0.5, 0.95], 10_000).alias("q"))
           .collect()[0])
    if not got["n"]:
        return Freshness(0, None, None, "no row with a record timestamp")
    p50, p95 = got["q"]
    return Freshness(int(got["n"]), float(p50), float(p95))
