"""Shadow on Avro: cutover shadow (format avro, the registry's schemas) vs a plain Spark job that only runs
`from_avro` and appends, and vs the shadow on the same records in JSON.

    .venv/bin/python bench/shadow_avro_bench.py --records 1000000 --partitions 12

Brings up a throwaway sandbox with its registries, registers one Avro schema on the new
registry, and fills two topics on the new cluster with the same records (4 fields, about
200 bytes): one in Confluent's Avro wire format, one in JSON. Then, on the same data:

1. plain from_avro (the floor): one Spark batch job, Kafka source -> strip the 5-byte
   header -> `from_avro` with the schema -> one Iceberg append;
2. plain Structured Streaming from_avro: the same decode with the shadow's reader options and
   trigger (availableNow, spark.max_records_per_batch a batch), appending to Iceberg: the
   issue's baseline for the shadow;
3. cutover shadow --until-caught-up on the Avro topic (format avro: ids read per batch, the
   writer schema fetched once, offsets stamped, dead letters split);
4. cutover shadow --until-caught-up on the JSON topic (format json, the same columns).

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from shadow_bench import plain_copy, plain_stream, shadow

from cutover.lake import spark as spark_mod
from cutover.lake import tables
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from cutover.shadow.source import reader_options

AVRO = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "note", "type": "string"}]}
JSON_SCHEMA = [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
               {"name": "amount", "type": "double"}, {"name": "note", "type": "string"}]


def record(i: int) -> dict[str, object]:
    return {"id": i, "customer": f"c{i % 977}", "amount": round(i % 10000 / 7, 2), "note": "x" * 120}


def fill(bootstrap: str, topics: dict[str, str], partitions: int, n: int, schema_id: int) -> None:
    import fastavro

    parsed = fastavro.parse_schema(AVRO)
    header = b"\x00" + schema_id.to_bytes(4, "big")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000})
    for i in range(n):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, record(i))
        for fmt, topic in topics.items():
            value = header + body.getvalue() if fmt == "avro" else json.dumps(record(i)).encode()
            while True:
                try:
                    producer.produce(topic, value, b"k%d" % i, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(300) == 0


def avro_decoded(df: Any) -> Any:
    """The plain jobs' decode of a Kafka frame in Confluent's wire format: the 5-byte header cut, from_avro with
    the one schema, and the record's metadata."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    return df.select(from_avro(F.expr("substring(value, 6)"), json.dumps(AVRO)).alias("a"), "partition", "offset",
                     "timestamp", "key").select("a.*", "partition", "offset", "timestamp", "key")


def plain_from_avro(plan_file: Path, topic: str, table: str) -> float:
    """The floor: one batch job, from_avro with the schema, one append, nothing else."""
    plan = load_plan(plan_file)
    spark = spark_mod.session(plan, "bench-plain-avro")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {plan.spec.catalog.name}.bench")  # type: ignore[union-attr]
    options = reader_options("new", plan.cluster("new"), topic, {}, 1)
    options.pop("maxOffsetsPerTrigger")
    options.update({"startingOffsets": "earliest", "endingOffsets": "latest"})
    began = time.monotonic()
    rows = avro_decoded(spark.read.format("kafka").options(**options).load())
    rows.writeTo(tables.qualified(plan, table)).using("iceberg").create()
    took = time.monotonic() - began
    spark.stop()
    return took


def run_shadow(plan_file: Path, table: str, n: int) -> tuple[float, float]:
    began = time.monotonic()
    proc = shadow(plan_file, "--table", table, "-o", "json")
    out, _ = proc.communicate(timeout=3600)
    wall = time.monotonic() - began
    result = json.loads(out)
    assert result["tables"][0]["rows"] == n, result
    t = result["tables"][0]
    print(f"{table}: {t['batches']} batches ({t['two_pass_batches']} in two passes), phases "
          + ", ".join(f"{p} {s:.1f}s" for p, s in t["phases"].items()), file=sys.stderr)
    return float(result["seconds"]), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=12)
    args = ap.parse_args()
    n = args.records
    with tempfile.TemporaryDirectory(prefix="cutover-shadow-avro-bench-") as tmp:
        box = Sandbox(Path(tmp) / "sandbox")
        status = box.up(registry=True)
        try:
            from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

            sid = SchemaRegistryClient({"url": status["registry"]["new"]["url"]}).register_schema(
                "bench.avro-value", Schema(json.dumps(AVRO), "AVRO"))
            data = yaml.safe_load(box.plan_file.read_text())
            data["env_file"] = str(box.dir / data["env_file"])
            data["tables"] = [{"topic": "bench.avro", "old": "bench.avro_old", "new": "bench.avro", "format": "avro"},
                              {"topic": "bench.json", "old": "bench.json_old", "new": "bench.json",
                               "schema": JSON_SCHEMA}]
            plan_file = Path(tmp) / "plan.yaml"
            plan_file.write_text(yaml.safe_dump(data))
            new = data["clusters"]["new"]["bootstrap.servers"]
            admin = AdminClient({"bootstrap.servers": new})
            for t in ("bench.avro", "bench.json"):
                admin.create_topics([NewTopic(t, args.partitions, 1)])[t].result(30)
            began = time.monotonic()
            fill(new, {"avro": "bench.avro", "json": "bench.json"}, args.partitions, n, sid)
            print(f"filled 2 x {n:,} records in {time.monotonic() - began:.0f}s", file=sys.stderr)
            plain = plain_from_avro(plan_file, "bench.avro", "bench.plain_avro")
            plain_json = plain_copy(plan_file, "bench.json", "bench.plain_json")
            stream = plain_stream(plan_file, "bench.avro", "bench.stream_avro", Path(tmp) / "stream-ck",
                                  decode=avro_decoded)
            avro, avro_wall = run_shadow(plan_file, "bench.avro", n)
            js, _wall = run_shadow(plan_file, "bench.json", n)
        finally:
            box.down(kill=True)
    print(f"\n{n:,} records, {args.partitions} partitions\n")
    print("| run | seconds | rows/s | vs plain from_avro |\n|---|---|---|---|")
    print(f"| plain Spark job: from_avro, one append (floor) | {plain:.1f} | {n / plain:,.0f} | 1.00x |")
    print(f"| plain Spark job: from_json, one append | {plain_json:.1f} | {n / plain_json:,.0f} | "
          f"{plain / plain_json:.2f}x |")
    print(f"| plain Structured Streaming job: from_avro, the shadow's trigger | {stream:.1f} | {n / stream:,.0f} | "
          f"{plain / stream:.2f}x |")
    print(f"| cutover shadow, avro (copy phase) | {avro:.1f} | {n / avro:,.0f} | {plain / avro:.2f}x |")
    print(f"| cutover shadow, avro, wall incl. Spark start | {avro_wall:.1f} | {n / avro_wall:,.0f} | "
          f"{plain / avro_wall:.2f}x |")
    print(f"| cutover shadow, json (copy phase) | {js:.1f} | {n / js:,.0f} | {plain / js:.2f}x |")
    print(f"\nshadow (avro) vs the plain streaming job: {stream / avro:.2f}x")


if __name__ == "__main__":
    main()
