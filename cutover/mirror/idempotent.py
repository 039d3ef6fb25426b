"""The mirror's idempotent mode (plan `mirror.mode: idempotent`), for a target without transactions.

A target such as Tansu 0.6 has no EndTxn: records and progress cannot be written in one
transaction. This copier keeps the mirror exactly once without one, by a write-ahead intent
and a recovery by content:

1. the intent: per partition the batch writes, where its source progress stands, the target
   partition's end (high watermark) and how many records follow, written to the progress
   topic and acknowledged before any record is sent;
2. the records, by an idempotent producer: one producer session writes each record once, in
   order per partition;
3. the progress (a delta or a checkpoint), written once every record is acknowledged.

A process killed between 2 and 3 leaves records on the target beyond its progress. The next
process for the shard reads the intent first; for each partition whose progress is still the
intent's, it reads what landed on the target from the intent's end on and the source from the
progress on, pairs them in order and compares each pair field by field (key, value, headers,
timestamp). What landed is recorded as copied, never written again. A record there that is not
the source's next is another writer's: refused, naming both offsets. A batch whose writes fail
part-way is settled the same way at once, then the mirror stops (run it again to go on).

What it does not give: the broker fences no second process of one shard. A process finds a
successor's owner record at its next group sync and stops (mirror/runner.py); until then both
may write. Run one process per shard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from cutover.common import TP
from cutover.kafka.clients import ClusterRef, admin
from cutover.kafka.offsets import log_offsets
from cutover.mirror import state as st
from cutover.mirror.copier import Batch, Copier, RecordTooLarge, Written, _on_delivery, _written
from cutover.mirror.offsetmap import Gap, PartitionMap, segments

log = logging.getLogger("cutover.mirror")

_TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD}


class IdempotentCopier(Copier):
    """Copies like Copier, without transactions (see the module's docstring)."""

    _admin: AdminClient | None = None
    #: The producer of the state topics when they are on another cluster (plan mirror.state_cluster: old).
    _elsewhere: Producer | None = None

    def _writes(self) -> dict[str, Any]:
        if self.rt.state_on is not None:
            self._elsewhere = Producer(self.rt.state.config(**{"enable.idempotence": True, "acks": "all"}))
        return {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5}

    def _state(self, topic: str, key: bytes, value: bytes | None,
               on_delivery: Callable[[KafkaError | None, Message], None] | None = None) -> None:
        if self._elsewhere is None:
            return super()._state(topic, key, value, on_delivery)
        try:
            self._elsewhere.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        except KafkaException as exc:
            raise self.rt.state.failure(exc, "writing the mirror's progress", self._elsewhere) from None

    def _flush(self) -> None:
        super()._flush()
        if self._elsewhere is not None and self._elsewhere.flush(max(self.timeout, 120)) > 0:
            raise self.rt.state.failure(None, "waiting for the mirror's progress to be acknowledged", self._elsewhere)

    def init(self) -> None:
        """Nothing to fence: without transactions the broker fences no older process (see the docstring)."""

    def _end(self, empty: bool) -> None:
        """Nothing to end: the records and the progress were acknowledged in that order."""

    def assign(self, source_cluster: str, maps: dict[TP, PartitionMap], log: st.ShardLog | None = None,
               intent: Mapping[str, Any] | None = None) -> None:
        self._own(source_cluster, maps, log)
        if intent:
            self._recover(intent.get("p", []))
        self._start_reading(maps)

    def copy(self, max_records: int, max_bytes: int, max_seconds: float,
             until: Mapping[TP, int] | None = None) -> Batch:
        """Read a whole batch, then write it (its intent needs every partition's record count first)."""
        batch = self.read(max_records, max_bytes, max_seconds, until)
        self.commit(batch)
        return batch

    def commit(self, batch: Batch, sent: Any = None) -> int:
        self.writing = True
        try:
            return self._commit(batch.parts, batch.reached_all(), self._gaps(batch))
        finally:
            self.writing = False

    def _commit(self, parts: dict[TP, list[Message]], reached: dict[TP, int], gaps: dict[TP, Gap],
                sent: Any = None) -> int:
        messages, mapped = self._checked(parts, gaps)
        todo: dict[TP, int] = {}  # partition -> records to write
        for i, m in enumerate(messages):
            if i not in mapped:
                tp = _tp(m)
                todo[tp] = todo.get(tp, 0) + 1
        entries = self._intend(todo)
        results: list[tuple[int, int]] = list(mapped.items())
        failures: list[tuple[int, KafkaError]] = []
        for i, m in enumerate(messages):
            if i not in mapped:
                self._produce(m, _on_delivery(i, results, failures))
        self._flush()
        if failures:
            self._failed_part_way(messages, entries, failures)
        return self._record(_written(messages, results, mapped), reached, gaps, len(mapped))

    def _intend(self, todo: dict[TP, int]) -> list[list[Any]]:
        """Write and have acknowledged the intent of a batch writing `todo` (partition -> records)."""
        if not todo:
            return []
        ends = log_offsets(self.rt.target, todo, "high", self.timeout, self._client())
        entries = [[t, p, self.maps[(t, p)].next_src, ends[(t, p)], n] for (t, p), n in sorted(todo.items())]
        self._state(self.rt.progress_topic, *st.intent_record(self.source_cluster, str(self.shard), entries))
        self._flush()
        return entries

    def _failed_part_way(self, messages: list[Message], entries: list[list[Any]],
                         failures: list[tuple[int, KafkaError]]) -> None:
        """Some writes of the batch failed: record what landed (as a restart would), then stop, naming why."""
        index, err = min(failures, key=lambda f: f[0])
        landed = self._recover(entries)
        bad = messages[index]
        if err.code() in _TOO_LARGE:
            raise RecordTooLarge(
                f"{self.rt.target.describe()} refused the record at {bad.topic()} partition {bad.partition()} offset "
                f"{bad.offset()}: {err.str()}. The mirror stopped; the {landed} records of its batch that landed are "
                "recorded as copied",
                fix=f"raise max.message.bytes of topic {bad.topic()} on the {self.rt.target.name} cluster to at least "
                    "the source's, then run the mirror again")
        raise self.rt.target.failure(KafkaException(err), f"writing the record of {bad.topic()} partition "
                                     f"{bad.partition()} offset {bad.offset()} (the {landed} records of the batch that "
                                     "landed are recorded as copied; run the mirror again to go on)", self.producer)

    # -- settling what an unfinished batch wrote -------------------------------------

    def _recover(self, entries: list[list[Any]]) -> int:
        """Record as copied the records an unfinished batch (its intent's `entries`) left on the target beyond
        the progress, and mark the intent settled. Returns the records found."""
        written: dict[TP, Written] = {}
        reached: dict[TP, int] = {}
        mapped = 0
        for topic, partition, next_src, end, count in entries:
            tp = (topic, partition)
            pm = self.maps.get(tp)
            if pm is None or pm.next_src != next_src:
                continue  # not this shard's now, or its progress was recorded after the intent
            found = self._pair(tp, next_src, end, count)
            if found is None:
                continue
            pairs, copied, nbytes, maps_to = found
            written[tp] = Written(segments(pairs), copied, max(t for _s, t in pairs) + 1, nbytes)
            reached[tp] = pairs[-1][0] + 1
            mapped += maps_to
        landed = sum(w.records for w in written.values())
        if written:
            log.warning("a batch cut short left %d records on %s beyond the mirror's progress: each matched to its "
                        "source record, field by field, and recorded as copied (%s)", landed, self.rt.target.describe(),
                        ", ".join(f"{t}/{p}: {w.records}" for (t, p), w in sorted(written.items())))
            self._record(written, reached, {}, mapped)
        if entries:  # once its records are recorded, never again: later writes there are not this batch's
            self._state(self.rt.progress_topic, *st.intent_record(self.source_cluster, str(self.shard), []))
            self._flush()
        return landed

    def _pair(self, tp: TP, next_src: int, end: int, count: int) -> tuple[list[tuple[int, int]], int, int, int] | None:
        """The (source offset, target offset) pairs of the records the batch wrote to `tp` from target offset
        `end` on (at most `count`), with the opposite mirror's records mapped among them; records copied, their
        bytes, records mapped. None: nothing landed."""
        landed = list(_read(self.rt.target, tp, end, count, "read_uncommitted", self.timeout))
        if not landed:
            return None
        other = self.others.get(tp)
        pairs: list[tuple[int, int]] = []
        copied = nbytes = maps_to = 0
        for src in _read(self.rt.source, tp, next_src, None, "read_committed", self.timeout):
            origin = other.source_of(_off(src)) if other is not None else None
            if origin is not None:
                pairs.append((_off(src), origin))
                maps_to += 1
                continue
            tgt = landed[copied]
            if not _same(src, tgt):
                raise st.StateError(
                    f"{tp[0]} partition {tp[1]}: the record at offset {_off(tgt)} on {self.rt.target.describe()}, "
                    f"written after the mirror's progress, is not the source's record at offset {_off(src)} "
                    f"({_differs(src, tgt)}): another writer wrote to that partition while the mirror did",
                    fix="find that writer and stop it (before promote only the mirror writes to the new cluster's "
                        "mirrored topics); the partition's copy is not exact from that offset on")
            pairs.append((_off(src), _off(tgt)))
            copied += 1
            nbytes += len(src.value() or b"") + len(src.key() or b"")
            if copied == len(landed):
                break
        if copied < len(landed):
            raise st.StateError(f"{tp[0]} partition {tp[1]}: {len(landed) - copied} records written after the "
                                f"mirror's progress on {self.rt.target.describe()} have no source record left to be "
                                f"copies of (the source ends at offset {next_src + copied + maps_to})",
                                fix="check the source topic's history (deleted records?) and the target's writers")
        return pairs, copied, nbytes, maps_to

    def _client(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin(self.rt.target, warm_for=self.timeout)
        return self._admin


def _read(ref: ClusterRef, tp: TP, start: int, count: int | None, isolation: str,
          timeout: float) -> Iterator[Message]:
    """The records of `tp` from offset `start` (at most `count`) up to the partition's end when the read began."""
    consumer = Consumer(ref.config(**{
        "group.id": "cutover-mirror-settle", "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": isolation, "auto.offset.reset": "error"}))
    got = 0
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=timeout, cached=False)
        if start >= high:
            return
        consumer.assign([TopicPartition(tp[0], tp[1], start)])
        while count is None or got < count:
            msg = consumer.poll(timeout)
            if msg is None:
                raise ref.failure(None, f"reading {tp[0]} partition {tp[1]} from offset {start} (nothing arrived for "
                                  f"{timeout:.0f}s)", consumer)
            err = msg.error()
            if err is None:
                got += 1
                yield msg
                if _off(msg) + 1 >= high:
                    return
            elif err.code() == KafkaError._PARTITION_EOF:
                return
            else:
                raise ref.failure(KafkaException(err), f"reading {tp[0]} partition {tp[1]} from offset {start}",
                                  consumer)
    finally:
        consumer.close()


def _same(a: Message, b: Message) -> bool:
    return not _differs(a, b)


def _differs(a: Message, b: Message) -> str:
    """What differs between a source record and the target's (empty: nothing)."""
    for name, get in _FIELDS:
        if get(a) != get(b):
            return f"{name} differs"
    ts_type, ts = a.timestamp()
    if ts_type and b.timestamp()[1] != ts:
        return "timestamp differs"
    return ""


_FIELDS: tuple[tuple[str, Callable[[Message], Any]], ...] = (
    ("key", lambda m: m.key()), ("value", lambda m: m.value()), ("headers", lambda m: m.headers() or []))


def _tp(msg: Message) -> TP:
    return cast(str, msg.topic()), cast(int, msg.partition())


def _off(msg: Message) -> int:
    return cast(int, msg.offset())
