"""The shadow's tables: create them as the plan says, evolve them, and read their stamped offsets.

DDL goes through Spark (the writer); offsets are read through pyiceberg from the same
catalog, fresh on every call, so a commit whose outcome was unknown is seen as it is.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from cutover.errors import CutoverError, UnreachableError, UsageError
from cutover.lake import catalog as catalog_mod
from cutover.plan import Plan
from cutover.shadow import offsets
from cutover.shadow.decode import DEAD_LETTER_COLUMNS, META_COLUMNS, Payload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cutover.shadow")

_TRANSFORM = re.compile(r"\s*(?:(?P<fn>\w+)\s*\((?P<args>[^()]*)\)|(?P<col>\w+))\s*")
#: plan spelling -> Iceberg's Spark DDL spelling
_TRANSFORMS = {"year": "years", "years": "years", "month": "months", "months": "months", "day": "days",
               "days": "days", "date": "days", "hour": "hours", "hours": "hours", "bucket": "bucket",
               "truncate": "truncate", "identity": "identity"}


def dead_letter_name(table: str) -> str:
    return f"{table}_dead_letter"


def qualified(plan: Plan, table: str) -> str:
    """namespace.table -> catalog.namespace.table, with each part quoted for Spark SQL."""
    cat = plan.spec.catalog
    assert cat is not None
    return ".".join(f"`{p}`" for p in [cat.name, *table.split(".")])


def partition_sql(exprs: list[str], columns: list[str], where: str) -> str:
    """The plan's partition transforms (day(col), bucket(16, col), col) as Iceberg Spark DDL."""
    out = []
    for expr in exprs:
        m = _TRANSFORM.fullmatch(expr)
        fn = (m.group("fn") or "").lower() if m else ""
        if not m or (fn and fn not in _TRANSFORMS):
            raise UsageError(f"{where}: partition_by {expr!r} is not a transform cutover knows",
                             fix="use a column, year(col), month(col), day(col), hour(col), bucket(N, col) "
                                 "or truncate(N, col)")
        args = [a.strip() for a in (m.group("args") or m.group("col")).split(",")]
        column = args[-1]
        if column not in columns:
            raise UsageError(f"{where}: partition_by {expr!r} names column {column!r}, which the table does not "
                             "have", fix=f"use one of: {', '.join(columns)}")
        if not fn or fn == "identity":
            out.append(f"`{column}`")
        else:
            out.append(f"{_TRANSFORMS[fn]}({', '.join([*args[:-1], f'`{column}`'])})")
    return ", ".join(out)


def ensure(spark: SparkSession, plan: Plan, table: str, payload: Payload, partition_by: list[str],
           where: str) -> bool:
    """Create the table (and its namespace) when absent. True when it was created."""
    if exists(plan, table):
        return False
    columns = [*[(n, t, nullable) for n, t, nullable in payload.columns], *[(n, t, True) for n, t in META_COLUMNS]]
    ddl = ", ".join(f"`{n}` {t}" + ("" if nullable else " NOT NULL") for n, t, nullable in columns)
    parts = partition_sql(partition_by, [c[0] for c in columns], where)
    namespace = qualified(plan, table).rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified(plan, table)} ({ddl}) USING iceberg"
              + (f" PARTITIONED BY ({parts})" if parts else "") + " TBLPROPERTIES ('format-version'='2')")
    _first_snapshot(spark, plan, table)
    log.warning("created table %s (%s)%s", table, ddl, f" partitioned by {parts}" if parts else "")
    return True


def ensure_dead_letter(spark: SparkSession, plan: Plan, table: str) -> None:
    name = dead_letter_name(table)
    if not exists(plan, name):
        ddl = ", ".join(f"`{n}` {t}" for n, t in DEAD_LETTER_COLUMNS)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified(plan, name)} ({ddl}) USING iceberg "
                  "TBLPROPERTIES ('format-version'='2')")
        _first_snapshot(spark, plan, name)


def _first_snapshot(spark: SparkSession, plan: Plan, table: str) -> None:
    """An empty first snapshot: every later commit is a compare-and-set against a snapshot."""
    name = qualified(plan, table)
    spark.table(name).limit(0).writeTo(name).append()


class Conflict(CutoverError):
    """Another writer moved the table between reading its offsets and publishing: read again, retry."""

    retryable = True


def head(plan: Plan, table: str, branch: str = "main") -> int | None:
    """The snapshot a branch points at (None if the branch does not exist)."""
    return _ref(_load(plan, table), branch)


def _ref(tbl: Any, branch: str) -> int | None:
    ref = tbl.metadata.refs.get(branch) if tbl is not None else None
    return ref.snapshot_id if ref is not None else None


def publish(spark: SparkSession, plan: Plan, table: str, tbl: Any, df: Any, props: dict[str, str], base: int,
            branch: str) -> None:
    """Append `df` to the table only if its main branch is still at `base` (compare-and-set).

    `tbl` is the pyiceberg table as read with the offsets the rows were filtered against.
    The rows are committed to the run's own branch, set to `base` first; then main is
    fast-forwarded to it in a catalog commit that requires main to be still at `base` and
    also records the stamp in the table's properties (`cutover.kafka.state`). The branch
    head's parent is checked to be `base`, so even a branch dropped and recreated
    meanwhile cannot publish rows filtered against other offsets.
    """
    name = qualified(plan, table)
    at = _ref(tbl, branch)
    if at is None:
        spark.sql(f"ALTER TABLE {name} CREATE BRANCH `{branch}` AS OF VERSION {base}")
    elif at != base:
        spark.sql(f"ALTER TABLE {name} REPLACE BRANCH `{branch}` AS OF VERSION {base}")
    df.writeTo(f"{name}.`branch_{branch}`").options(**{f"snapshot-property.{k}": v for k, v in props.items()}) \
        .append()
    after = _load(plan, table)
    written_id = _ref(after, branch)
    written = after.snapshot_by_id(written_id) if written_id is not None else None
    if written is None or written.parent_snapshot_id != base:
        raise Conflict(f"table {table}: branch {branch} moved while this batch was written to it")
    _fast_forward(after, table, base, written.snapshot_id, offsets.state_property(props, written.snapshot_id,
                                                                                 written.timestamp_ms))


def _fast_forward(tbl: Any, table: str, base: int, snapshot_id: int, state: str) -> None:
    """Move main from `base` to `snapshot_id` and record the stamp in the table's properties, in one
    catalog commit that fails unless main is still at `base` (the compare-and-set)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update.snapshot import ManageSnapshots

    if _ref(tbl, "main") != base:
        raise Conflict(f"table {table}: another writer committed since snapshot {base}")
    try:
        with tbl.transaction() as tx:
            tx.set_properties({offsets.K_STATE: state})
            ManageSnapshots(tx).set_current_snapshot(snapshot_id=snapshot_id)  # requires main == base
    except CommitFailedException:
        raise Conflict(f"table {table}: another writer committed since snapshot {base}") from None


def stamp_only(spark: SparkSession, plan: Plan, table: str, props: dict[str, str], branch: str) -> int:
    """Commit a snapshot that adds no rows and carries `props` (a hand-over point). Returns its id."""
    _snaps, base, tbl = snapshots(plan, table)
    assert base is not None
    try:
        publish(spark, plan, table, tbl, spark.table(qualified(plan, table)).limit(0), props, base, branch)
    finally:
        drop_branch(spark, plan, table, branch)
    after = head(plan, table)
    assert after is not None
    return after


def drop_branch(spark: SparkSession, plan: Plan, table: str, branch: str) -> None:
    if head(plan, table, branch) is not None:
        spark.sql(f"ALTER TABLE {qualified(plan, table)} DROP BRANCH IF EXISTS `{branch}`")


def drop_stale_branches(spark: SparkSession, plan: Plan, table: str, idle_ms: int) -> None:
    """Branches of shadow runs that died (cutover_*) whose head is older than `idle_ms`."""
    tbl = _load(plan, table)
    if tbl is None:
        return
    now = max((s.timestamp_ms for s in tbl.snapshots()), default=0)
    for name, ref in tbl.metadata.refs.items():
        snap = tbl.snapshot_by_id(ref.snapshot_id)
        if name.startswith("cutover_") and snap is not None and now - snap.timestamp_ms > idle_ms:
            spark.sql(f"ALTER TABLE {qualified(plan, table)} DROP BRANCH IF EXISTS `{name}`")
            log.info("table %s: dropped branch %s of a shadow run that stopped", table, name)


def add_columns(spark: SparkSession, plan: Plan, table: str, columns: list[tuple[str, str]]) -> None:
    """Schema evolution: new nullable columns; rows written before read them as null."""
    spec = ", ".join(f"`{n}` {t}" for n, t in columns)
    spark.sql(f"ALTER TABLE {qualified(plan, table)} ADD COLUMNS ({spec})")
    log.warning("table %s: added column(s) %s (schema drift policy: evolve)", table, spec)


_catalogs: dict[tuple[str, str], Any] = {}


def _load(plan: Plan, table: str) -> Any:
    """The table through pyiceberg, freshly loaded (one catalog client per process)."""
    from pyiceberg.exceptions import NoSuchTableError

    cat = plan.spec.catalog
    assert cat is not None
    key = (cat.name, cat.uri)
    if key not in _catalogs:
        _catalogs[key] = catalog_mod.load(cat)
    try:
        return _catalogs[key].load_table(table)
    except NoSuchTableError:
        return None
    except Exception as exc:  # the database behind the catalog: locked, gone, refusing
        raise UnreachableError(f"catalog {cat.name} could not load table {table}: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:200]}",
                               fix="check that the catalog database is up and reachable") from None


def exists(plan: Plan, table: str) -> bool:
    return _load(plan, table) is not None


def snapshots(plan: Plan, table: str) -> tuple[list[offsets.Snapshot], int | None, Any]:
    """Every snapshot of the table, its current snapshot id, and the pyiceberg table (None if absent)."""
    tbl = _load(plan, table)
    if tbl is None:
        return [], None, None
    snaps = [offsets.Snapshot(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms,
                              dict(s.summary.additional_properties) if s.summary else {}) for s in tbl.snapshots()]
    current = tbl.current_snapshot()
    return snaps, current.snapshot_id if current else None, tbl


def table_offsets(plan: Plan, table: str) -> offsets.TableOffsets:
    snaps, current, tbl = snapshots(plan, table)
    return offsets.latest(snaps, current, table, properties_of(tbl))


def properties_of(tbl: Any) -> dict[str, str]:
    return dict(tbl.properties) if tbl is not None else {}
