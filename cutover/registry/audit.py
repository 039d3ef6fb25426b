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
    """Read the ranges and collect ids; headers only."""
    from cutover.kafka import inspect

    counts = inspect.partition_counts(ref, timeout)
    tps = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    starts, ends = log_offsets(ref, tps, "start", timeout), log_offsets(ref, tps, "end", timeout)
    consumer = Consumer(ref.config(**{
        "group.id": "cutover-registry-audit", "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest", "fetch.max.bytes": 64 << 20,
        "max.partition.fetch.bytes": 16 << 20, "queued.max.messages.kbytes": 262144}))
    ids = result.ids
    try:
        for topic, partition in tps:
            parts = topics[topic]
            want_key, want_value = "key" in parts, "value" in parts
            for lo, hi in ranges(starts[(topic, partition)], ends[(topic, partition)], full):
                consumer.assign([TopicPartition(topic, partition, lo)])
                deadline = time.monotonic() + timeout
                at = lo
                while at < hi:
                    batch = consumer.consume(10_000, 0.5)
                    if not batch:
                        if time.monotonic() > deadline:
                            raise ref.failure(None, f"reading {topic}/{partition} at {at}", consumer)
                        continue
                    deadline = time.monotonic() + timeout
                    for msg in batch:
                        err = msg.error()
                        if err is not None:
                            if err.code() == KafkaError._PARTITION_EOF:
                                at = hi
                                break
                            raise ref.failure(KafkaException(err), f"reading {topic}/{partition}", consumer)
                        offset = int(msg.offset() or 0)
                        if offset >= hi:
                            at = hi
                            break
                        at = offset + 1
                        result.records += 1
                        if want_value:
                            v = msg.value()
                            if v is not None and len(v) >= 5 and v[0] == 0:
                                ids[int.from_bytes(v[1:5], "big")] += 1
                            elif v is not None:  # a tombstone carries no schema
                                result.fail(Failure("not-framed", "value is not in the Confluent wire format",
                                                    topic, partition, offset))
                        if want_key:
                            k = msg.key()
                            if k is not None and len(k) >= 5 and k[0] == 0:
                                ids[int.from_bytes(k[1:5], "big")] += 1
                            elif k is not None:
                                result.fail(Failure("not-framed", "key is not in the Confluent wire format",
                                                    topic, partition, offset))
                consumer.unassign()
    finally:
        consumer.close()


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
    for msg in committed_records(ref, [(t, p, starts[(t, p)]) for t, p in tps], "locating schema ids", timeout,
                                 group="cutover-registry-audit"):
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
