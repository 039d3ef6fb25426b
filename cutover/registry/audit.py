"""`cutover registry audit`: every schema id the new cluster's records carry means the same schema on both
registries.

Reads the selected, registry-framed topics of one cluster (a sample spread over each
partition's retained range by default, every record with `--all`), collects the schema id
of each key and value, and checks each id against both registries: present on both, the
same schema (canonical form). Records that are not framed are failures too, named by topic,
partition and offset. Only the 5-byte headers are parsed, never a body.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import log_offsets
from cutover.output import progress
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import REGISTRY_FORMATS
from cutover.registry import sync as sync_mod
from cutover.registry.client import RegistryClient

#: Records read per partition when sampling, in this many windows spread over the retained range.
SAMPLE_PER_PARTITION = 2000
SAMPLE_WINDOWS = 10
#: Failures kept per kind, with their positions.
MAX_FAILURES = 20


@dataclass(frozen=True)
class Failure:
    kind: str  # not-framed | missing-on-old | missing-on-new | different | unknown-id
    text: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    schema_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "topic": self.topic, "partition": self.partition,
                "offset": self.offset, "schema_id": self.schema_id}


@dataclass
class AuditResult:
    cluster: ClusterSide
    mode: str
    #: topic -> "key"/"value" parts audited
    topics: dict[str, list[str]] = field(default_factory=dict)
    records: int = 0
    #: schema id -> records carrying it
    ids: Counter[int] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    #: failures beyond MAX_FAILURES per kind, counted only
    more_failures: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures

    def fail(self, failure: Failure) -> None:
        if sum(1 for f in self.failures if f.kind == failure.kind) >= MAX_FAILURES:
            self.more_failures[failure.kind] += 1
        else:
            self.failures.append(failure)

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "mode": self.mode, "passed": self.passed, "records": self.records,
                "topics": self.topics, "ids_checked": sorted(self.ids),
                "records_per_id": {str(k): v for k, v in sorted(self.ids.items())},
                "failures": [f.as_dict() for f in self.failures], "more_failures": dict(self.more_failures),
                "seconds": round(self.seconds, 2)}


def framed_topics(plan: Plan, old_registry: RegistryClient, topics: list[str]) -> dict[str, list[str]]:
    """The topics whose keys or values are framed: a table pair in a registry format, or a subject
    <topic>-key / <topic>-value on the old registry (TopicNameStrategy)."""
    out: dict[str, set[str]] = {}
    for pair in plan.spec.tables:
        if pair.topic in topics:
            if pair.format in REGISTRY_FORMATS:
                out.setdefault(pair.topic, set()).add("value")
            if pair.key_format in REGISTRY_FORMATS:
                out.setdefault(pair.topic, set()).add("key")
    subjects = set(old_registry.subjects())
    for t in topics:
        for part in ("key", "value"):
            if f"{t}-{part}" in subjects:
                out.setdefault(t, set()).add(part)
    return {t: sorted(parts) for t, parts in sorted(out.items())}


def ranges(start: int, end: int, full: bool) -> list[tuple[int, int]]:
    """The offset ranges read of a partition: all of it, or SAMPLE_WINDOWS windows spread over it."""
    if end <= start:
        return []
    if full or end - start <= SAMPLE_PER_PARTITION:
        return [(start, end)]
    width = SAMPLE_PER_PARTITION // SAMPLE_WINDOWS
    step = (end - start - width) / (SAMPLE_WINDOWS - 1)
    out = [(start + int(i * step), start + int(i * step) + width) for i in range(SAMPLE_WINDOWS)]
    return out


def scan(ref: ClusterRef, topics: dict[str, list[str]], full: bool, result: AuditResult, timeout: float) -> None:
    """Read the ranges and collect ids; headers only. Every partition is read at once (a sample: window by
    window), each paused at the end of its range; the inner loop only slices and counts 5-byte headers."""
    from cutover.kafka import inspect

    counts = inspect.partition_counts(ref, timeout)
    tps = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    starts, ends = log_offsets(ref, tps, "start", timeout), log_offsets(ref, tps, "end", timeout)
    planned = {tp: ranges(starts[tp], ends[tp], full) for tp in tps}
    consumer = Consumer(ref.config(**{
        "group.id": "cutover-registry-audit", "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest", "fetch.max.bytes": 64 << 20,
        "max.partition.fetch.bytes": 16 << 20, "queued.max.messages.kbytes": 262144, "fetch.wait.max.ms": 100}))
    headers: Counter[bytes] = Counter()
    try:
        for window in range(max((len(r) for r in planned.values()), default=0)):
            todo = {tp: r[window] for tp, r in planned.items() if window < len(r)}
            assigned = [TopicPartition(t, p, lo) for (t, p), (lo, _hi) in todo.items()]
            consumer.assign(assigned)
            consumer.resume(assigned)  # a partition paused at its last window's end stays paused across assign
            _read(ref, consumer, {tp: hi for tp, (_lo, hi) in todo.items()}, topics, result, headers, timeout)
            consumer.unassign()
    finally:
        consumer.close()
    for header, n in headers.items():
        result.ids[int.from_bytes(header[1:5], "big")] += n


def _read(ref: ClusterRef, consumer: Consumer, pending: dict[tuple[str, int], int], topics: dict[str, list[str]],
          result: AuditResult, headers: Counter[bytes], timeout: float) -> None:
    """Consume until every partition reached its range's end (`pending`: (topic, partition) -> end)."""
    deadline = time.monotonic() + timeout
    parts = {t: ("key" in p, "value" in p) for t, p in topics.items()}
    while pending:
        batch = consumer.consume(10_000, 0.1)
        if not batch:
            # A range may end in what read_committed never delivers (an aborted record, a transaction
            # marker) with an open transaction beyond it (no end-of-partition event): its position says.
            at = consumer.position([TopicPartition(t, p) for t, p in pending])
            for pos in at:
                if pos.offset >= 0 and pos.offset >= pending.get((pos.topic, pos.partition), 1 << 62):
                    _done(consumer, pending, (pos.topic, pos.partition))
            if not pending:
                break
            if time.monotonic() > deadline:
                raise ref.failure(None, f"reading {', '.join(f'{t}/{p}' for t, p in list(pending)[:5])}", consumer)
            continue
        deadline = time.monotonic() + timeout
        current: Any = None
        hi = -1
        want_key = want_value = False
        records = 0
        for msg in batch:
            err = msg.error()
            tp: Any = (msg.topic(), msg.partition())
            if tp != current:
                current = tp
                hi = pending.get(tp, -1)
                want_key, want_value = parts[tp[0]]
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise ref.failure(KafkaException(err), f"reading {tp[0]}/{tp[1]}", consumer)
                _done(consumer, pending, tp)
                continue
            offset: Any = msg.offset()
            if offset >= hi:  # past its range (or already done): not counted
                _done(consumer, pending, tp)
                continue
            records += 1
            # The value's and the key's checks are written out, not shared through a helper: this loop runs
            # once per record, and the audit's time is spent here; a helper would add a call per record.
            if want_value:
                v = msg.value()
                if v is not None:
                    h = v[:5]
                    if h[:1] == b"\x00" and len(h) == 5:
                        headers[h] += 1
                    else:
                        result.fail(Failure("not-framed", "value is not in the Confluent wire format", tp[0], tp[1],
                                            offset))
            if want_key:
                k = msg.key()
                if k is not None:
                    h = k[:5]
                    if h[:1] == b"\x00" and len(h) == 5:
                        headers[h] += 1
                    else:
                        result.fail(Failure("not-framed", "key is not in the Confluent wire format", tp[0], tp[1],
                                            offset))
            if offset + 1 >= hi:
                _done(consumer, pending, tp)
        result.records += records


def _done(consumer: Consumer, pending: dict[tuple[str, int], int], tp: tuple[str, int]) -> None:
    if pending.pop(tp, None) is not None:
        consumer.pause([TopicPartition(tp[0], tp[1])])


def first_positions(ref: ClusterRef, topics: dict[str, list[str]], schema_ids: set[int],
                    timeout: float) -> dict[int, tuple[str, int, int]]:
    """Where a failing id is first found (topic, partition, offset): read again, only for failures."""
    found: dict[int, tuple[str, int, int]] = {}
    if not schema_ids:
        return found
    from cutover.kafka import inspect
    from cutover.kafka.offsets import committed_records

    counts = inspect.partition_counts(ref, timeout)
    tps = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    starts = log_offsets(ref, tps, "start", timeout)
    ends = log_offsets(ref, tps, "end", timeout)
    for msg in committed_records(ref, [(t, p, starts[(t, p)]) for t, p in tps], "locating schema ids", timeout,
                                 group="cutover-registry-audit", until=ends):
        for data in (msg.value(), msg.key()):
            if data is not None and len(data) >= 5 and data[0] == 0:
                sid = int.from_bytes(data[1:5], "big")
                if sid in schema_ids and sid not in found:
                    found[sid] = (str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0))
        if len(found) == len(schema_ids):
            break
    return found


def check_ids(result: AuditResult, old: RegistryClient, new: RegistryClient) -> None:
    for sid in sorted(result.ids):
        a, b = old.schema(sid), new.schema(sid)
        if a is None and b is None:
            result.fail(Failure("unknown-id", f"schema id {sid} ({result.ids[sid]} record(s)) is on neither registry",
                                schema_id=sid))
        elif b is None:
            result.fail(Failure("missing-on-new", f"schema id {sid} ({result.ids[sid]} record(s)) is not on "
                                f"{new.describe()}: its consumers fail with 'Schema not found' (40403)",
                                schema_id=sid))
        elif a is None:
            result.fail(Failure("missing-on-old", f"schema id {sid} is on {new.describe()} but not on "
                                f"{old.describe()}: a rollback's consumers could not decode it", schema_id=sid))
        elif a.canonical() != b.canonical():
            result.fail(Failure("different", f"schema id {sid} means different schemas on the two registries: "
                                "consumers of the new cluster would decode with the wrong schema", schema_id=sid))


def audit(plan: Plan, side: ClusterSide = "new", full: bool = False, timeout: float = 30.0) -> AuditResult:
    started = time.monotonic()
    old, new = sync_mod.clients(plan, timeout)
    old.probe()
    new.probe()
    ref = ClusterRef.of(plan, side)
    topics = framed_topics(plan, old, sync_mod.topics_of(plan, side, timeout))
    result = AuditResult(side, "all" if full else "sample", topics)
    progress(f"registry audit: reading {len(topics)} topic(s) of the {side} cluster "
             f"({'every record' if full else 'a sample over each partition'})")
    scan(ref, topics, full, result, timeout)
    check_ids(result, old, new)
    bad = {f.schema_id for f in result.failures if f.schema_id is not None}
    where = first_positions(ref, topics, bad, timeout) if bad else {}
    result.failures = [Failure(f.kind, f.text, *where[f.schema_id], schema_id=f.schema_id)
                       if f.schema_id in where else f for f in result.failures]
    result.seconds = time.monotonic() - started
    return result


def render(result: AuditResult) -> str:
    lines = [f"registry audit of the {result.cluster} cluster ({result.mode}): {result.records:,} record(s), "
             f"{len(result.ids)} schema id(s) checked in {len(result.topics)} topic(s), {result.seconds:.1f}s"]
    for t, parts in result.topics.items():
        lines.append(f"  {t}: {' and '.join(parts)}")
    for f in result.failures:
        where = f" at {f.topic}/{f.partition} offset {f.offset}" if f.topic is not None else ""
        lines.append(f"  FAIL {f.kind}{where}: {f.text}")
    for kind, n in result.more_failures.items():
        lines.append(f"  ... and {n} more {kind} failure(s)")
    lines.append("  passed" if result.passed else "  FAILED")
    return "\n".join(lines)
