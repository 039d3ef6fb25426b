"""`cutover shadow status`: where each table stands, read from the table and the cluster.

Positions and freshness come from the offsets stamped in the table's snapshots (via
pyiceberg; no Spark), lag from the cluster. Lag counts committed records: a topic the
mirror writes ends in a transaction marker, which occupies an offset but holds no record,
so "end offset minus position" would never reach 0. When the gap is small the records
are counted exactly (read_committed); past `EXACT_UP_TO` offsets it is the offset
difference and `lag_exact` is false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cutover.common import iso_seconds
from cutover.kafka import inspect
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef
from cutover.kafka.offsets import committed_records, log_offsets
from cutover.lake import stamps, tables
from cutover.output import table
from cutover.plan import ClusterSide, Plan, select_pairs

EXACT_UP_TO = 20_000


def _seconds(ms: int | None) -> float | None:
    return ms / 1000 if ms else None


def committed_between(ref: ClusterRef, topic: str, partition: int, start: int, end: int,
                      timeout: float = DEFAULT_TIMEOUT) -> int:
    """How many committed records lie in [start, end) of one partition (aborted ones and markers do not count)."""
    if end <= start:
        return 0
    return sum(1 for _m in committed_records(ref, [(topic, partition, start)], f"counting {topic}/{partition}",
                                             timeout, until={(topic, partition): end}))


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    #: the next offset the table will take from this cluster (None: none taken yet)
    position: int | None
    end_offset: int
    lag: int
    #: whether `lag` counts committed records (True) or is the offset difference (False, far behind)
    lag_exact: bool

    @property
    def last_offset(self) -> int | None:
        return self.position - 1 if self.position else None

    def as_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "position": self.position, "last_offset": self.last_offset,
                "end_offset": self.end_offset, "lag": self.lag, "lag_exact": self.lag_exact}


@dataclass(frozen=True)
class TableStatus:
    table: str
    topic: str
    exists: bool
    cluster_id: str | None
    other_cluster: bool
    last_commit: str | None
    snapshot_id: int | None
    run_id: str | None
    dead_letters: int
    dead_letter_table: str
    dead_letter_last_commit: str | None
    partitions: tuple[PartitionLag, ...]

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "topic": self.topic, "exists": self.exists, "cluster_id": self.cluster_id,
                "other_cluster": self.other_cluster, "last_commit": self.last_commit, "snapshot_id": self.snapshot_id,
                "run_id": self.run_id, "lag": self.lag, "dead_letters": self.dead_letters,
                "dead_letter_table": self.dead_letter_table, "dead_letter_last_commit": self.dead_letter_last_commit,
                "partitions": [p.as_dict() for p in self.partitions]}


@dataclass(frozen=True)
class ShadowStatus:
    """Where each table of the parallel write path stands (`cutover shadow status -o json`)."""

    cluster: ClusterSide
    cluster_id: str
    tables: tuple[TableStatus, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "cluster_id": self.cluster_id, "tables": [t.as_dict() for t in self.tables]}


def status(plan: Plan, which: str | None = None, cluster: ClusterSide = "new",
           timeout: float = DEFAULT_TIMEOUT) -> ShadowStatus:
    ref = ClusterRef.of(plan, cluster)
    cid = inspect.cluster_id(ref, timeout)
    pairs = select_pairs(plan, which)
    counts = inspect.partition_counts(ref, timeout)
    out = []
    for pair in pairs:
        snaps, current, tbl = tables.snapshots(plan, pair.new)
        held = stamps.latest(snaps, current, pair.new, tables.properties_of(tbl))
        dead = tables.table_offsets(plan, tables.dead_letter_name(pair.new))
        own = held.for_cluster(cid)
        count = counts.get(pair.topic, 0)
        tps = [(pair.topic, p) for p in range(count)]
        ends = log_offsets(ref, tps, "end", timeout)
        starts = log_offsets(ref, tps, "start", timeout)
        parts = []
        for tp in tps:
            position = own.get(tp[1])
            begin: int = position if position is not None else starts[tp]
            gap = ends[tp] - begin
            exact = gap <= EXACT_UP_TO
            lag = committed_between(ref, tp[0], tp[1], begin, ends[tp], timeout) if exact else gap
            parts.append(PartitionLag(tp[1], position, ends[tp], lag, exact))
        out.append(TableStatus(
            pair.new, pair.topic, tbl is not None, held.cluster_id, bool(held.stamped and held.cluster_id != cid),
            iso_seconds(_seconds(held.committed_at_ms)), held.snapshot_id, held.run_id, held.dead_letter_rows,
            tables.dead_letter_name(pair.new), iso_seconds(_seconds(dead.committed_at_ms)), tuple(parts)))
    return ShadowStatus(cluster, cid, tuple(out))


def render(s: ShadowStatus) -> str:
    lines = []
    for t in s.tables:
        head = f"{t.table} <- {t.topic} ({s.cluster}): "
        if not t.exists:
            lines.append(head + "table does not exist yet")
            continue
        if t.other_cluster:
            head += f"offsets are from another cluster ({t.cluster_id}); "
        lines.append(head + f"lag {t.lag:,} records, last commit {t.last_commit or 'never'}, "
                     f"{t.dead_letters:,} dead letters in {t.dead_letter_table}")
        lines.append(table([[str(p.partition), "-" if p.last_offset is None else str(p.last_offset),
                             str(p.end_offset), f"{p.lag}" + ("" if p.lag_exact else " (offsets)")]
                            for p in t.partitions], ["partition", "last offset", "end offset", "lag"]))
    return "\n".join(lines)
