"""`cutover shadow`: Spark Structured Streaming from a cluster's topics into each pair's new table.

One streaming query per table, each from explicit start offsets that cutover decides
(the table's own stamped offsets by default), with a fresh Spark checkpoint per run:
the table, not the checkpoint, says where to resume. `until-caught-up` is Spark's
available-now trigger (everything up to the end offsets seen at start, in batches of at
most `spark.max_records_per_batch`); `follow` triggers every `spark.trigger_interval`
until asked to stop, then lets the batch in flight finish.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cutover.common import in_flight
from cutover.errors import CutoverError, Refused, UnreachableError, UsageError
from cutover.kafka import inspect
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef, admin, metadata
from cutover.kafka.java_client import java_properties
from cutover.kafka.offsets import log_offsets
from cutover.lake import eras, tables
from cutover.lake.stamps import TableOffsets
from cutover.output import progress
from cutover.plan import ClusterSide, Plan, TablePair, select_pairs
from cutover.plan.endpoint import Endpoint
from cutover.shadow import ddl
from cutover.shadow.decode import Payload
from cutover.shadow.decoders import decoder_for
from cutover.shadow.source import reader_options
from cutover.shadow.writer import TableWriter, handed_over, payload_of, retrying

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from cutover.shadow.metrics import ShadowMetrics

log = logging.getLogger("cutover.shadow")
EARLIEST = -2
#: How many records per partition a schema is inferred from when the plan declares none.
INFER_SAMPLE = 1000
#: A commit branch whose head is this old belongs to a run that died: dropped at start.
STALE_BRANCH_MS = 3_600_000


@dataclass(frozen=True)
class Options:
    mode: Literal["until-caught-up", "follow"] = "until-caught-up"
    cluster: ClusterSide = "new"
    #: a pair's topic or table (old or new name); None: every pair
    table: str | None = None
    start: Literal["table", "earliest"] = "table"
    #: topic -> partition -> offset; wins over `start` for the partitions it names
    start_offsets: dict[str, dict[int, int]] | None = None
    on_bad_record: Literal["dead-letter", "fail"] | None = None
    #: Write each pair's old (canonical) table instead of its new one: the table promote hands over.
    canonical: bool = False
    timeout: float = DEFAULT_TIMEOUT
    #: serve the shadow's Prometheus metrics there (shadow/metrics.py); None: nowhere
    metrics_at: Endpoint | None = None
    #: count into these metrics instead (a drill's, across its shadow runs); metrics_at is then not read
    metrics: ShadowMetrics | None = None


def targets(plan: Plan, which: str | None, canonical: bool) -> list[TablePair]:
    """The pairs to write, each with `new` naming the table written (the old one when canonical). A pair whose
    new table the new cluster's platform writes (tables[].new_writer) is not cutover's to write (its old table, the
    canonical one, is: the old pipeline's stand-in writes it with --canonical)."""
    pairs = select_pairs(plan, which)
    if canonical:  # the old (canonical) table, the old pipeline's, whoever writes the new one
        pairs = [dataclasses.replace(p, new_writer="shadow") for p in pairs]
    theirs = [p for p in pairs if p.new_writer != "shadow"]
    if theirs and (which is not None or len(theirs) == len(pairs)):
        p = theirs[0]
        raise UsageError(f"table {p.new} is written by the new cluster's platform (tables[].new_writer: "
                         f"{p.new_writer}): cutover shadow does not write it",
                         fix="leave the shadow out for this pair (verify reads the platform's table), or set "
                             "new_writer: shadow and name another new table")
    pairs = [p for p in pairs if p.new_writer == "shadow"]
    if not canonical:
        return pairs
    missing = [p.old for p in pairs if not tables.exists(plan, p.old)]
    if missing:
        raise UsageError(f"--canonical: table(s) {', '.join(missing)} do not exist; the canonical table is the "
                         "old pipeline's, and cutover does not create it", fix="check tables[].old in the plan")
    return [dataclasses.replace(p, new=p.old) for p in pairs]


@dataclass(frozen=True)
class TableRun:
    table: str
    topic: str
    batches: int
    rows: int
    dead_letters: int
    added_columns: tuple[str, ...]
    #: partition -> next offset, as stamped in the table for this run's cluster
    positions: dict[int, int]
    #: seconds by phase of a batch (writer.PHASES) over the run's committed batches
    phases: dict[str, float] = field(default_factory=dict)
    #: batches counted before they were written (writer.TableWriter._two_passes); the others took one pass
    two_pass_batches: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "topic": self.topic, "batches": self.batches, "rows": self.rows,
                "two_pass_batches": self.two_pass_batches,
                "dead_letters": self.dead_letters, "added_columns": list(self.added_columns),
                "positions": {str(p): o for p, o in sorted(self.positions.items())},
                "phases": {p: round(s, 3) for p, s in self.phases.items()}}


@dataclass(frozen=True)
class ShadowSummary:
    """What one shadow run wrote (`cutover shadow -o json`, README "The shadow")."""

    cluster: ClusterSide
    cluster_id: str
    run_id: str
    mode: str
    seconds: float
    tables: tuple[TableRun, ...]

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "cluster_id": self.cluster_id, "run_id": self.run_id, "mode": self.mode,
                "seconds": self.seconds, "tables": [t.as_dict() for t in self.tables]}


def run(plan: Plan, opts: Options, stop: threading.Event) -> ShadowSummary:
    from cutover.lake import spark as spark_mod
    from cutover.shadow.metrics import ShadowMetrics

    pairs = targets(plan, opts.table, opts.canonical)
    metrics = opts.metrics or (None if opts.metrics_at is None  # a port in use is named before a cluster is asked
                               else ShadowMetrics.serving(opts.metrics_at))
    ref = ClusterRef.of(plan, opts.cluster)
    cluster_id = inspect.cluster_id(ref, opts.timeout)
    partitions = _partitions(ref, [p.topic for p in pairs], opts.timeout)
    java_properties(ref.name, ref.properties)  # TLS files and SASL named now, not in an executor's log

    progress(f"starting Spark ({plan.spec.spark.master}) for {len(pairs)} table(s) from the {opts.cluster} cluster")
    spark = spark_mod.session(plan, f"cutover-shadow-{plan.name}")
    run_id = f"{plan.name}-{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    writers, queries, checkpoints = [], [], []
    try:
        for pair in pairs:
            writer, starting = _prepare(spark, plan, pair, ref, cluster_id, partitions[pair.topic], run_id, opts)
            writer.metrics, writer.source = metrics, ref
            if metrics is not None:
                metrics.writes(writer.table)
            checkpoint = _checkpoint(plan, pair.new, run_id)
            writers.append(writer)
            checkpoints.append(checkpoint)
            queries.append(_start(spark, plan, pair, ref, writer, starting, opts, checkpoint))
        _await(queries, writers, stop)
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
        for c in checkpoints:
            shutil.rmtree(c, ignore_errors=True)
        for w in writers:
            for name in (w.table, tables.dead_letter_name(w.table)):
                try:
                    tables.drop_branch(plan, name, w.branch)
                except Exception as exc:  # the catalog may be what failed; a later run drops it when stale
                    log.info("could not drop branch %s of %s: %s", w.branch, name, exc)
    return ShadowSummary(opts.cluster, cluster_id, run_id, opts.mode, round(time.monotonic() - started, 1),
                         tuple(_result(plan, w) for w in writers))


def _partitions(ref: ClusterRef, topics: list[str], timeout: float) -> dict[str, int]:
    client = admin(ref)
    meta = metadata(ref, client, timeout, "listing topics").topics
    missing = [t for t in topics if t not in meta]
    if missing:
        existing = sorted(t for t in meta if not t.startswith("_"))
        raise UsageError(f"topic(s) {', '.join(missing)} do not exist on {ref.describe()}",
                         fix="mirror them first (cutover mirror), or fix tables[].topic; topics there: "
                             + (", ".join(existing[:20]) or "none"))
    return {t: len(meta[t].partitions) for t in topics}


def _prepare(spark: SparkSession, plan: Plan, pair: TablePair, ref: ClusterRef, cluster_id: str, count: int,
             run_id: str, opts: Options) -> tuple[TableWriter, dict[int, int]]:
    where = f"{plan.file}: tables[topic={pair.topic}]"
    decoder = decoder_for(plan, pair, opts.cluster)

    def ready() -> None:  # each step is safe to repeat when the catalog failed or its answer was lost
        if tables.exists(plan, pair.new):
            ddl.first_snapshot(spark, plan, pair.new)
        else:
            from_registry = getattr(decoder, "registry_payload", None)
            payload = (from_registry(spark) if from_registry is not None else decoder.payload(_declared(pair))
                       or _infer(spark, pair, ref, count, opts.timeout))
            ddl.ensure(spark, plan, pair.new, payload, pair.partition_by, where)
        ddl.ensure_dead_letter(spark, plan, pair.new)

    retrying(ready, f"creating table {pair.new}", plan.spec.spark.commit_timeout)
    for name in (pair.new, tables.dead_letter_name(pair.new)):
        tables.drop_stale_branches(plan, name, STALE_BRANCH_MS)
    held = tables.table_offsets(plan, pair.new)
    starting = _starting(plan, pair, held, cluster_id, count, ref, opts)
    writer = TableWriter(plan=plan, pair=pair, cluster_id=cluster_id, run_id=run_id, decoder=decoder,
                         started_on=held.snapshot_id,
                         on_bad_record=opts.on_bad_record or pair.on_bad_record,
                         payload=payload_of(spark, plan, pair.new), commit_timeout=plan.spec.spark.commit_timeout,
                         partitions=count)
    return writer, starting


def _declared(pair: TablePair) -> Payload | None:
    if not pair.schema:
        return None
    return Payload(tuple((c.name, c.type, c.nullable) for c in pair.schema))


def _infer(spark: SparkSession, pair: TablePair, ref: ClusterRef, count: int, timeout: float) -> Payload:
    """A JSON payload schema inferred from the first records of each partition."""
    from pyspark.sql import functions as F

    tps = [(pair.topic, p) for p in range(count)]
    start, end = log_offsets(ref, tps, "start", timeout), log_offsets(ref, tps, "end", timeout)
    ending = {p: min(start[(pair.topic, p)] + INFER_SAMPLE, end[(pair.topic, p)]) for p in range(count)}
    if all(ending[p] <= start[(pair.topic, p)] for p in range(count)):
        raise Refused(f"table {pair.new}: the plan declares no schema and topic {pair.topic} on {ref.describe()} "
                      "has no records to infer one from", fix=f"declare tables[].schema for {pair.topic}")
    options = reader_options(ref.name, ref.properties, pair.topic, {p: EARLIEST for p in range(count)}, 1)
    options.pop("maxOffsetsPerTrigger")
    options["endingOffsets"] = json.dumps({pair.topic: {str(p): o for p, o in ending.items()}})
    values = spark.read.format("kafka").options(**options).load().where(F.col("value").isNotNull())
    inferred = spark.read.json(values.select(F.col("value").cast("string")).rdd.map(lambda r: r[0])).schema
    fields = [f for f in inferred.fields if f.name != "_corrupt_record"]
    if not fields:
        raise Refused(f"table {pair.new}: no JSON object fields found in the first records of {pair.topic}",
                      fix=f"declare tables[].schema for {pair.topic}, or use format raw or text")
    payload = Payload(tuple((f.name, f.dataType.simpleString(), True) for f in fields))
    progress(f"{pair.new}: inferred payload columns from {pair.topic}: {payload.ddl()}")
    return payload


def _starting(plan: Plan, pair: TablePair, held: TableOffsets, cluster_id: str, count: int, ref: ClusterRef,
              opts: Options) -> dict[int, int]:
    """Where each partition starts; refusals when the table's offsets do not belong to this cluster."""
    explicit = (opts.start_offsets or {}).get(pair.topic, {})
    if held.stamped and held.cluster_id != cluster_id and not explicit and opts.start == "table":
        if eras.K_HANDOVERS in tables.properties_of(tables.load_table(plan, pair.new)):
            raise handed_over(pair.new, held, cluster_id)  # a supervised writer restarted after the switch
        raise Refused(f"table {pair.new} holds offsets of cluster {held.cluster_id}, but this run reads "
                      f"{ref.describe()} (cluster {cluster_id})",
                      fix="pass --start-offsets with the translated positions (cutover offsets translate), or "
                          "--start earliest to read this cluster from its beginning")
    if not held.stamped and opts.start == "table" and not explicit and _has_rows(plan, pair.new):
        raise Refused(f"table {pair.new} has rows but no cutover offsets, so cutover cannot tell where it stands",
                      fix="pass --start-offsets, or --start earliest if the table should get every record")
    own = held.for_cluster(cluster_id)
    base = {p: EARLIEST for p in range(count)} if opts.start == "earliest" else {
        p: own.get(p, EARLIEST) for p in range(count)}
    starting = {**base, **{p: o for p, o in explicit.items() if p < count}}
    for p, o in explicit.items():
        if p >= count:
            raise UsageError(f"--start-offsets: {pair.topic} has no partition {p} ({count} partitions)",
                             fix="name partitions 0..{count - 1}")
        if own.get(p, 0) > o:
            log.warning("%s: partition %d starts at %d, but the table already holds up to %d; "
                        "records it holds are skipped", pair.new, p, o, own[p])
    _check_retention(pair, ref, starting, opts.timeout)
    progress(f"{pair.new}: starting at " + ", ".join(
        f"{p}:{'earliest' if o == EARLIEST else o}" for p, o in sorted(starting.items())))
    return starting


def _has_rows(plan: Plan, table: str) -> bool:
    _snaps, current, tbl = tables.snapshots(plan, table)
    if tbl is None or current is None:
        return False
    summary = tbl.current_snapshot().summary
    return int((summary.additional_properties if summary else {}).get("total-records", "0")) > 0


def _check_retention(pair: TablePair, ref: ClusterRef, starting: dict[int, int], timeout: float) -> None:
    """A start below the log start means records were deleted before the table got them: say so."""
    positioned = {p: o for p, o in starting.items() if o >= 0}
    if not positioned:
        return
    first = log_offsets(ref, [(pair.topic, p) for p in positioned], "start", timeout)
    lost = {p: (o, first[(pair.topic, p)]) for p, o in positioned.items() if first[(pair.topic, p)] > o}
    if lost:
        raise CutoverError(
            f"DATA LOSS: table {pair.new} needs records that retention already deleted from {pair.topic} on "
            f"{ref.describe()}: " + ", ".join(f"partition {p} offsets {a}..{b - 1}" for p, (a, b) in lost.items()),
            fix="rebuild the table from a cluster that still holds them, or accept the loss with "
                "--start-offsets at the log start")


def _checkpoint(plan: Plan, table: str, run_id: str) -> Path:
    configured = plan.spec.spark.checkpoint_dir
    root = plan.base_dir / configured if configured else Path(tempfile.gettempdir()) / "cutover-checkpoints"
    return root / plan.name / table / run_id


def _start(spark: SparkSession, plan: Plan, pair: TablePair, ref: ClusterRef, writer: TableWriter,
           starting: dict[int, int], opts: Options, checkpoint: Path) -> StreamingQuery:
    options = reader_options(ref.name, ref.properties, pair.topic, starting, plan.spec.spark.max_records_per_batch)
    stream = spark.readStream.format("kafka").options(**options).load()
    writer_stream = (stream.writeStream.queryName(f"cutover-shadow-{pair.new}").foreachBatch(writer.on_batch)
                     .option("checkpointLocation", str(checkpoint)))
    if opts.mode == "until-caught-up":
        writer_stream = writer_stream.trigger(availableNow=True)
    else:
        writer_stream = writer_stream.trigger(processingTime=f"{plan.spec.spark.trigger_interval} seconds")
    return writer_stream.start()


def _await(queries: list[StreamingQuery], writers: list[TableWriter], stop: threading.Event) -> None:
    """Wait for every query; on a stop request let batches in flight finish, then stop the queries."""
    in_flight(stop, lambda: "the batch in flight" if any(w.busy.locked() for w in writers) else None)
    while any(q.isActive for q in queries):
        if stop.is_set():
            for w in writers:
                w.stopping.set()
            for w, q in zip(writers, queries, strict=True):
                with w.busy:  # the batch in flight, if any, has finished
                    pass
                q.stop()
            break
        failed = next((w for w, q in zip(writers, queries, strict=True) if w.failure or q.exception()), None)
        if failed is not None:
            break
        for q in queries:
            try:
                q.awaitTermination(1)
            except Exception:  # the query failed: reported below, with the writer's own error first
                break
    in_flight(stop, None)
    for w, q in zip(writers, queries, strict=True):
        if w.failure is not None:
            raise w.failure
        exc = q.exception()
        if exc is not None:
            raise UnreachableError(f"the shadow query of table {w.table} failed: {str(exc).splitlines()[0][:400]}",
                                   fix="see the Spark error above; run the same command again to resume from the "
                                       "table's offsets") from None


def _result(plan: Plan, w: TableWriter) -> TableRun:
    held = tables.table_offsets(plan, w.table)
    return TableRun(w.table, w.pair.topic, w.counters.batches, w.counters.rows, w.counters.dead_letters,
                    tuple(w.counters.added_columns), held.for_cluster(w.cluster_id), dict(w.counters.phases),
                    w.counters.two_pass)
