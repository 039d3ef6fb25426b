"""Run in its own process by the remote-master test: Kafka source -> Iceberg table.

Usage: python -m tests.integration.spark_job PLAN TOPIC TABLE
"""

from __future__ import annotations

import sys

from cutover.lake import spark as spark_mod
from cutover.plan import load_plan


def main(plan_file: str, topic: str, table: str) -> None:
    plan = load_plan(plan_file)
    spark = spark_mod.session(plan, "cutover-remote-test")
    assert spark.sparkContext.master == plan.spec.spark.master, spark.sparkContext.master
    df = (spark.read.format("kafka")
          .option("kafka.bootstrap.servers", plan.cluster("old")["bootstrap.servers"])
          .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest")
          .load()
          .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"))
    df.writeTo(table).using("iceberg").create()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
