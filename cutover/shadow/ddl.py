"""The shadow's table DDL: create its tables (and dead-letter tables) as the plan says, evolve them.

DDL goes through Spark, the writer; reading and committing is the table layer's
(`cutover.lake.tables`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cutover.errors import UsageError
from cutover.lake.tables import DEAD_LETTER_COLUMNS, META_COLUMNS, dead_letter_name, exists, qualified
from cutover.plan import Plan
from cutover.plan.model import TRANSFORMS, TRANSFORMS_FIX, transform
from cutover.shadow.decode import Payload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cutover.shadow")

def partition_sql(exprs: list[str], columns: list[str], where: str) -> str:
    """The plan's partition transforms (day(col), bucket(16, col), col) as Iceberg Spark DDL."""
    out = []
    for expr in exprs:
        parsed = transform(expr)
        if parsed is None:
            raise UsageError(f"{where}: partition_by {expr!r} is not a transform cutover knows", fix=TRANSFORMS_FIX)
        fn, args = parsed
        column = args[-1]
        if column not in columns:
            raise UsageError(f"{where}: partition_by {expr!r} names column {column!r}, which the table does not "
                             "have", fix=f"use one of: {', '.join(columns)}")
        if not fn or fn == "identity":
            out.append(f"`{column}`")
        else:
            out.append(f"{TRANSFORMS[fn]}({', '.join([*args[:-1], f'`{column}`'])})")
    return ", ".join(out)


def ensure(spark: SparkSession, plan: Plan, table: str, payload: Payload, partition_by: list[str],
           where: str) -> bool:
    """Create the table (and its namespace) when absent, with its first snapshot. True when it was created."""
    if exists(plan, table):
        first_snapshot(spark, plan, table)
        return False
    columns = [*[(n, t, nullable) for n, t, nullable in payload.columns], *[(n, t, True) for n, t in META_COLUMNS]]
    ddl = ", ".join(f"`{n}` {t}" + ("" if nullable else " NOT NULL") for n, t, nullable in columns)
    parts = partition_sql(partition_by, [c[0] for c in columns], where)
    namespace = qualified(plan, table).rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified(plan, table)} ({ddl}) USING iceberg"
              + (f" PARTITIONED BY ({parts})" if parts else "") + " TBLPROPERTIES ('format-version'='2')")
    first_snapshot(spark, plan, table)
    log.warning("created table %s (%s)%s", table, ddl, f" partitioned by {parts}" if parts else "")
    return True


def ensure_dead_letter(spark: SparkSession, plan: Plan, table: str) -> None:
    name = dead_letter_name(table)
    if not exists(plan, name):
        ddl = ", ".join(f"`{n}` {t}" for n, t in DEAD_LETTER_COLUMNS)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified(plan, name)} ({ddl}) USING iceberg "
                  "TBLPROPERTIES ('format-version'='2')")
    first_snapshot(spark, plan, name)


def first_snapshot(spark: SparkSession, plan: Plan, table: str) -> None:
    """An empty first snapshot, unless the table has one: every later commit is a compare-and-set
    against a snapshot. Checked each time, because the catalog may have failed (or its answer been
    lost) between creating a table and this commit; two empty snapshots would be harmless."""
    from cutover.lake import tables

    if tables.snapshots(plan, table)[1] is not None:
        return
    name = qualified(plan, table)
    spark.table(name).limit(0).writeTo(name).append()


def add_columns(spark: SparkSession, plan: Plan, table: str, columns: list[tuple[str, str]]) -> None:
    """Schema evolution: new nullable columns; rows written before read them as null."""
    spec = ", ".join(f"`{n}` {t}" for n, t in columns)
    spark.sql(f"ALTER TABLE {qualified(plan, table)} ADD COLUMNS ({spec})")
    log.warning("table %s: added column(s) %s (schema drift policy: evolve)", table, spec)
