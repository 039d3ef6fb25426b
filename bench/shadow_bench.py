"""Shadow bench: cutover shadow (exactly-once, offsets stamped) vs a plain Spark copy, and freshness.

    .venv/bin/python bench/shadow_bench.py [--records 200000] [--partitions 12] [--rate 2000] [--seconds 60]

Brings up a throwaway sandbox and fills one topic on the new cluster with JSON records
(about 200 bytes each), then on the same data:

1. plain copy (the floor): one Spark batch job, Kafka source -> decode the same JSON
   schema -> one Iceberg append, with no offsets, dead-letter split or resume logic;
2. cutover shadow --until-caught-up: the same rows, through the shadow's micro-batches
   (spark.max_records_per_batch), offsets stamped in every snapshot.

Then freshness: `cutover shadow --follow` (trigger 1 s) while a producer writes
`--rate` records/s for `--seconds`; per row, the time from its Kafka timestamp to the
commit of the snapshot that added it (read back from the table's entries: each data file's snapshot).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.lake import spark as spark_mod
from cutover.lake import tables
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from cutover.shadow.source import reader_options

CLI = str(Path(sys.executable).with_name("cutover"))
SCHEMA = [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
          {"name": "amount", "type": "decimal(12,2)"}, {"name": "note", "type": "string"}]


#: the note that makes a value about 1 KB (bench/__main__.py's shadow measure)
NOTE_1KB = "x" * 950


def value(i: int, note: str = "x" * 120) -> bytes:
    return json.dumps({"id": i, "customer": f"c{i % 977}", "amount": round(i % 10000 / 7, 2),
                       "note": note}).encode()


def produce(bootstrap: str, topic: str, partitions: int, start: int, n: int, rate: float | None = None,
            note: str = "x" * 120) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000})
    began = time.monotonic()
    for i in range(start, start + n):
        if rate and i % 100 == 0:
            ahead = (i - start) / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                producer.produce(topic, value(i, note), b"k%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def shadow(plan_file: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([CLI, "shadow", "--plan", str(plan_file), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def decoded(df: Any) -> Any:
    """The plain jobs' decode of a Kafka source frame: the JSON fields of SCHEMA and the record's metadata."""
    from pyspark.sql import functions as F

    ddl = ", ".join(f"{c['name']} {c['type']}" for c in SCHEMA)
    return df.select(F.from_json(F.col("value").cast("string"), ddl).alias("j"), "partition", "offset",
                     "timestamp", "key").select("j.*", "partition", "offset", "timestamp", "key")


def plain_copy(plan_file: Path, topic: str, table: str) -> float:
    """The floor: one batch job, same decode, one append, nothing else."""
    plan = load_plan(plan_file)
    spark = spark_mod.session(plan, "bench-plain")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {plan.spec.catalog.name}.bench")  # type: ignore[union-attr]
    options = reader_options("new", plan.cluster("new"), topic, {}, 1)
    options.pop("maxOffsetsPerTrigger")
    options.update({"startingOffsets": "earliest", "endingOffsets": "latest"})
    began = time.monotonic()
    rows = decoded(spark.read.format("kafka").options(**options).load())
    rows.writeTo(tables.qualified(plan, table)).using("iceberg").create()
    took = time.monotonic() - began
    spark.stop()
    return took


def plain_stream(plan_file: Path, topic: str, table: str, checkpoint: Path,
                 follow: threading.Event | None = None, decode: Callable[[Any], Any] | None = None) -> float:
    """The issue's baseline: a plain Structured Streaming job on the same topic with the shadow's reader options
    and trigger (availableNow, the plan's spark.max_records_per_batch a batch), the same decode, appending to an
    Iceberg table: no stamps, no compare-and-set, no dead letters.

    `follow`: run as `cutover shadow --follow` does instead (a batch every spark.trigger_interval) until set.
    `decode`: the Kafka frame to the table's rows (default: the JSON of SCHEMA, `decoded`)."""
    decoded_ = decode or decoded
    plan = load_plan(plan_file)
    spark = spark_mod.session(plan, "bench-plain-stream")
    name = tables.qualified(plan, table)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
    options = reader_options("new", plan.cluster("new"), topic, {}, plan.spec.spark.max_records_per_batch)
    options["startingOffsets"] = "earliest"
    batch = {k: v for k, v in options.items() if k != "maxOffsetsPerTrigger"}
    decoded_(spark.read.format("kafka").options(**batch).load()).limit(0).writeTo(name).using("iceberg").create()
    began = time.monotonic()
    trigger = {"availableNow": True} if follow is None else {
        "processingTime": f"{plan.spec.spark.trigger_interval} seconds"}
    query = (decoded_(spark.readStream.format("kafka").options(**options).load()).writeStream.format("iceberg")
             .outputMode("append").trigger(**trigger).option("checkpointLocation", str(checkpoint))
             .toTable(name))
    if follow is None:
        query.awaitTermination()
    else:
        while not follow.wait(0.5) and query.isActive:
            pass
        failure = query.exception()
        query.stop()
        if failure is not None:
            raise RuntimeError(f"the plain streaming job failed: {failure}")
    took = time.monotonic() - began
    spark.stop()
    return took


def rows_in(plan_file: Path, table: str) -> int:
    """The rows of a table's current snapshot (0 while it has none)."""
    tbl = tables.load_table(load_plan(plan_file), table)
    snap = tbl.current_snapshot() if tbl is not None else None
    return int(snap.summary.get("total-records", 0)) if snap is not None and snap.summary else 0


def wait_rows(plan_file: Path, table: str, n: int, timeout: float, alive: Callable[[], bool]) -> None:
    """Until the table holds `n` rows; fails past `timeout` or when the job writing it is gone."""
    deadline = time.monotonic() + timeout
    while (have := rows_in(plan_file, table)) < n:
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(f"{table}: {have:,} of {n:,} rows after {timeout:.0f}s (job alive: {alive()})")
        time.sleep(0.5)


def quantile(sorted_values: list[float], q: float) -> float:
    """The value at quantile q (0..1) of sorted values."""
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def added_lags(plan_file: Path, table: str, stamp: str, skip: int | None = None) -> list[float]:
    """Seconds from each row's Kafka timestamp (column `stamp`) to the commit of the snapshot that added its data
    file, for any Iceberg table (the shadow's or a plain job's): the table's entries name each file's snapshot.
    The row whose id is `skip` is left out."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tbl = tables.load_table(load_plan(plan_file), table)
    committed = {s.snapshot_id: s.timestamp_ms / 1000 for s in tbl.metadata.snapshots}
    entries = tbl.inspect.entries().to_pylist()
    lags: list[float] = []
    for e in entries:
        if e["status"] == 2 or e["data_file"]["content"] != 0:  # deleted entries, delete files
            continue
        path = e["data_file"]["file_path"].removeprefix("file:")
        data = pq.read_table(path, columns=[stamp, "id"])
        seconds = pc.divide(pc.cast(pc.cast(data.column(stamp), "timestamp[us]"), "int64"), 1e6).to_pylist()
        lags += [committed[e["snapshot_id"]] - t
                 for t, i in zip(seconds, data.column("id").to_pylist(), strict=True) if i != skip]
    return sorted(lags)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cutover-shadow-bench-") as tmp:
        box = Sandbox(Path(tmp) / "sandbox")
        box.up()
        try:
            data = yaml.safe_load(box.plan_file.read_text())
            data["env_file"] = str(box.dir / data["env_file"])
            data["tables"] = [{"topic": "bench.orders", "old": "bench.orders_old", "new": "bench.orders",
                               "schema": SCHEMA},
                              {"topic": "bench.live", "old": "bench.live_old", "new": "bench.live", "schema": SCHEMA}]
            data["spark"].update({"trigger_interval": "1s"})
            plan_file = Path(tmp) / "plan.yaml"
            plan_file.write_text(yaml.safe_dump(data))
            new = data["clusters"]["new"]["bootstrap.servers"]
            admin = AdminClient({"bootstrap.servers": new})
            for t in ("bench.orders", "bench.live"):
                admin.create_topics([NewTopic(t, args.partitions, 1)])[t].result(30)
            produce(new, "bench.orders", args.partitions, 0, args.records)

            plain = plain_copy(plan_file, "bench.orders", "bench.plain")
            began = time.monotonic()
            proc = shadow(plan_file, "--table", "bench.orders", "-o", "json")
            out, _ = proc.communicate(timeout=3600)
            wall = time.monotonic() - began
            result = json.loads(out)
            assert result["tables"][0]["rows"] == args.records, result
            copy = result["seconds"]

            proc = shadow(plan_file, "--table", "bench.live", "--follow")
            time.sleep(20)  # Spark start-up, before the steady input begins
            produce(new, "bench.live", args.partitions, 0, int(args.rate * args.seconds), rate=args.rate)
            time.sleep(10)
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
            lags = added_lags(plan_file, "bench.live", "kafka_timestamp")
        finally:
            box.down()
    n = args.records
    print(f"| run | seconds | rows/s | vs plain copy |\n|---|---|---|---|\n"
          f"| plain Spark copy (floor) | {plain:.1f} | {n / plain:,.0f} | 1.00x |\n"
          f"| cutover shadow --until-caught-up (copy phase) | {copy:.1f} | {n / copy:,.0f} | {plain / copy:.2f}x |\n"
          f"| cutover shadow, wall incl. Spark start | {wall:.1f} | {n / wall:,.0f} | {plain / wall:.2f}x |")
    pct = lambda q: quantile(lags, q)  # noqa: E731
    print(f"\nfreshness at {args.rate:,.0f} rows/s for {args.seconds:.0f}s ({len(lags):,} rows): "
          f"p50 {pct(0.5):.1f}s, p95 {pct(0.95):.1f}s, max {lags[-1]:.1f}s")


if __name__ == "__main__":
    main()
