"""The exactly-once copier: read committed source records, write them and the mirror's
progress in one target transaction.

One transactional producer per shard (transactional id fixed per plan, direction and
shard) makes the target the single source of truth: a crash aborts the open
transaction, records and progress together, and a restart resumes at the committed
progress. Starting a second process for the same shard fences the first.
"""

from __future__ import annotations

import logging
import math
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, NamedTuple, NoReturn, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from cutover.common import TP
from cutover.errors import CutoverError
from cutover.mirror import state as st
from cutover.mirror.offsetmap import Gap, PartitionMap, Segment, SourceWentBack, out_of_range, segments
from cutover.mirror.shard import Shard

log = logging.getLogger("cutover.mirror")

_TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD}
_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


class Fenced(CutoverError):
    """Another process took over this shard's transactional id."""


class SourceTruncated(CutoverError):
    """The source log no longer reaches the mirror's position: it was recreated or truncated."""


def went_back(source: str, tp: TP, exc: Exception) -> SourceTruncated:
    return SourceTruncated(
        f"{tp[0]} partition {tp[1]}: {exc} on {source}. The topic was deleted and recreated, or an unclean leader "
        "election truncated it: the records the mirror copied up to its position are gone from the source, and "
        "what is there now is not what it copied. The mirror stopped and copied nothing again",
        fix="check the topic's history on the source (recreated? unclean.leader.election.enable? broker logs); "
            "to mirror the new topic from scratch, delete the target topic and use a new mirror.state_prefix")


class RecordTooLarge(CutoverError):
    """The target refused a record for its size; everything before it is committed."""


@dataclass
class Batch:
    #: Per partition, its records in offset order (a batch is written partition by partition).
    parts: dict[TP, list[Message]] = field(default_factory=dict)
    #: Bytes of the records' values (what bounds a batch).
    nbytes: int = 0
    #: Partition -> offset the consumer reached, from end-of-partition events (the records' own
    #: offsets count too: see `reached_all`).
    reached: dict[TP, int] = field(default_factory=dict)
    #: Partitions whose position fell below the log start (retention): tp -> the records lost.
    lost: dict[TP, Gap] = field(default_factory=dict)

    @property
    def messages(self) -> list[Message]:
        return [m for msgs in self.parts.values() for m in msgs]

    def touched(self) -> Iterable[TP]:
        """The partitions the batch read records of, reached the end of, or lost records of."""
        return chain(self.parts, self.reached, self.lost)

    def reached_all(self) -> dict[TP, int]:
        """Partition -> the offset after everything the batch read (records and end-of-partition events)."""
        out = dict(self.reached)
        for tp, msgs in self.parts.items():
            out[tp] = max(out.get(tp, 0), _off(msgs[-1]) + 1)
        return out


@dataclass
class Totals:
    records: int = 0
    #: Source records the opposite mirror wrote, mapped to their originals instead of copied.
    mapped: int = 0
    bytes: int = 0
    transactions: int = 0


def transactional_id(rt: st.Route, plan_name: str, shard: Shard) -> str:
    return f"{rt.prefix}.mirror.{rt.direction}.{plan_name}.shard-{shard.index}-of-{shard.count}"


class Copier:
    """Copies the assigned source partitions into the same partitions on the target."""

    def __init__(self, rt: st.Route, txn_id: str, shard: Shard, batch_size: int, compression: str = "none",
                 timeout: float = 30.0) -> None:
        self.rt, self.shard, self.txn_id, self.timeout = rt, shard, txn_id, timeout
        self.producer = Producer(rt.target.config(**{
            "acks": "all", "linger.ms": 10, "batch.size": batch_size, "compression.type": compression,
            "message.max.bytes": 1_000_000_000, **self._writes()}))
        self.consumer = Consumer(rt.source.config(**{
            "group.id": f"{txn_id}.reader", "enable.auto.commit": False, "enable.auto.offset.store": False,
            "isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "error",
            "queued.max.messages.kbytes": 262144, "fetch.queue.backoff.ms": 10}))
        self.maps: dict[TP, PartitionMap] = {}
        #: Mean value size of the last batch read (bounds the next batch's first read).
        self._mean_bytes = 0.0
        #: True while a batch is being written in its transaction (what a clean stop finishes).
        self.writing = False
        self.dirty: set[TP] = set()
        self.totals = Totals()
        self.source_cluster = ""
        self.writer: st.StateWriter | None = None
        #: Target topic -> max.message.bytes; a record over it is refused before it is sent (see _oversized).
        self.limits: dict[str, int] = {}
        #: Reads one target topic's max.message.bytes again (before refusing on a limit that may have changed).
        self.refresh_limit: Callable[[str], int] | None = None
        self._pending_groups: list[st.GroupSync] = []
        #: Other records of the progress topic (key, value) for the next transaction: the owner record.
        self._pending_notes: list[tuple[bytes, bytes]] = []
        #: The opposite direction's maps: a source record that mirror wrote is a copy of a target record,
        #: which this mirror maps to it instead of copying it back (see _copies).
        self.others: dict[TP, PartitionMap] = {}

    def _writes(self) -> dict[str, Any]:
        """The producer settings of this copier's way of writing: a transactional id."""
        return {"transactional.id": self.txn_id, "transaction.timeout.ms": 60_000}

    def init(self) -> None:
        """Fence older producers of this shard and abort their open transaction."""
        self._call(lambda: self.producer.init_transactions(self.timeout), "starting the transactional producer")

    def assign(self, source_cluster: str, maps: dict[TP, PartitionMap], log: st.ShardLog | None = None,
               intent: Mapping[str, Any] | None = None) -> None:
        """Own these partitions from the given points on; `log` is where this shard's state stands. (`intent`:
        the idempotent mode's, mirror/idempotent.py; a transaction leaves nothing beyond its progress.)"""
        self._own(source_cluster, maps, log)
        self._start_reading(maps)

    def _own(self, source_cluster: str, maps: dict[TP, PartitionMap], log: st.ShardLog | None) -> None:
        if self.writer is None:
            self.writer = st.StateWriter(self.rt, source_cluster, str(self.shard), log)
        self.source_cluster = source_cluster
        for tp, pm in maps.items():
            if tp not in self.maps:
                self.maps[tp] = pm
                self.dirty.add(tp)  # a new partition's starting point is progress too

    def _start_reading(self, maps: dict[TP, PartitionMap]) -> None:
        """Read these partitions from their progress on."""
        # Metadata first: librdkafka fetches a newly assigned topic it has no metadata for only after its
        # next scan for unknown topics (up to 1 s; about 0.3 to 0.5 s measured here).
        try:
            self.consumer.list_topics(timeout=self.timeout)
        except KafkaException as exc:  # the source went away between two reads: named, as every read is
            raise self.rt.source.failure(exc, "reading the new partitions' metadata", self.consumer) from None
        self.consumer.incremental_assign([TopicPartition(t, p, self.maps[(t, p)].next_src) for t, p in maps])

    def close(self) -> None:
        self.consumer.close()

    # -- reading -------------------------------------------------------------------

    def short_of(self, goal: Mapping[TP, int]) -> dict[TP, int]:
        """The partitions of `goal` (partition -> offset) whose committed progress is short of it."""
        return _short_of(goal, Batch(), self.maps)

    def drop_reached(self, left: dict[TP, int], batch: Batch) -> None:
        """Once `batch` is committed, drop from `left` (see `short_of`) the partitions it took to their goal."""
        _drop_reached(left, batch.touched(), Batch(), self.maps)

    def read(self, max_records: int, max_bytes: int, max_seconds: float,
             until: Mapping[TP, int] | None = None,
             on_chunk: Callable[[dict[TP, list[Message]]], bool] | None = None) -> Batch:
        """The next batch: up to `max_records` records or about `max_bytes` of values, read for at most
        `max_seconds`; with `until` (partition -> offset, a catch-up run's goal), ended as soon as every
        partition has reached its offset there, rather than waiting out the time for records that
        will not come. `on_chunk` takes each consume call's records per partition as they are read;
        when it returns False the batch ends there."""
        batch = Batch()
        parts, count = batch.parts, 0
        deadline = time.monotonic() + max_seconds
        todo = None if until is None else _short_of(until, batch, self.maps)
        while count < max_records and batch.nbytes < max_bytes and todo != {}:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # As many records as the bytes left allow at the mean size (this batch's, else the last one's;
            # a few while none is known): one call takes whatever the consumer has queued, up to 256 MB.
            mean = batch.nbytes / count if count else self._mean_bytes
            room = max(1, math.ceil((max_bytes - batch.nbytes) / mean)) if mean else 64
            # What follows each call costs what the call touched, not what the batch holds: with thousands
            # of partitions, a pass over all of them per call grew with partitions x records.
            chunk: dict[TP, list[Message]] = {}  # this call's records per partition
            events: list[TP] = []  # partitions an end-of-partition or offset-reset event moved on
            for msg in self.consumer.consume(min(10_000, max_records - count, room), min(left, 0.2)):
                if msg.error() is None:  # per record: only what must be (see the commit for the rest)
                    tp = (msg.topic(), msg.partition())
                    msgs = chunk.get(tp)  # type: ignore[arg-type]
                    if msgs is None:
                        chunk[tp] = msgs = []  # type: ignore[index]
                    msgs.append(msg)
                    batch.nbytes += len(msg)
                    count += 1
                else:
                    moved = self._event(msg, batch, chunk)
                    if moved is not None:
                        events.append(moved)
            for tp, msgs in chunk.items():
                had = parts.get(tp)
                if had is None:
                    parts[tp] = msgs[:]
                else:
                    had += msgs
            if todo:
                _drop_reached(todo, chain(chunk, events), batch, self.maps)
            if on_chunk is not None and chunk and not on_chunk(chunk):
                break
        if count:
            self._mean_bytes = batch.nbytes / count
        return batch

    def _event(self, msg: Message, batch: Batch, pending: Mapping[TP, list[Message]]) -> TP | None:
        """Take a consumer event into the batch (`pending`: the records the current call read before it, not
        in the batch yet); the partition it moved on, if any."""
        tp = _tp(msg)
        err = msg.error()
        assert err is not None
        if err.code() == KafkaError._PARTITION_EOF:
            batch.reached[tp] = max(batch.reached.get(tp, 0), _off(msg))
            return tp
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            low, high = self.consumer.get_watermark_offsets(TopicPartition(*tp), timeout=self.timeout, cached=False)
            position = batch.reached_all().get(tp, self.maps[tp].next_src)
            if tp in pending:
                position = max(position, _off(pending[tp][-1]) + 1)
            try:
                batch.lost[tp] = out_of_range(position, low, high) or Gap(position, position)
            except SourceWentBack as exc:
                raise went_back(self.rt.source.describe(), tp, exc) from None
            self.consumer.seek(TopicPartition(tp[0], tp[1], max(low, position)))
            return tp
        if err.fatal() or err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._AUTHENTICATION):
            raise self.rt.source.failure(KafkaException(err), "reading records", self.consumer)
        log.debug("source: %s", err.str())
        return None

    # -- writing -------------------------------------------------------------------

    def copy(self, max_records: int, max_bytes: int, max_seconds: float,
             until: Mapping[TP, int] | None = None) -> Batch:
        """Read a batch (see `read`) and write it, with the progress it makes, in one transaction, each
        consume call's records sent as soon as they are read: the target is written while the rest is
        read, and the commit waits only for the tail. Returns the batch."""
        if self.others:  # the opposite mirror's records are mapped, not copied: the whole batch first
            batch = self.read(max_records, max_bytes, max_seconds, until)
            self.commit(batch)
            return batch
        sent = _Sent()
        batch = self.read(max_records, max_bytes, max_seconds, until, lambda chunk: self._stream(chunk, sent))
        self.commit(batch, sent if sent.begun else None)
        return batch

    def _stream(self, chunk: dict[TP, list[Message]], sent: _Sent) -> bool:
        """Send a chunk of the batch being read in its transaction; False ends the batch here (a record the
        target is sure to refuse, or a transaction that must be aborted: the commit deals with either)."""
        self.writing = True
        try:
            self._send(chunk, sent)
        except _TooLarge as big:
            sent.too_large = big
        except _Abortable as exc:
            sent.abortable = exc
        return sent.too_large is None and sent.abortable is None

    def commit(self, batch: Batch, sent: _Sent | None = None) -> int:
        """Write the batch and the progress it makes in one transaction (`sent`: the batch's records
        were sent in it while it was read). Returns records copied."""
        gaps = self._gaps(batch)
        for attempt in range(1, 6):
            try:
                self.writing = True
                if sent is not None and sent.abortable is not None:
                    raise sent.abortable
                return self._commit(batch.parts, batch.reached_all(), gaps, sent)
            except _Abortable as exc:
                log.warning("transaction aborted (%s); retrying the same records (attempt %d)", exc, attempt)
                if self.writer is not None:
                    self.writer.aborted()
                self._call(lambda: self.producer.abort_transaction(self.timeout), "aborting a transaction")
                sent = None  # written again from its first record
            finally:
                self.writing = False
        raise CutoverError(f"the {self.rt.target.name} cluster aborted five transactions in a row",
                           fix="check the target brokers' health and logs, then run the mirror again")

    def record_groups(self, syncs: list[st.GroupSync]) -> None:
        """Remember group syncs; they are written with the next transaction."""
        self._pending_groups += syncs

    def note(self, record: tuple[bytes, bytes]) -> None:
        """Write this progress-topic record with the next transaction: only this shard's producer, unless fenced,
        can write it (the owner record: mirror/owner.py)."""
        self._pending_notes.append(record)

    def _gaps(self, batch: Batch) -> dict[TP, Gap]:
        gaps = {}
        for tp, gap in batch.lost.items():
            if gap.records > 0:
                log.error("DATA LOSS ON THE SOURCE: %s partition %d offsets %d..%d (%d records) were deleted by "
                          "retention on %s before they were mirrored", tp[0], tp[1], gap.start, gap.end - 1,
                          gap.records, self.rt.source.describe())
                gaps[tp] = gap
        return gaps

    def _copies(self, messages: list[Message]) -> dict[int, int]:
        """Index -> target offset of each record the opposite mirror wrote on the source: after a
        rollback the old cluster holds the reverse mirror's copies of records the new cluster has (and,
        after a second promote, the new cluster holds the forward mirror's). Those are mapped to the
        records they came from, never copied back.

        The map rises on both sides, so a copy must not follow a record copied to the target's end. If
        one does, someone wrote to the source while the other cluster was the active one: two writers
        and no exact order between them. Refused before anything is written, naming the offsets."""
        out: dict[int, int] = {}
        if not self.others:
            return out
        floor: dict[TP, tuple[int, int | None]] = {}  # tp -> (lowest target offset a copy may map to, last copied)
        for i, m in enumerate(messages):
            tp = _tp(m)
            other = self.others.get(tp)
            if other is None:
                continue
            least, copied = floor.get(tp, (self.maps[tp].next_tgt, None))
            origin = other.source_of(_off(m))
            if origin is None:
                floor[tp] = (1 << 62, _off(m))
            elif origin < least:
                raise CutoverError(
                    f"{self.rt.source.describe()} {tp[0]} partition {tp[1]}: offset {_off(m)} is the "
                    f"{'reverse' if self.rt.direction == 'forward' else 'forward'} mirror's copy of offset {origin} "
                    f"on the {self.rt.target.name} cluster, yet it comes after "
                    + (f"offset {copied}, a record written on the {self.rt.source.name} cluster while the clients "
                       f"used the {self.rt.target.name} cluster" if copied is not None else
                       f"this mirror's position there ({least})"),
                    fix="find the writer that ignored the switch; the two clusters disagree on the order of that "
                        "partition, so reconcile it by hand before mirroring it again")
            else:
                out[i] = origin
                floor[tp] = (origin + 1, copied)
        return out

    def _commit(self, parts: dict[TP, list[Message]], reached: dict[TP, int], gaps: dict[TP, Gap],
                sent: _Sent | None = None) -> int:
        written = self._write_ranges(parts, gaps, sent) if not self.others else None
        mapped: dict[int, int] = {}
        if written is None:  # every record's target offset, one callback each
            messages, mapped = self._checked(parts, gaps)
            results: list[tuple[int, int]] = [(i, tgt) for i, tgt in mapped.items()]  # (index, target offset)
            failures: list[tuple[int, KafkaError]] = []
            self._call(self.producer.begin_transaction, "beginning a transaction")
            for i, msg in enumerate(messages):
                if i not in mapped:
                    self._produce(msg, _on_delivery(i, results, failures))
            self._flush()
            if failures:
                return self._failed(messages, reached, gaps, failures)
            written = _written(messages, results, mapped)
        return self._record(written, reached, gaps, len(mapped))

    def _checked(self, parts: dict[TP, list[Message]], gaps: dict[TP, Gap]) -> tuple[list[Message], dict[int, int]]:
        """The batch's records in write order and those the opposite mirror wrote (see `_copies`), once none is
        too large for the target (else the records before the first that is are committed, and it stops)."""
        messages = [m for msgs in parts.values() for m in msgs]
        mapped = self._copies(messages)
        oversized = self._oversized(messages, mapped)
        if oversized is not None:
            index, limit = oversized
            self._stop_before(messages, gaps, index, f"it is larger than the topic's max.message.bytes ({limit})")
        return messages, mapped

    def _record(self, written: dict[TP, Written], reached: dict[TP, int], gaps: dict[TP, Gap], mapped: int) -> int:
        """Write the progress the records `written` make (and the pending group syncs and notes), end the
        transaction and take that progress as the maps'. Returns records copied."""
        updates = self._updates(written, reached, gaps)
        if not updates and not self._pending_groups and not self._pending_notes:
            self._end(empty=True)
            return 0
        writer = self.writer
        assert writer is not None
        after = None
        if updates and writer.due(self.maps):
            after = self._after(updates)
            self._checkpoint(writer, after)
        elif updates:
            self._state(*writer.delta(updates))
        for sync in self._pending_groups:
            self._state(self.rt.progress_topic, *st.group_record(self.source_cluster, sync))
        for key, value in self._pending_notes:
            self._state(self.rt.progress_topic, key, value)
        self._flush()
        try:
            self._end(empty=False)
        except BaseException:
            writer.aborted()
            raise
        writer.committed()
        if after is not None:
            self.maps.update(after)
        else:
            for tp, (pm, segs) in updates.items():
                pm.replace(*self.maps[tp].arrays())
                pm.add(segs)
                self.maps[tp] = pm
        self.dirty.clear()
        self._pending_groups, self._pending_notes = [], []
        copied = sum(w.records for w in written.values())
        self.totals.records += copied
        self.totals.mapped += mapped
        self.totals.bytes += sum(w.bytes for w in written.values())
        self.totals.transactions += 1
        return copied

    def _end(self, empty: bool) -> None:
        """End the transaction: commit it, or abort an `empty` one (nothing to commit)."""
        if empty:
            self._call(lambda: self.producer.abort_transaction(self.timeout), "ending an empty transaction")
        else:
            self._call(lambda: self.producer.commit_transaction(self.timeout), "committing a transaction")

    def _write_ranges(self, parts: dict[TP, list[Message]], gaps: dict[TP, Gap],
                      sent: _Sent | None = None) -> dict[TP, Written] | None:
        """Write each partition's records in a new transaction (or settle those `sent` in it while the
        batch was read), learning only the target offsets of the first and last record each send of a
        partition's records. A transactional producer's records in one partition land in order, so when
        last - first + 1 is their count they filled exactly that range, and every record's target offset
        follows: no callback, pair or segment per record. None, with the transaction aborted, when a
        range has a hole (another writer's records in between, or a record that failed): the caller
        writes the batch again learning every offset."""
        if sent is None:
            sent = _Sent()
            try:
                self._send(parts, sent)
            except _TooLarge as big:
                sent.too_large = big
        if sent.too_large is not None:
            self._call(lambda: self.producer.abort_transaction(self.timeout), "aborting a transaction")
            messages = [m for msgs in parts.values() for m in msgs]
            index = next(i for i, m in enumerate(messages) if m is sent.too_large.msg)
            self._stop_before(messages, gaps, index,
                              f"it is larger than the topic's max.message.bytes ({sent.too_large.limit})")
        written = self._settle(parts, sent)
        if written is None:
            self._call(lambda: self.producer.abort_transaction(self.timeout), "aborting a transaction")
        return written

    def _send(self, parts: dict[TP, list[Message]], sent: _Sent) -> None:
        """Produce these records in the transaction (begun by the first send), asking for the delivery of
        each partition's first and last record only."""
        if not sent.begun:
            self._call(self.producer.begin_transaction, "beginning a transaction")
            sent.begun = True
        failed, produce = sent.failed, self.producer.produce
        for tp, msgs in parts.items():
            topic, partition = tp
            offsets = sent.seen.setdefault(tp, [])

            def note(err: KafkaError | None, m: Message, offsets: list[int] = offsets) -> None:
                if err is None:
                    offsets.append(_off(m))
                else:
                    failed.append(err)

            ends = cast(Callable[[KafkaError | None, Message], None], note)
            last, nbytes, limit = len(msgs) - 1, 0, self.limits.get(topic, 1 << 62)
            for j, m in enumerate(msgs):
                key, value, headers = m.key(), m.value(), m.headers()
                size = (len(key) if key else 0) + (len(value) if value else 0)
                if size + 68 > limit or headers:  # the least record batch it can take (see _oversized)
                    self._check_size(m, topic)
                ts_type, ts = m.timestamp()
                try:
                    produce(topic, value, key, partition, on_delivery=ends if j == 0 or j == last else None,
                            timestamp=ts if ts_type else 0, headers=headers)
                except BufferError:
                    self._produce(m, ends if j == 0 or j == last else None)
                except KafkaException as exc:
                    raise self._classify(exc.args[0], "writing a record") from None
                nbytes += size
            sent.asked[tp] = sent.asked.get(tp, 0) + min(len(msgs), 2)
            sent.sizes[tp] = sent.sizes.get(tp, 0) + nbytes

    def _settle(self, parts: dict[TP, list[Message]], sent: _Sent) -> dict[TP, Written] | None:
        """Wait for what was sent; per partition, its records' one target range (None: not one range)."""
        self._flush()
        if sent.failed:
            err = sent.failed[0]
            if err.code() in _FENCED or err.fatal():
                raise self._fenced(err)
            return None
        out = {}
        for tp, msgs in parts.items():
            got = sent.seen.get(tp, [])
            if len(got) != sent.asked.get(tp) or max(got) - min(got) != len(msgs) - 1:
                log.info("%s partition %d: the target offsets of this batch's %d records are not one range "
                         "(%s); writing it again with every offset", tp[0], tp[1], len(msgs), sorted(got))
                return None
            out[tp] = Written(_runs(msgs, min(got)), len(msgs), max(got) + 1, sent.sizes[tp])
        return out

    def _check_size(self, m: Message, topic: str) -> None:
        limit = self.limits.get(topic)
        if limit is not None and _least_batch(m) > limit:
            if self.refresh_limit is not None:
                self.limits[topic] = limit = self.refresh_limit(topic)
            if _least_batch(m) > limit:
                raise _TooLarge(m, limit)

    def _after(self, updates: dict[TP, tuple[PartitionMap, list[Segment]]]) -> dict[TP, PartitionMap]:
        """Every owned partition's state as it will be once this transaction commits (copies)."""
        out = {}
        for tp, old in self.maps.items():
            pm, segs = updates.get(tp, (old.progress(), []))
            src, tgt, length = old.arrays()
            pm.replace(array("q", src), array("q", tgt), array("q", length))
            pm.add(segs)
            out[tp] = pm
        return out

    def _checkpoint(self, writer: st.StateWriter, after: dict[TP, PartitionMap]) -> None:
        """The shard's whole state in this transaction, then the pointer to it (which needs its offset)."""
        offsets: list[int] = []
        for i, (topic, key, value) in enumerate(writer.checkpoint(after)):
            on_delivery = (lambda err, m: offsets.append(_off(m)) if err is None else None) if i == 0 else None
            self._state(topic, key, value, on_delivery)
        self._flush()
        if not offsets:
            raise _Abortable("the first part of the mirror's checkpoint was not acknowledged")
        for topic, key, value in writer.pointer(offsets[0]):
            self._state(topic, key, value)

    def _updates(self, written: dict[TP, Written], reached: dict[TP, int],
                 gaps: dict[TP, Gap]) -> dict[TP, tuple[PartitionMap, list[Segment]]]:
        """The progress each partition makes."""
        out = {}
        for tp in set(written) | set(reached) | set(gaps) | self.dirty:
            old = self.maps[tp]
            pm = old.progress()
            if tp in gaps:
                pm.gaps.append(gaps[tp])
                pm.next_src = max(pm.next_src, gaps[tp].end)
            w = written.get(tp)
            if w is not None:
                pm.next_tgt = max(pm.next_tgt, w.next_tgt)
                pm.records += w.records
            pm.next_src = max(pm.next_src, reached.get(tp, 0))
            if (pm.next_src, pm.next_tgt, len(pm.gaps)) != (old.next_src, old.next_tgt, len(old.gaps)) \
                    or tp in self.dirty:
                out[tp] = (pm, w.segments if w is not None else [])
        return out

    def _failed(self, messages: list[Message], reached: dict[TP, int], gaps: dict[TP, Gap],
                failures: list[tuple[int, KafkaError]]) -> int:
        index, err = min(failures, key=lambda f: f[0])
        if err.code() in _FENCED or err.fatal():
            raise self._fenced(err)
        if err.code() not in _TOO_LARGE:
            raise _Abortable(err.str())
        self._call(lambda: self.producer.abort_transaction(self.timeout), "aborting a transaction")
        self._stop_before(messages, gaps, index, err.str())

    def _oversized(self, messages: list[Message], mapped: dict[int, int]) -> tuple[int, int] | None:
        """The first record the target topic is sure to refuse for its size, and the topic's limit.

        Checked before sending: in a transaction, librdkafka only gives up on such a record
        when the transaction times out (a minute). The size counted is a lower bound of its
        record batch (61 bytes of batch header and 7 of record framing), so a record that
        could fit is never refused here; the limit is read again before refusing.
        """
        for i, m in enumerate(messages):
            if i in mapped:
                continue
            try:
                self._check_size(m, _tp(m)[0])
            except _TooLarge as big:
                return i, big.limit
        return None

    def _stop_before(self, messages: list[Message], gaps: dict[TP, Gap], index: int, why: str) -> NoReturn:
        """Commit the records before `index`, then stop: the target refuses the record at `index`."""
        bad = messages[index]
        before = {_tp(m): _off(m) + 1 for m in messages[:index]}
        before[_tp(bad)] = _off(bad)
        done = self._commit(_by_partition(messages[:index]), before, gaps) if index else 0
        size = len(bad.value() or b"") + len(bad.key() or b"")
        raise RecordTooLarge(
            f"{self.rt.target.describe()} refused the record at {bad.topic()} partition {bad.partition()} "
            f"offset {bad.offset()} ({size} bytes): {why}. The mirror stopped before it; "
            f"{done} records before it were committed",
            fix=f"raise max.message.bytes of topic {bad.topic()} on the {self.rt.target.name} cluster (and the "
                "brokers' message.max.bytes if needed) to at least the source's, then run the mirror again")

    def _produce(self, msg: Message, on_delivery: Callable[[KafkaError | None, Message], None] | None) -> None:
        ts_type, ts = msg.timestamp()
        kwargs: dict[str, Any] = {"partition": msg.partition(), "key": msg.key(), "value": msg.value(),
                                  "headers": msg.headers() or None, "on_delivery": on_delivery}
        if ts_type != 0:  # TIMESTAMP_NOT_AVAILABLE
            kwargs["timestamp"] = ts
        while True:
            try:
                self.producer.produce(_tp(msg)[0], **kwargs)
                return
            except BufferError:  # the queue is full: serve delivery reports (a fatal one, fenced, is named)
                self._call(lambda: self.producer.poll(0.05), "waiting for room in the producer's queue")
            except KafkaException as exc:
                raise self._classify(exc.args[0], "writing a record") from None

    def _state(self, topic: str, key: bytes, value: bytes | None,
               on_delivery: Callable[[KafkaError | None, Message], None] | None = None) -> None:
        try:
            self.producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        except KafkaException as exc:
            raise self._classify(exc.args[0], "writing the mirror's progress") from None

    def _flush(self) -> None:
        deadline = time.monotonic() + max(self.timeout, 120)
        while self._call(lambda: self.producer.flush(1.0), "waiting for acknowledgements") > 0:
            if time.monotonic() > deadline:
                raise self.rt.target.failure(None, "waiting for records to be acknowledged", self.producer)

    def _call(self, fn: Callable[[], Any], doing: str) -> Any:
        for _ in range(30):
            try:
                return fn()
            except KafkaException as exc:
                err = exc.args[0]
                if isinstance(err, KafkaError) and err.retriable() and not err.fatal():
                    log.info("retrying after a retriable error while %s: %s", doing, err.str())
                    try:
                        self.producer.poll(0.5)  # serve callbacks while backing off
                    except KafkaException as during:
                        raise self._classify(during.args[0], doing) from None
                    continue
                raise self._classify(err, doing) from None
            except SystemError as exc:
                # confluent-kafka 2.16: once flush() has raised a fatal error (fenced), delivery callbacks
                # still run with it set, and their first C call fails with SystemError (cause: the error).
                cause = exc.__cause__ or exc.__context__
                if isinstance(cause, KafkaException):
                    raise self._classify(cause.args[0], doing) from None
                raise
        raise self.rt.target.failure(None, doing, self.producer)

    def classified(self, exc: KafkaException, doing: str) -> Exception:
        """A client exception as cutover's error: Fenced when another process took the shard over."""
        return self._classify(exc.args[0] if exc.args else None, doing)

    def _classify(self, err: Any, doing: str) -> Exception:
        if isinstance(err, KafkaError):
            if err.code() in _FENCED or (err.fatal() and "fenced" in err.str().lower()):
                return self._fenced(err)
            if err.txn_requires_abort():
                return _Abortable(err.str())
        return self.rt.target.failure(KafkaException(err) if isinstance(err, KafkaError) else None, doing,
                                      self.producer)

    def _fenced(self, err: KafkaError) -> Fenced:
        return Fenced(f"the {self.rt.direction} mirror's shard {self.shard} was taken over by another mirror process "
                      f"(transactional id {self.txn_id}): this process stopped and wrote nothing more ({err.str()})",
                      fix="run each shard in exactly one process; the newer process carries on")


@dataclass
class _Sent:
    """What a transaction has been sent of a batch so far (see `Copier._send`)."""

    begun: bool = False
    #: Partition -> target offsets of the records whose delivery was asked for, as they are acknowledged.
    seen: dict[TP, list[int]] = field(default_factory=dict)
    #: Partition -> how many deliveries were asked for.
    asked: dict[TP, int] = field(default_factory=dict)
    #: Partition -> key and value bytes sent.
    sizes: dict[TP, int] = field(default_factory=dict)
    failed: list[KafkaError] = field(default_factory=list)
    #: A record the target is sure to refuse, met while sending (the batch ends before it is sent).
    too_large: _TooLarge | None = None
    #: A send that failed so that the transaction must be aborted (the batch is then written again).
    abortable: _Abortable | None = None


class _Abortable(Exception):
    """The open transaction must be aborted; the batch can be written again."""


class _TooLarge(Exception):
    """The target topic is sure to refuse this record for its size."""

    def __init__(self, msg: Message, limit: int) -> None:
        super().__init__(limit)
        self.msg, self.limit = msg, limit


def _on_delivery(i: int, results: list[tuple[int, int]],
                 failures: list[tuple[int, KafkaError]]) -> Callable[[KafkaError | None, Message], None]:
    def done(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failures.append((i, err))
        else:
            results.append((i, _off(msg)))
    return done


class Written(NamedTuple):
    """What one partition's records in a transaction did on the target."""

    segments: list[Segment]
    #: Records copied (the opposite mirror's records, mapped to their originals, not counted).
    records: int
    #: The target offset after the last record written or mapped.
    next_tgt: int
    #: Key and value bytes copied.
    bytes: int


def _short_of(until: Mapping[TP, int], batch: Batch, maps: Mapping[TP, PartitionMap]) -> dict[TP, int]:
    """The partitions of `until` that the reader has not reached yet: each read starts at the committed
    progress (a batch is committed before the next is read), and this batch reached on from there."""
    return {tp: end for tp, end in until.items() if _reached(tp, batch, maps) < end}


def _drop_reached(todo: dict[TP, int], touched: Iterable[TP], batch: Batch, maps: Mapping[TP, PartitionMap]) -> None:
    """`_short_of` kept up to date: only the partitions a consume call touched can have reached their end."""
    for tp in touched:
        end = todo.get(tp)
        if end is not None and _reached(tp, batch, maps) >= end:
            del todo[tp]


def _reached(tp: TP, batch: Batch, maps: Mapping[TP, PartitionMap]) -> int:
    """The source offset the reader has reached in a partition: the committed progress, then the batch's
    records, end-of-partition events and records lost to retention."""
    at = max(batch.reached.get(tp, 0), maps[tp].next_src if tp in maps else 0)
    msgs = batch.parts.get(tp)
    if msgs:
        at = max(at, _off(msgs[-1]) + 1)
    gap = batch.lost.get(tp)
    return at if gap is None else max(at, gap.end)


def _by_partition(messages: list[Message]) -> dict[TP, list[Message]]:
    out: dict[TP, list[Message]] = {}
    for m in messages:
        out.setdefault(_tp(m), []).append(m)
    return out


def _runs(msgs: list[Message], tgt: int) -> list[Segment]:
    """Segments of one partition's records written to target offsets tgt, tgt+1, ... in order."""
    first = _off(msgs[0])
    if _off(msgs[-1]) - first == len(msgs) - 1:  # no gap in the source offsets either: one segment
        return [Segment(first, tgt, len(msgs))]
    return segments((_off(m), tgt + i) for i, m in enumerate(msgs))  # compaction, transaction markers


def _written(messages: list[Message], results: list[tuple[int, int]], mapped: dict[int, int]) -> dict[TP, Written]:
    """Per partition, from every record's (index, target offset), in write order; `mapped` (index ->
    original's offset) names the opposite mirror's records among them (mapped, not copied)."""
    pairs: dict[TP, list[tuple[int, int]]] = {}
    copied: Counter[TP] = Counter()
    sizes: Counter[TP] = Counter()
    for i, tgt in sorted(results):
        m = messages[i]
        tp = _tp(m)
        pairs.setdefault(tp, []).append((_off(m), tgt))
        if i not in mapped:
            copied[tp] += 1
            sizes[tp] += len(m.value() or b"") + len(m.key() or b"")
    return {tp: Written(segments(p), copied[tp], p[-1][1] + 1, sizes[tp]) for tp, p in pairs.items()}


def _least_batch(msg: Message) -> int:
    """The fewest bytes a record batch holding only this record can take."""
    headers = 0
    for key, value in cast(list[tuple[str, bytes | None]], msg.headers() or []):
        headers += len(key) + len(value or b"")
    return 61 + 7 + len(msg.key() or b"") + len(msg.value() or b"") + headers


def _tp(msg: Message) -> TP:
    return cast(str, msg.topic()), cast(int, msg.partition())


def _off(msg: Message) -> int:
    return cast(int, msg.offset())
