"""The mirror state's records (pure): deltas and checkpoints fold back to the same maps; where a read
starts; version 1."""

from __future__ import annotations

import json
import random
from array import array
from typing import Any

import pytest

from cutover.kafka.clients import ClusterRef
from cutover.mirror import state as st
from cutover.mirror.offsetmap import (
    Gap,
    PartitionMap,
    Segment,
)


def _messages(records: list[tuple[str, bytes, bytes | None]]) -> list[Any]:
    """State records as the reader gets them: key, value and offset, in order."""
    class Msg:
        def __init__(self, i: int, key: bytes, value: bytes | None) -> None:
            self._i, self._k, self._v = i, key, value

        def key(self) -> bytes:
            return self._k

        def value(self) -> bytes | None:
            return self._v

        def offset(self) -> int:
            return self._i

    return [Msg(i, k, v) for i, (_t, k, v) in enumerate(records)]


def test_a_checkpoint_and_the_deltas_after_it_fold_back_into_the_same_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state writer's records, read back in order, give every partition's exact map and progress."""
    rt = st.Route("forward", ClusterRef("old", {}), ClusterRef("new", {}), "__c")
    writer = st.StateWriter(rt, "C1", "0/1", None, min_checkpoint_bytes=2_000)
    monkeypatch.setattr(st, "PIECE_SEGMENTS", 40)  # several pieces per partition and parts per checkpoint
    rnd = random.Random(1)
    maps = {("t", p): PartitionMap(start_src=5 * p, next_src=5 * p, next_tgt=0) for p in range(3)}
    log: list[tuple[str, bytes, bytes | None]] = []
    checkpoints = 0
    for _txn in range(300):
        updates = {}
        for tp, pm in maps.items():
            if rnd.random() < 0.7:
                n, skip = rnd.randint(1, 4), rnd.choice([0, 0, 1, 3])  # source gaps: markers, aborted records
                new = pm.progress()
                segs = [Segment(pm.next_src + skip, pm.next_tgt, n)]
                new.next_src, new.next_tgt, new.records = pm.next_src + skip + n, pm.next_tgt + n + 1, pm.records + n
                updates[tp] = (new, segs)
        if not updates:
            continue
        if writer.due(maps):
            after = {}
            for tp, old in maps.items():
                pm, segs = updates.get(tp, (old.progress(), []))
                pm.replace(*(array("q", a) for a in old.arrays()))
                pm.add(segs)
                after[tp] = pm
            first = sum(1 for r in log if r[0] == rt.offsets_topic)  # the offset the first part gets
            log += writer.checkpoint(after)
            log += writer.pointer(first)
            checkpoints += 1
            maps = after
        else:
            log.append(writer.delta(updates))
            for tp, (pm, segs) in updates.items():
                pm.replace(*maps[tp].arrays())
                pm.add(segs)
                maps[tp] = pm
        writer.committed()
    assert checkpoints > 3
    state = st.MirrorState("C1")
    offsets = [r for r in log if r[0] == rt.offsets_topic]
    fresh = st._fold(state, _messages(offsets), rt, True, set())
    assert fresh == set(maps)
    for tp, pm in maps.items():
        got = state.partitions[tp]
        assert got.segments == pm.segments and got.records == pm.records == sum(s.length for s in pm.segments)
        assert (got.start_src, got.next_src, got.next_tgt) == (pm.start_src, pm.next_src, pm.next_tgt)
    lg = state.logs["0/1"]
    assert lg.partitions == set(maps) and (lg.deltas, lg.parts) == (writer.log.deltas, writer.log.parts)
    # reading only from the newest checkpoint gives the same maps: what a restart reads
    pointer = json.loads([v for t, k, v in log if t == rt.progress_topic][-1])
    tail = st.MirrorState("C1")
    st._fold(tail, _messages(offsets)[pointer["offset"]:], rt, True, set())
    assert {tp: pm.segments for tp, pm in tail.partitions.items()} == {tp: pm.segments for tp, pm in maps.items()}
    # and the folded deltas were tombstoned by the checkpoints that replaced them
    assert sum(1 for _t, k, v in log if v is None and b'"delta"' in k) > 0


def test_reading_starts_at_the_oldest_checkpoint_still_needed() -> None:
    a = {"offset": 100, "partitions": [["t", 0], ["t", 1]]}
    b = {"offset": 40, "partitions": [["t", 2]]}
    stale = {"offset": 7, "partitions": [["t", 1]]}  # an old layout's, superseded by a's for t/1
    assert st._start({"0/2": a, "1/2": b, "0/1": stale}, {}) == 40
    assert st._start({"0/2": a}, {("t", 5): {}}) == 0  # version 1 state nobody has checkpointed
    assert st._start({}, {}) == 0


def test_version_1_state_is_still_read_until_a_checkpoint_replaces_it() -> None:
    """State written by cutover before the checkpointed format: per-partition progress and segment records."""
    rt = st.Route("forward", ClusterRef("old", {}), ClusterRef("new", {}), "__c")
    v1 = {("t", 0): {"v": 1, "start_src": 0, "next_src": 9, "next_tgt": 10, "gaps": [[3, 4]], "shard": "0/1"},
          ("t", 1): {"v": 1, "start_src": 0, "next_src": 4, "next_tgt": 5, "gaps": [], "shard": "0/1"}}
    old_records = [(rt.offsets_topic, json.dumps(["segments", "C1", "t", 0, s[0]]).encode(),
                    json.dumps({"v": 1, "segments": [s]}).encode()) for s in ([0, 0, 3], [4, 4, 5])]
    old_records.append((rt.offsets_topic, json.dumps(["segments", "C1", "t", 1, 0]).encode(),
                        json.dumps({"v": 1, "segments": [[0, 0, 4]]}).encode()))
    writer = st.StateWriter(rt, "C1", "0/1", None)
    newer = PartitionMap(0, 6, 6, [Segment(0, 0, 4), Segment(4, 5, 1)])  # t/1 moved on, in version 2
    later = old_records + writer.checkpoint({("t", 1): newer})
    state = st.MirrorState("C1")
    fresh = st._fold(state, _messages(later), rt, True, set(v1))
    st._apply_v1(state, v1, fresh)
    t0, t1 = state.partitions[("t", 0)], state.partitions[("t", 1)]
    assert (t0.next_src, t0.next_tgt, t0.records, t0.gaps) == (9, 10, 8, [Gap(3, 4)])
    assert t0.translate(4) == 4 and t0.translate(3) == 4
    assert (t1.next_src, t1.next_tgt, t1.records) == (6, 6, 5) and t1.segments == newer.segments


def test_waiting_for_an_open_transaction_outlasts_a_broker_that_cannot_be_reached_for_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A rolling restart in the middle of the wait: one call's timeout passes without an answer (a CI run's
    promote stopped at sync-groups there), and the wait for the transaction goes on; the offsets are read
    again until the transaction is decided."""
    from cutover.errors import UnreachableError
    from cutover.kafka.clients import ClusterRef
    from cutover.mirror import state

    answers: list[Any] = [{("p", 0): 10}, UnreachableError("could not reach new"), UnreachableError("still"),
                          {("p", 0): 8}, {("p", 0): 10}]

    def log_offsets(_ref: Any, _tps: Any, which: str, *_a: Any) -> dict[tuple[str, int], int]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    monkeypatch.setattr(state, "log_offsets", log_offsets)
    monkeypatch.setattr(state.time, "sleep", lambda _s: None)
    assert state._stable_ends(ClusterRef("new", {}), ["p"], 1.0, None) == {"p": 10}
    assert answers == []
