"""Verify bench: cutover verify vs one hashing scan (the floor) vs a hand-written exceptAll.

    .venv/bin/python bench/verify_bench.py --rows 1000000 10000000

Brings up a throwaway sandbox (for its catalog and plan), and for each size writes two
equal Iceberg tables with Spark (12 Kafka partitions, offset columns, 6 payload columns),
then times on the same tables and the same SparkSession:

1. the floor: one scan of each table computing per partition a count and the sum of a
   64-bit hash of every row (what any exact comparison must at least read);
2. a hand-written diff: `old.exceptAll(new)` and `new.exceptAll(old)`, counted;
3. cutover verify on the equal tables;
4. cutover verify after planting 10 altered, 5 dropped and 5 duplicated rows in the new
   table (the drill-down cost), checking it finds exactly those.

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from cutover.lake import spark as spark_mod
from cutover.lake import tables
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from cutover.verify import run as verify_run

PAYLOAD = ["id", "name", "amount", "score", "created_at", "note"]


def make(spark: Any, name: str, rows: int, batches: int = 1) -> None:
    """`rows` rows in `batches` appends of consecutive offsets (a shadow table's layout: files by batch)."""
    step = -(-rows // batches)
    for k in range(batches):
        df = spark.range(k * step, min(rows, (k + 1) * step)).selectExpr(
            "CAST(id % 12 AS INT) AS kafka_partition", "id DIV 12 AS kafka_offset", "id", "concat('n', id) AS name",
            "CAST(id % 100000 / 100 AS DECIMAL(12,2)) AS amount", "id / 7.0D AS score",
            "timestamp_micros(1700000000000000 + id * 1000) AS created_at", "repeat('x', 40) AS note")
        if k:
            df.writeTo(name).append()
        else:
            df.writeTo(name).using("iceberg").create()


def two_tables(box: Sandbox, folder: Path, name: str, rows: int, batches: int = 1) -> tuple[Any, Any, str, str]:
    """A plan whose one pair is NAME.old and NAME.new, both made with `rows` equal rows:
    (plan, its Spark session, old table, new table)."""
    data = yaml.safe_load(box.plan_file.read_text())
    data["env_file"] = str(box.dir / data["env_file"])
    data["name"] = f"bench-{name}"
    data["spark"]["conf"] = {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "6g"}
    data["tables"] = [{"topic": "bench.orders", "old": f"{name}.old", "new": f"{name}.new",
                       "old_offset_columns": {"partition": "kafka_partition", "offset": "kafka_offset"}}]
    plan_file = folder / f"plan-{name}.yaml"
    plan_file.write_text(yaml.safe_dump(data))
    plan = load_plan(plan_file)
    spark = spark_mod.session(plan, "bench-verify")
    old, new = tables.qualified(plan, f"{name}.old"), tables.qualified(plan, f"{name}.new")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {old.rsplit('.', 1)[0]}")
    make(spark, old, rows, batches)
    make(spark, new, rows, batches)
    return plan, spark, old, new


def timed(fn: Any) -> tuple[float, Any]:
    began = time.monotonic()
    out = fn()
    return time.monotonic() - began, out


def floor(spark: Any, old: str, new: str) -> None:
    from pyspark.sql import functions as F

    for t in (old, new):
        df = spark.table(t)
        df.groupBy("kafka_partition").agg(F.count("*"), F.sum(F.xxhash64(*df.columns).cast("decimal(38,0)"))).collect()


def plant(spark: Any, table: str, rows: int, localized: bool = False) -> None:
    """20 differences in `table`: 10 rows changed, 5 deleted, 5 duplicated; spread evenly over the table, or
    `localized` among its first 2,000 rows (a burst: one bad deploy, one crash)."""
    every = 200 if localized else rows // 10
    spark.sql(f"UPDATE {table} SET name = 'changed' WHERE id % {every} = 7 AND id < {every * 10}")
    spark.sql(f"DELETE FROM {table} WHERE id % {every * 2} = 11 AND id < {every * 10}")
    spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE id % {every * 2} = 13 AND id < {every * 10}")


def except_all(spark: Any, old: str, new: str) -> int:
    a, b = spark.table(old).select(*PAYLOAD), spark.table(new).select(*PAYLOAD)
    return int(a.exceptAll(b).count() + b.exceptAll(a).count())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--batches", type=int, default=1, help="write each table in this many appends")
    ap.add_argument("--localized", action="store_true", help="plant the differences among the first 2,000 rows")
    args = ap.parse_args()
    lines = ["| rows | floor: one hashing scan of both (s) | exceptAll both ways (s) | cutover verify, equal (s) "
             "| verify / floor | verify / exceptAll | verify with 20 planted differences (s) | that / floor |",
             "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="cutover-verify-bench-") as tmp:
        box = Sandbox(Path(tmp) / "sandbox")
        box.up()
        try:
            for rows in args.rows:
                plan, spark, old, new = two_tables(box, Path(tmp), f"b{rows}", rows, args.batches)
                floor(spark, old, new)  # warm up the session and the file listing once
                t_floor, _ = timed(lambda o=old, n=new, s=spark: floor(s, o, n))
                t_except, diff = timed(lambda o=old, n=new, s=spark: except_all(s, o, n))
                assert diff == 0
                t_equal, res = timed(lambda p=plan: verify_run.verify(p, verify_run.Options()).as_dict())
                assert res["passed"], res["tables"][0]["counts"]
                plant(spark, new, rows, args.localized)
                t_diff, res = timed(lambda p=plan: verify_run.verify(p, verify_run.Options()).as_dict())
                c = res["tables"][0]["counts"]
                assert (c["mismatched"], c["missing"], c["duplicates_new"]) == (10, 5, 5), c
                lines.append(f"| {rows:,} | {t_floor:.1f} | {t_except:.1f} | {t_equal:.1f} | "
                             f"{t_equal / t_floor:.2f}x | {t_equal / t_except:.2f}x | {t_diff:.1f} | "
                             f"{t_diff / t_floor:.2f}x |")
        finally:
            box.down()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
