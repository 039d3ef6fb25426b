"""A real Spark Structured Streaming query, run in its own process by test_readers_spark.py: two Kafka
topics of one cluster into Parquet files, until what the topics hold now is written (trigger
availableNow, at most 20 records a batch), then stopped cleanly.

Usage: python -m tests.integration.spark_stream_query PLAN SIDE TOPICS CHECKPOINT OUTPUT
"""

from __future__ import annotations

import sys

from cutover.lake import spark as spark_mod
from cutover.plan import load_plan


def main(plan_file: str, side: str, topics: str, checkpoint: str, output: str, mode: str = "available-now") -> None:
    plan = load_plan(plan_file)
    spark = spark_mod.session(plan, "cutover-readers-test")
    source = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", plan.cluster("old" if side == "old" else "new")["bootstrap.servers"])
              .option("subscribe", topics).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "20").option("failOnDataLoss", "true")
              .load()
              .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value"))
    writer = source.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
    query = (writer.trigger(processingTime="1 second") if mode == "running" else writer.trigger(availableNow=True)
             ).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
