"""`cutover verify`: per table pair, normalize both tables, reconcile, run the suites, apply the gates.

The identity of a row depends on what the old table has: its Kafka partition and offset
columns (`old_offset_columns`: offset-exact, with a window and lag), else the plan's
`key` columns, else the whole row's content. The result is recorded on the new table
(property `cutover.verify.last`), where promote reads it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cutover.errors import UsageError
from cutover.kafka import inspect
from cutover.kafka.clients import ClusterRef
from cutover.lake import eras, platforms, stamps, tables
from cutover.output import progress
from cutover.plan import Plan, TablePair, select_pairs
from cutover.verify import align, freshness, quality
from cutover.verify.canon import Column_, canonical, row_hash, schema_diff
from cutover.verify.reconcile import buckets, reconcile
from cutover.verify.results import (
    COUNT_KEYS,
    Counts,
    Gate,
    Lag,
    LastVerify,
    Mode,
    PartitionResult,
    TableResult,
    VerifyResult,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("cutover.verify")
RESULT_PROPERTY = "cutover.verify.last"
#: Kafka metadata columns that place a row rather than describe it: never compared as content.
_META = {"kafka_offset", "kafka_partition", "kafka_topic"} & set(tables.META_NAMES)


@dataclass(frozen=True)
class Options:
    table: str | None = None
    sample_size: int = 10
    timeout: float = 10.0
    #: Measure each table's freshness (verify/freshness.py): always for a pair a platform writes.
    freshness: bool = False


def verify(plan: Plan, opts: Options) -> VerifyResult:
    from cutover.lake import spark as spark_mod

    pairs = select_pairs(plan, opts.table)
    progress(f"starting Spark ({plan.spec.spark.master}) to verify {len(pairs)} table pair(s)")
    spark = spark_mod.session(plan, f"cutover-verify-{plan.name}")
    runner = quality.Runner() if any(p.checks for p in pairs) else None
    results = [_pair(spark, plan, pair, opts, runner) for pair in pairs]
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    for r in results:
        record(plan, r.table, r.summary(at))
    audited = None
    if plan.spec.registry is not None:  # every schema id the new cluster's records carry, on both registries
        from cutover.registry import audit

        audited = audit.audit(plan, "new", False, opts.timeout).as_dict()
    return VerifyResult(str(plan.file), plan.name, at, tuple(results), audited)


@dataclass(frozen=True)
class Pinned:
    """A table read at one snapshot, so every pass (and the window) sees the same rows."""

    df: DataFrame
    snapshot_id: int | None
    held: stamps.TableOffsets
    #: per partition, which cluster's offsets its rows carry, era by era ({}: never handed over)
    lines: dict[int, list[eras.Span]]
    #: the table as stored (a platform's table, before `platforms.flatten`): what freshness reads
    raw: DataFrame


#: A table of at most this many rows (its snapshot's total-records) is read once and kept in Spark's memory
#: for verify's passes: the one scan, a window's second look at a bucket, the row pass and each expectation's
#: metrics. Such a table is often many small files (a sink committing every few seconds), and on object
#: storage each pass paid a file opening per file. Larger tables are read again by each pass (keeping a
#: million rows cost more than a second read of local files: bench/README.md).
CACHE_ROWS = 200_000


def _frame(spark: SparkSession, plan: Plan, table: str, writer: str = "shadow") -> Pinned:
    snaps, current, tbl = tables.snapshots(plan, table)
    if tbl is None:
        raise UsageError(f"table {table} does not exist in catalog {plan.spec.catalog.name}",  # type: ignore[union-attr]
                         fix="check tables[] in the plan; the new table is written by `cutover shadow`")
    reader = spark.read if current is None else spark.read.option("snapshot-id", str(current))
    props = tables.properties_of(tbl)
    raw = reader.table(tables.qualified(plan, table))
    df = platforms.flatten(raw, writer)
    if _rows(snaps, current) <= CACHE_ROWS:
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
    return Pinned(df, current, stamps.latest(snaps, current, table, props),
                  eras.spans(eras.notes(snaps, current, props)), raw)


def _rows(snaps: list[stamps.Snapshot], current: int | None) -> float:
    """The table's rows at `current` by its summary (0 when empty; infinite when the summary does not say)."""
    if current is None:
        return 0
    summary = next((s.summary for s in snaps if s.snapshot_id == current), {})
    total = summary.get("total-records")
    return int(total) if total is not None and str(total).isdigit() else float("inf")


def _columns(df: DataFrame) -> list[Column_]:
    return [Column_(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields]


def _pair(spark: SparkSession, plan: Plan, pair: TablePair, opts: Options,
          runner: quality.Runner | None) -> TableResult:
    started = time.monotonic()
    old_pin, new_pin = _frame(spark, plan, pair.old), _frame(spark, plan, pair.new, pair.new_writer)
    try:
        return _compare(spark, plan, pair, opts, runner, old_pin, new_pin, started)
    finally:
        old_pin.df.unpersist()
        new_pin.df.unpersist()


def _compare(spark: SparkSession, plan: Plan, pair: TablePair, opts: Options, runner: quality.Runner | None,
             old_pin: Pinned, new_pin: Pinned, started: float) -> TableResult:
    old_df, new_df = old_pin.df, new_pin.df
    oc = pair.old_offset_columns
    platform = pair.new_writer != "shadow"  # its table keeps no offsets: rows by key (or content) and partition
    mode: Mode = "offsets" if oc and not platform else "key" if pair.key else "content"
    ignore_old = {c.lower() for c in ([oc.partition, oc.offset, oc.topic, oc.timestamp] if oc else []) if c}
    kept: set[str] = set()  # Kafka metadata compared as content
    if platform and oc:  # each row's partition and timestamp compared as content, by key: the old table's columns,
        # the platform's metadata
        for theirs, ours in (("kafka_partition", oc.partition), ("kafka_timestamp", oc.timestamp)):
            if ours:
                new_df = new_df.withColumnRenamed(theirs, ours)
                kept.add(ours.lower())
    if platform:  # Kafka metadata a platform's table does not keep (an old table cutover's writer made has it)
        ignore_old |= set(tables.META_NAMES)
    skip = (ignore_old | _META) - kept
    old_cols, new_cols = _columns(old_df), _columns(new_df)
    old_names = {c.name.lower() for c in old_cols}
    kafka_only_new = {c.name.lower() for c in new_cols if c.name.startswith("kafka_")} - old_names
    schema = schema_diff(old_cols, new_cols, skip, (_META | kafka_only_new) - kept, set(pair.allow_narrowing))
    new_types = {c.name.lower(): c for c in new_cols}
    compared = [c for c in old_cols if c.name.lower() in new_types and c.name.lower() not in skip]
    if mode == "key":
        missing = [k for k in pair.key if k.lower() not in {c.name.lower() for c in compared}]
        if missing:
            raise UsageError(f"tables[{plan.spec.tables.index(pair)}].key: column(s) {', '.join(missing)} are not in "
                             f"both {pair.old} and {pair.new}", fix="name columns both tables have")

    def canon(df: DataFrame, own: dict[str, Column_], other: dict[str, Column_]) -> list[Any]:
        return [canonical(own[c.name.lower()].name, own[c.name.lower()].type, other[c.name.lower()].type)
                .alias(f"_c{i}") for i, c in enumerate(compared)]

    old_types = {c.name.lower(): c for c in old_cols}
    names = [c.name for c in compared]
    lag_note = None
    maps: dict[int, Any] = {}
    new_id: str | None = None
    if mode == "offsets":  # the maps and (for the window) the new cluster's id, asked side by side
        with ThreadPoolExecutor(1, thread_name_prefix="verify-cluster-id") as pool:
            asked = pool.submit(inspect.cluster_id, ClusterRef.of(plan, "new"), opts.timeout) \
                if old_pin.held.stamped else None
            maps = align.mirror_maps(plan, pair.topic, opts.timeout)
            new_id = asked.result() if asked is not None else None
        if not maps:
            lag_note = f"no mirror offset map for {pair.topic}: offsets compared as they are"
            log.warning("%s: %s", pair.new, lag_note)

    def normal(df: DataFrame, side: str) -> DataFrame:
        from pyspark.sql import functions as F

        own, other = (old_types, new_types) if side == "old" else (new_types, old_types)
        n = _normalize(df, canon(df, own, other), names, mode, pair, side=side)
        if side == "new" and maps:
            n = n.withColumn("_id", align.translate_column(spark, maps, F.col("_p"), F.col("_id")))
        return n

    old_n, new_n = normal(old_df, "old"), normal(new_df, "new")
    if old_pin.lines:  # a canonical table handed over: rows of both clusters
        old_n = align.qualify(spark, old_n, old_pin.lines, maps, new_n)
    window_fn = narrow = None
    if mode == "offsets":
        def window_fn(old_hi: dict[int, int], new_hi: dict[int, int]) -> dict[int, int]:
            return _window(old_pin.held, new_pin.held, old_hi, new_hi, maps, new_id)

        def narrow(ranges: align.Ranges) -> tuple[DataFrame | None, DataFrame | None]:
            """Each side read again with only the rows of these old-offset ranges, before they are normalized
            (None for the old side when it was handed over: its rows carry either cluster's offsets)."""
            assert oc is not None
            o = None if old_pin.lines else buckets(normal(old_df.where(align.within(
                oc.partition, oc.offset, align.merged(ranges))), "old"), mode)
            theirs = ranges if not maps else {
                p: [r for lo, hi in rs for r in align.new_ranges(maps.get(p), lo, hi)] for p, rs in ranges.items()}
            n = buckets(normal(new_df.where(align.within("kafka_partition", "kafka_offset", align.merged(theirs))),
                            "new"), mode)
            return o, n

    outcome = reconcile(buckets(old_n, mode), buckets(new_n, mode), mode, [c.name for c in compared],
                        opts.sample_size, window_fn, narrow)
    window = outcome.window
    suites = [runner.run(quality.load_suite(plan, name), df, table, side) for name in pair.checks
              for df, table, side in ((old_df, pair.old, "old"), (new_df, pair.new, "new"))] if runner else []
    fresh = _freshness(spark, plan, pair, old_pin, new_pin) if opts.freshness or platform else None
    return _result(plan, pair, mode, outcome, schema, suites, window, lag_note, started,
                   (old_pin.snapshot_id, new_pin.snapshot_id), fresh)


def _freshness(spark: SparkSession, plan: Plan, pair: TablePair, old_pin: Pinned, new_pin: Pinned,
               ) -> dict[str, Any]:
    """Each table's record-to-commit delay, p50 and p95 (verify/freshness.py), and what a platform's table
    cannot prove."""
    oc = pair.old_offset_columns
    old_time = _as_time(old_pin.raw, oc.timestamp) if oc and oc.timestamp else None
    new_time: Any = None
    if pair.new_writer != "shadow":
        new_time = platforms.record_time(pair.new_writer)
    elif "kafka_timestamp" in new_pin.raw.columns:
        new_time = _as_time(new_pin.raw, "kafka_timestamp")
    out: dict[str, Any] = {"old": freshness.measure(spark, tables.qualified(plan, pair.old), old_pin.raw, old_time,
                                    "the old table keeps no record timestamp: set tables[].old_offset_columns."
                                    "timestamp to its column").as_dict(),
           "new": freshness.measure(spark, tables.qualified(plan, pair.new), new_pin.raw, new_time,
                                    "the new table keeps no record timestamp (kafka_timestamp)").as_dict()}
    if pair.new_writer in platforms.CANNOT_PROVE:
        out["cannot_prove"] = platforms.CANNOT_PROVE[pair.new_writer]
    return out


def _as_time(df: DataFrame, column: str) -> Any:
    """A column of record times as a timestamp (a long counts milliseconds, as Kafka's do)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    field = next(f for f in df.schema.fields if f.name.lower() == column.lower())
    return F.timestamp_millis(F.col(field.name)) if isinstance(field.dataType, IntegralType) else F.col(field.name)


def _normalize(df: DataFrame, canon: list[Any], names: list[str], mode: Mode, pair: TablePair,
               side: str) -> DataFrame:
    """-> _p, _id, _h, _c0…: the frame `reconcile` compares."""
    from pyspark.sql import functions as F

    oc = pair.old_offset_columns
    if side == "old" and oc and oc.topic:
        df = df.where(F.col(oc.topic) == pair.topic)
    staged = df.select("*", *canon)
    cols = [F.col(f"_c{i}") for i in range(len(canon))]
    h = row_hash(cols)
    if side == "old" and oc and mode == "offsets":
        p, ident = F.col(oc.partition).cast("int"), F.col(oc.offset).cast("bigint")
    elif side == "new" and mode == "offsets":
        p, ident = F.col("kafka_partition").cast("int"), F.col("kafka_offset").cast("bigint")
    elif mode == "key":
        index = {n.lower(): i for i, n in enumerate(names)}
        p, ident = F.lit(-1), F.concat_ws("\u0001", *[F.col(f"_c{index[k.lower()]}").cast("string") for k in pair.key])
    else:
        p, ident = F.lit(-1), h
    return staged.select(p.cast("int").alias("_p"), ident.alias("_id"), h.alias("_h"), *cols)


def _window(old_held: stamps.TableOffsets, new_held: stamps.TableOffsets, old_highest: dict[int, int],
            new_highest: dict[int, int], maps: dict[int, Any], new_id: str | None) -> dict[int, int]:
    """Each side's position in old offsets: stamped in the table (carried back through the maps when
    stamped with the new cluster's), else its highest offset + 1."""
    def in_old(held: stamps.TableOffsets) -> dict[int, int]:
        if held.cluster_id != new_id:
            return dict(held.positions)
        return {p: align.new_position_in_old(maps.get(p), o) for p, o in held.positions.items()}

    old_pos = in_old(old_held) if old_held.stamped else old_highest
    new_pos = {p: align.new_position_in_old(maps.get(p), o) for p, o in new_held.positions.items()} \
        if new_held.stamped else new_highest
    return align.window(old_pos, new_pos)


def _result(plan: Plan, pair: TablePair, mode: Mode, outcome: Any, schema: dict[str, Any],
            suites: list[dict[str, Any]], window: dict[int, int] | None, lag_note: str | None,
            started: float, snapshots: tuple[int | None, int | None],
            fresh: dict[str, Any] | None = None) -> TableResult:
    parts = []
    for p in sorted(outcome.partitions):
        pc = outcome.partitions[p]
        matched = max(pc.old_rows - pc.missing - pc.mismatched - pc.duplicates_old, 0)
        counts = Counts(pc.old_rows, pc.new_rows, matched, pc.missing, pc.extra, pc.mismatched,
                        pc.duplicates_old, pc.duplicates_new)
        offsets = mode == "offsets"
        parts.append(PartitionResult(p, counts, pc.min_id if offsets else None, pc.max_id if offsets else None,
                                     window.get(p) if window else None, pc.old_ahead, pc.new_ahead))
    total = Counts(**{k: sum(getattr(x.counts, k) for x in parts) for k in COUNT_KEYS})
    lag = Lag(sum(x.old_ahead for x in parts), sum(x.new_ahead for x in parts), lag_note)
    g = plan.spec.gates
    gates = {
        "max_missing_rows": Gate(g.max_missing_rows, total.missing),
        "max_extra_rows": Gate(g.max_extra_rows, total.extra),
        "max_mismatched_rows": Gate(g.max_mismatched_rows, total.mismatched),
        "max_duplicate_rows": Gate(g.max_duplicate_rows, total.duplicates_old + total.duplicates_new),
        "max_lag_rows.old_ahead": Gate(g.max_lag_rows.old_ahead, lag.old_ahead),
        "max_lag_rows.new_ahead": Gate(g.max_lag_rows.new_ahead, lag.new_ahead),
    }
    passed = all(x.passed for x in gates.values()) and schema["passed"] and all(s["success"] for s in suites)
    return TableResult(pair.new, pair.old, pair.topic, mode, passed, total, gates, schema, suites, tuple(parts),
                       outcome.samples, lag, {**outcome.cost, "seconds": round(time.monotonic() - started, 1)},
                       *snapshots, fresh)


def record(plan: Plan, table: str, summary: LastVerify) -> None:
    """Keep the last result on the new table itself, where promote reads it."""
    _snaps, _current, tbl = tables.snapshots(plan, table)
    for attempt in range(5):
        try:
            with tbl.transaction() as tx:
                tx.set_properties({RESULT_PROPERTY: summary.to_property()})
            return
        except Exception as exc:  # a concurrent commit (the shadow writing): reload and try again
            if attempt == 4:
                raise
            log.info("recording the verify result on %s: %s; retrying", table, exc)
            _snaps, _current, tbl = tables.snapshots(plan, table)


def last_result(plan: Plan, table: str) -> LastVerify | None:
    """The last verify result recorded on a table (None when it was never verified)."""
    _snaps, _current, tbl = tables.snapshots(plan, table)
    raw = tbl.properties.get(RESULT_PROPERTY) if tbl is not None else None
    return LastVerify.from_property(raw) if raw else None
