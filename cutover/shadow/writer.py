"""One table's micro-batch commit: exactly once, because the table is the checkpoint.

Spark hands each micro-batch to `TableWriter.on_batch`. The writer reads the offsets
stamped in the table's current snapshot (fresh from the catalog), drops the records
already there, decodes the rest, and publishes the good rows in one Iceberg snapshot
whose summary carries the offsets (`cutover.lake.stamps`), as a compare-and-set on
that snapshot. In one pass (`_one_pass`), the rows are written to the run's branch in
the same Spark job that counts them (`Dataset.observe`), and main moves to a snapshot
of those files with the stamp (`tables.publish_written`); a batch that needs its counts
before it is written (new fields) takes two passes: counted into a cache, then written
from it with the stamp (`tables.publish`). A replayed batch, a restart from a lost checkpoint, a
retry after a commit whose outcome was unknown, and a second run writing the same table
all meet the same filter or lose the compare-and-set and retry, so no record lands twice
and none is skipped.

Dead letters go to `<table>_dead_letter` first, under its own stamped offsets; then the
main table commits, carrying the positions of the whole batch. A crash between the two
replays the batch: the dead-letter filter drops what it already holds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from cutover.errors import CutoverError, ExitCode, Refused, UnreachableError
from cutover.lake import sqltext, stamps, tables
from cutover.output import progress
from cutover.plan import Plan, TablePair
from cutover.shadow import ddl
from cutover.shadow.decode import ERROR, UNKNOWN, Decoder, Payload, dead_letters, table_rows
from cutover.shadow.decoders import decoder_for

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from cutover.kafka.clients import ClusterRef
    from cutover.shadow.metrics import ShadowMetrics

log = logging.getLogger("cutover.shadow")
T = TypeVar("T")


class BadRecord(CutoverError):
    """A record could not be decoded and the table's policy is to stop."""


class HandedOver(CutoverError):
    """The switch handed the table to a writer of the other cluster (promote's hand-over, rollback's
    hand-back): the end this run was running for, not a failure."""

    exit_code = ExitCode.CLOSED_BY_SWITCH


def handed_over(table: str, held: stamps.TableOffsets, cluster_id: str) -> HandedOver:
    return HandedOver(f"table {table} was handed over: its newest stamp is cluster {held.cluster_id}'s (run "
                      f"{held.run_id}), and this run reads cluster {cluster_id}, so it ends here, writing nothing more",
                      fix="nothing to do: this is how a writer ends at promote's hand-over or rollback's hand-back "
                          "(exit code 8, which the shipped systemd unit treats as done); the other cluster's writer "
                          "goes on")


class SchemaDrift(CutoverError):
    """Records carry fields the table does not have and the policy is to stop."""

    exit_code = Refused.exit_code


@dataclass
class Counters:
    batches: int = 0
    rows: int = 0
    dead_letters: int = 0
    replayed: int = 0
    #: batches counted before they were written (ONE_PASS_PARTITIONS; fields the table lacked; a new partition)
    two_pass: int = 0
    added_columns: list[str] = field(default_factory=list)
    #: seconds by phase (PHASES) over the run's committed batches
    phases: dict[str, float] = field(default_factory=dict)


#: Where a batch's time goes: the table's stamps read from the catalog; building the decoder (in two passes:
#: reading the batch from Kafka, decoding and counting it into a cache); the data files written to the run's
#: branch (in one pass: read, decoded and counted as they are written); the compare-and-set commit that moves
#: main with the stamp; the source's offsets read for the metrics' lag.
PHASES = ("status", "decode", "write", "commit", "lag")
#: The most partitions a topic may have for its batches to be written in one pass (four aggregates a partition).
ONE_PASS_PARTITIONS = 128


class Timer:
    """Seconds by phase of one batch: `with timer("decode"): ...`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - started

    def line(self) -> str:
        return ", ".join(f"{p} {self.seconds[p]:.2f}s" for p in PHASES if p in self.seconds)


@dataclass(frozen=True)
class BatchStats:
    """What one aggregation over a decoded batch says: enough to stamp, dead-letter and evolve."""

    #: partition -> (first, last) offset of every fresh record (good or bad)
    spans: dict[int, tuple[int, int]]
    #: partition -> (first, last) offset of the rows the table gets
    added: dict[int, tuple[int, int]]
    rows: int
    bad: int
    #: fields of good records that the table lacks (schema drift)
    unknown: list[str]
    #: the Kafka timestamp (epoch seconds) of the newest record the table gets
    newest: float | None = None

    @classmethod
    def of(cls, marked: DataFrame) -> BatchStats:
        from pyspark.sql import functions as F

        good = F.col(ERROR).isNull()
        aggs = [F.min("kafka_offset"), F.max("kafka_offset"), F.count(F.when(~good, 1)),
                F.min(F.when(good, F.col("kafka_offset"))), F.max(F.when(good, F.col("kafka_offset"))),
                F.count(F.when(good, 1)), F.max(F.when(good, F.col("kafka_timestamp").cast("double")))]
        if UNKNOWN in marked.columns:
            # only the rows with new fields are collected (an empty list per row of a million adds up)
            aggs.append(F.array_distinct(F.flatten(F.collect_list(F.when(good & (F.size(UNKNOWN) > 0),
                                                                          F.col(UNKNOWN))))))
        rows = marked.groupBy("kafka_partition").agg(*aggs).collect()
        unknown = sorted({n for r in rows for n in (r[8] if len(r) > 8 else None) or []})
        stamps_ = [r[7] for r in rows if r[7] is not None]
        return cls(spans={r[0]: (r[1], r[2]) for r in rows},
                   added={r[0]: (r[4], r[5]) for r in rows if r[6]},
                   rows=sum(r[6] for r in rows), bad=sum(r[3] for r in rows), unknown=unknown,
                   newest=max(stamps_) if stamps_ else None)

    @staticmethod
    def observers(partitions: int, drift: bool) -> list[Column]:
        """The aggregates `of_observed` reads, over partitions 0..partitions-1 (built once per writer: each
        Column is Py4J round trips)."""
        from pyspark.sql import functions as F

        good = f"{ERROR} IS NULL"
        aggs = [F.expr("count(1) AS n"), F.expr(f"count(CASE WHEN {good} THEN 1 END) AS good"),
                F.expr("max(kafka_partition) AS pmax"),
                F.expr(f"max(CASE WHEN {good} THEN CAST(kafka_timestamp AS DOUBLE) END) AS newest")]
        for p in range(partitions):
            at = f"kafka_partition = {p}"
            aggs += [F.expr(f"min(CASE WHEN {at} THEN kafka_offset END) AS a{p}"),
                     F.expr(f"max(CASE WHEN {at} THEN kafka_offset END) AS b{p}"),
                     F.expr(f"min(CASE WHEN {at} AND {good} THEN kafka_offset END) AS c{p}"),
                     F.expr(f"max(CASE WHEN {at} AND {good} THEN kafka_offset END) AS d{p}")]
        if drift:
            # as JSON text: an observed array comes back to Python as a bare Java object
            aggs.append(F.expr(f"to_json(array_distinct(flatten(collect_list(CASE WHEN {good} AND size({UNKNOWN}) > 0 "
                               f"THEN {UNKNOWN} END)))) AS unknown"))
        return aggs

    @classmethod
    def of_observed(cls, seen: Mapping[str, Any], partitions: int) -> BatchStats | None:
        """The stats from the `observers`' values; None when a record came from a partition past them."""
        if seen["n"] and seen["pmax"] >= partitions:
            return None
        spans = {p: (seen[f"a{p}"], seen[f"b{p}"]) for p in range(partitions) if seen[f"a{p}"] is not None}
        added = {p: (seen[f"c{p}"], seen[f"d{p}"]) for p in range(partitions) if seen[f"c{p}"] is not None}
        return cls(spans=spans, added=added, rows=seen["good"], bad=seen["n"] - seen["good"],
                   unknown=sorted(json.loads(seen.get("unknown") or "[]")), newest=seen["newest"])


@dataclass
class TableWriter:
    plan: Plan
    pair: TablePair
    cluster_id: str
    run_id: str
    on_bad_record: str
    payload: Payload
    commit_timeout: float
    #: the pair's format's decoder (a registry format's knows its registry; see decoders.decoder_for)
    decoder: Decoder | None = None
    counters: Counters = field(default_factory=Counters)
    busy: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None
    #: The table's newest stamped snapshot when this run began: --start-offsets may continue a table from
    #: another cluster's stamp; another cluster's stamp made since is the switch's hand-over.
    started_on: int | None = None
    #: `--metrics-port`: the shadow's Prometheus metrics, and the cluster read (for the lag)
    metrics: ShadowMetrics | None = None
    source: ClusterRef | None = None
    #: after each commit: the table's next offset per partition, and the dead letters' reasons
    positions: dict[int, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    #: the topic's partitions when the run began: a batch is read, decoded and written in one pass when it has
    #: this many or fewer (up to ONE_PASS_PARTITIONS), else counted first (0: always counted first)
    partitions: int = 0
    _observers: dict[bool, list[Column]] = field(default_factory=dict)
    #: the last attempt counted the batch before writing it
    two_passes: bool = False

    @property
    def table(self) -> str:
        return self.pair.new

    @property
    def branch(self) -> str:
        """The run's own branch, the staging side of each compare-and-set commit."""
        return "cutover_" + self.run_id.rsplit("-", 1)[-1]

    def on_batch(self, df: DataFrame, batch_id: int) -> None:
        """Spark's foreachBatch callback. Failures are kept for the main thread, then re-raised."""
        if self.stopping.is_set():
            return  # stopping: commit nothing more; the table's offsets say where to resume
        with self.busy:
            try:
                self._batch(df, batch_id)
            except BaseException as exc:
                self.failure = exc
                raise

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        m = self.metrics
        timer = Timer()
        # Retried while the catalog or storage fails; each attempt re-reads the offsets.
        try:
            stats = retrying(lambda: self._commit(df, timer), f"committing to table {self.table}",
                             self.commit_timeout,
                             failed=None if m is None else lambda: m.failures.labels(self.table).inc())
        except CutoverError:
            if m is not None:
                m.gave_up.labels(self.table).inc()
            raise
        if stats is None:
            return
        self.counters.batches += 1
        self.counters.two_pass += self.two_passes
        took = time.monotonic() - started
        if m is not None:
            with timer("lag"):
                self._observe(m, stats, took)
        for phase, seconds in timer.seconds.items():
            self.counters.phases[phase] = self.counters.phases.get(phase, 0.0) + seconds
        progress(f"{self.table}: batch {batch_id}: +{stats.rows:,} rows"
                 + (f", {stats.bad:,} dead-lettered" if stats.bad else "")
                 + f" ({stats.rows / took if took else 0:,.0f} rows/s; {timer.line()}), offsets "
                 + ", ".join(f"{p}:{a}..{b}" for p, (a, b) in sorted(stats.spans.items())))

    def _observe(self, m: ShadowMetrics, stats: BatchStats, took: float) -> None:
        m.committed(self.table, stats.rows, took, time.time(), stats.newest)
        m.dead_lettered(self.table, self.reasons)
        if self.source is not None:
            from cutover.kafka.offsets import log_offsets

            tps = [(self.pair.topic, p) for p in self.positions]
            starts, ends = log_offsets(self.source, tps, "start"), log_offsets(self.source, tps, "end")
            m.behind(self.table, self.pair.topic, self.positions, {p: o for (_t, p), o in starts.items()},
                     {p: o for (_t, p), o in ends.items()})

    def _commit(self, df: DataFrame, timer: Timer) -> BatchStats | None:
        """One attempt: filter by the table's offsets, decode, dead letters, append. None: nothing new."""
        with timer("status"):
            snaps, base, tbl = tables.snapshots(self.plan, self.table)
            main = stamps.latest(snaps, base, self.table, tables.properties_of(tbl))
        if main.stamped and main.cluster_id != self.cluster_id and main.snapshot_id != self.started_on:
            raise handed_over(self.table, main, self.cluster_id)  # the switch moved the table on meanwhile
        done = main.for_cluster(self.cluster_id)
        # As many tasks as the session has cores, not one a Kafka partition: a small batch's tasks cost more
        # than their records, and each task writes its own data file.
        fresh = df.where(_at_or_after(done)).coalesce(max(1, df.sparkSession.sparkContext.defaultParallelism))
        assert base is not None  # tables are created with a first (empty) snapshot
        self.two_passes = False
        if 0 < self.partitions <= ONE_PASS_PARTITIONS:
            finished, stats = self._one_pass(fresh, done, main, base, tbl, timer)
            if finished:
                return stats
            tbl = tables.load_table(self.plan, self.table)  # its branch as the one pass left it
        return self._two_passes(fresh, done, main, base, tbl, timer)

    def _one_pass(self, fresh: DataFrame, done: dict[int, int], main: stamps.TableOffsets, base: int, tbl: Any,
                  timer: Timer) -> tuple[bool, BatchStats | None]:
        """Read, decode and write the batch to the run's branch in one Spark job that also counts it
        (`Dataset.observe`); then the stamp from those counts, and main moved to a snapshot of the written files
        carrying it. (False, None): this batch takes two passes after all (records with fields the table lacks,
        from a partition added since the run began, or with a schema id the run has not seen); what it wrote
        stays on the branch, off main."""
        from pyspark.sql import Observation

        with timer("decode"):
            marked = self._mark(fresh, seen_only=True)
        drift = UNKNOWN in marked.columns
        if drift not in self._observers:
            self._observers[drift] = BatchStats.observers(self.partitions, drift)
        seen = Observation()
        observed = marked.observe(seen, *self._observers[drift])
        with timer("write"):
            tables.write_branch(fresh.sparkSession, self.plan, self.table, tbl, table_rows(observed, self.payload),
                                base, self.branch)
        stats = BatchStats.of_observed(seen.get, self.partitions)
        if stats is None or stats.unknown:
            return False, None
        if not stats.spans:
            self.counters.replayed += 1
            log.info("%s: batch already in the table; nothing to add", self.table)
            return True, None
        self.reasons = {}
        if stats.bad:  # the batch read and decoded again, for its bad records only
            again = self._mark(fresh, seen_only=True)
            self._dead_letter(again, stats.spans, stats.bad)
            if self.metrics is not None:
                self.reasons = _reasons(again)
        self.positions = stamps.advance(done, stats.spans)
        props = stamps.stamp(self.cluster_id, self.pair.topic, stats.added, self.positions, self.run_id,
                             main.dead_letter_rows + stats.bad)
        with timer("commit"):
            tables.publish_written(self.plan, self.table, base, self.branch, props)
        self.counters.rows += stats.rows
        self.counters.dead_letters += stats.bad
        return True, stats

    def _two_passes(self, fresh: DataFrame, done: dict[int, int], main: stamps.TableOffsets, base: int, tbl: Any,
                    timer: Timer) -> BatchStats | None:
        """The batch decoded into a cache and counted, then written from the cache with its stamp."""
        self.two_passes = True
        marked = self._mark(fresh).persist()
        try:
            with timer("decode"):
                stats = BatchStats.of(marked)
            if not stats.spans:
                self.counters.replayed += 1
                log.info("%s: batch already in the table; nothing to add", self.table)
                return None
            if stats.unknown:
                marked.unpersist()
                marked = self._drift(fresh, marked, stats).persist()
                stats = BatchStats.of(marked)
            self.reasons = {}
            if stats.bad:
                self._dead_letter(marked, stats.spans, stats.bad)
                if self.metrics is not None:
                    self.reasons = _reasons(marked)
            self.positions = stamps.advance(done, stats.spans)
            props = stamps.stamp(self.cluster_id, self.pair.topic, stats.added, self.positions,
                                  self.run_id, main.dead_letter_rows + stats.bad)
            tables.publish(fresh.sparkSession, self.plan, self.table, tbl, table_rows(marked, self.payload), props,
                           base, self.branch, timed=timer)
        finally:
            marked.unpersist()
        self.counters.rows += stats.rows
        self.counters.dead_letters += stats.bad
        return stats

    def _mark(self, records: DataFrame, seen_only: bool = False) -> DataFrame:
        if self.decoder is None:
            self.decoder = decoder_for(self.plan, self.pair)
        return self.decoder.mark(records, self.payload, seen_only)

    def _drift(self, records: DataFrame, marked: DataFrame, stats: BatchStats) -> DataFrame:
        from pyspark.sql import functions as F

        drifting = marked.where(F.col(ERROR).isNull() & (F.size(UNKNOWN) > 0))
        names = stats.unknown
        policy = self.pair.schema_drift
        if policy == "fail":
            first = drifting.orderBy("kafka_partition", "kafka_offset").first()
            assert first is not None
            raise SchemaDrift(f"topic {self.pair.topic} partition {first['kafka_partition']} offset "
                              f"{first['kafka_offset']}: field(s) {', '.join(names)} are not columns of table "
                              f"{self.table} (schema_drift: fail)",
                              fix="add the columns to the table, or set schema_drift to evolve or dead-letter")
        if policy == "dead-letter":
            reason = F.concat(F.lit("field(s) not in the table (schema_drift: dead-letter): "),
                              F.array_join(UNKNOWN, ", "))
            return marked.withColumn(ERROR, F.when(F.col(ERROR).isNull() & (F.size(UNKNOWN) > 0), reason)
                                     .otherwise(F.col(ERROR)))
        spark = records.sparkSession
        typed = getattr(self.decoder, "column_types", None)
        if typed is not None:  # a registry format: the types come from the schemas
            inferred = typed()
        else:
            sample = drifting.select(F.col("value").cast("string").alias("v")).limit(1000)
            inferred = {f.name: f.dataType.simpleString()
                        for f in spark.read.json(sample.rdd.map(lambda r: r[0])).schema}
        new = [(n, inferred.get(n, "string")) for n in names]
        ddl.add_columns(spark, self.plan, self.table, new)
        self.payload = payload_of(spark, self.plan, self.table)
        self.counters.added_columns += [n for n, _ in new]
        return self._mark(records)

    def _dead_letter(self, marked: DataFrame, spans: dict[int, tuple[int, int]], bad: int) -> None:
        from pyspark.sql import functions as F

        if self.on_bad_record == "fail":
            first = marked.where(F.col(ERROR).isNotNull()).orderBy("kafka_partition", "kafka_offset").first()
            assert first is not None
            raise BadRecord(f"topic {self.pair.topic} partition {first['kafka_partition']} offset "
                            f"{first['kafka_offset']}: {first[ERROR]} ({bad} bad record(s) in this batch; "
                            f"nothing of the batch was written to {self.table})",
                            fix="fix the producer or the table's schema, or run with --on-bad-record dead-letter")
        name = tables.dead_letter_name(self.table)
        snaps, base, tbl = tables.snapshots(self.plan, name)
        held = stamps.latest(snaps, base, name, tables.properties_of(tbl))
        done = held.for_cluster(self.cluster_id)
        rows = dead_letters(marked).where(_at_or_after(done, "kafka_partition", "kafka_offset"))
        added = {r[0]: (r[1], r[2]) for r in rows.groupBy("kafka_partition").agg(
            F.min("kafka_offset"), F.max("kafka_offset")).collect()}
        if not added:
            return  # an earlier attempt already wrote these dead letters
        props = stamps.stamp(self.cluster_id, self.pair.topic, added, stamps.advance(done, spans), self.run_id,
                              held.dead_letter_rows + bad)
        assert base is not None
        tables.publish(marked.sparkSession, self.plan, name, tbl, rows, props, base, self.branch)
        log.warning("%s: %d record(s) went to %s", self.table, bad, name)


def _reasons(marked: DataFrame) -> dict[str, int]:
    """Dead letters per reason: an error's text up to its first colon (its kind, not its details)."""
    from pyspark.sql import functions as F

    kinds = marked.where(F.col(ERROR).isNotNull()).groupBy(F.substring_index(F.col(ERROR), ":", 1)).count()
    return {str(r[0]): int(r[1]) for r in kinds.collect()}


def retrying(attempt: Callable[[], T], doing: str, timeout: float, failed: Callable[[], object] | None = None) -> T:
    """Run `attempt` again while the catalog or storage fails (any error but a cutover error that
    is not retryable), for up to `timeout` seconds; then raise the failure, named. `failed` is called
    at each failed attempt."""
    deadline = time.monotonic() + timeout
    delay = 0.5
    while True:
        failure: CutoverError
        try:
            return attempt()
        except CutoverError as exc:
            if not exc.retryable:
                raise
            failure, cause = exc, exc.message
        except Exception as exc:
            cause = _first_line(exc)
            failure = UnreachableError(f"{doing} failed for {timeout:.0f}s: {cause}",
                                       fix="check the catalog and the warehouse storage, then run the same "
                                           "command again: it resumes from the table's offsets")
        if failed is not None:
            failed()
        if time.monotonic() + delay > deadline:
            raise failure from None
        log.warning("%s failed (%s); retrying for up to %.0fs", doing, cause, deadline - time.monotonic())
        threading.Event().wait(delay)
        delay = min(delay * 2, 5.0)


def _at_or_after(done: Mapping[int, int], partition: str = "partition", offset: str = "offset") -> Any:
    """Rows at or past each partition's position (all rows of partitions without one), as SQL text: built
    from Column calls, it took a dozen Py4J round trips a partition, every batch."""
    return sqltext.per_partition(sqltext.quoted(partition),
                                 {p: f"{sqltext.quoted(offset)} >= {int(o)}" for p, o in done.items()}, "true")


def _first_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)  # py4j: the JVM's own message says what failed
    text = (str(java.toString()) if java is not None else str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def payload_of(spark: SparkSession, plan: Plan, table: str) -> Payload:
    return Payload.of_struct(spark.table(tables.qualified(plan, table)).schema)
