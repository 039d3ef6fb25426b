"""One catalog for Spark and pyiceberg: what one side writes, the other reads identically."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from cutover.lake import catalog
from cutover.plan import Plan

pytestmark = pytest.mark.lake


def test_spark_writes_pyiceberg_reads(spark: Any, plan: Plan, ns: str) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS cutover.{ns}")
    spark.sql(f"""CREATE TABLE cutover.{ns}.from_spark
                  (id BIGINT, name STRING, amount DECIMAL(10,2), ts TIMESTAMP, payload BINARY) USING iceberg""")
    spark.sql(f"""INSERT INTO cutover.{ns}.from_spark VALUES
        (1, 'a', 10.25, TIMESTAMP '2024-01-01 00:00:00', X'00FF'),
        (2, NULL, -0.50, TIMESTAMP '2024-02-29 23:59:59.999999', NULL),
        (3, 'ü', NULL, NULL, X'')""")
    expected = [
        {"id": 1, "name": "a", "amount": Decimal("10.25"), "ts": datetime(2024, 1, 1, tzinfo=UTC),
         "payload": b"\x00\xff"},
        {"id": 2, "name": None, "amount": Decimal("-0.50"),
         "ts": datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC), "payload": None},
        {"id": 3, "name": "ü", "amount": None, "ts": None, "payload": b""},
    ]
    table = catalog.load(plan.spec.catalog).load_table(f"{ns}.from_spark")  # type: ignore[arg-type]
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == expected
    spark_rows = [r.asDict() for r in spark.sql(f"SELECT * FROM cutover.{ns}.from_spark ORDER BY id").collect()]
    assert [{**r, "payload": None if r["payload"] is None else bytes(r["payload"]),
             "ts": r["ts"] and r["ts"].replace(tzinfo=UTC)} for r in spark_rows] == [
        {**e, "ts": e["ts"] and e["ts"].replace(tzinfo=UTC)} for e in expected]


def test_pyiceberg_writes_spark_reads(spark: Any, plan: Plan, ns: str) -> None:
    cat = catalog.load(plan.spec.catalog)  # type: ignore[arg-type]
    cat.create_namespace_if_not_exists(ns)
    data = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "score": pa.array([0.1, -0.0, None], pa.float64()),
        "label": pa.array(["x", None, "z"], pa.string()),
    })
    table = cat.create_table(f"{ns}.from_pyiceberg", schema=data.schema)
    table.append(data)
    rows = [r.asDict() for r in spark.sql(f"SELECT * FROM cutover.{ns}.from_pyiceberg ORDER BY id").collect()]
    assert rows == [{"id": 1, "score": 0.1, "label": "x"}, {"id": 2, "score": -0.0, "label": None},
                    {"id": 3, "score": None, "label": "z"}]
    snapshots = spark.sql(f"SELECT snapshot_id FROM cutover.{ns}.from_pyiceberg.snapshots").collect()
    assert [s.snapshot_id for s in snapshots] == [table.current_snapshot().snapshot_id]  # type: ignore[union-attr]
