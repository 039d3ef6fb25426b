"""A catch-up read knows which partitions are still short of their goal, at a cost per consume call
that follows what the call touched, not every partition of the batch (pure)."""

from __future__ import annotations

import random

from confluent_kafka import Message

from cutover.common import TP
from cutover.mirror.copier import Batch, _drop_reached, _reached, _short_of
from cutover.mirror.offsetmap import Gap, PartitionMap


def _msg(tp: TP, offset: int) -> Message:
    return Message(topic=tp[0], partition=tp[1], offset=offset, value=b"v")


def test_the_reached_offset_is_the_furthest_of_progress_records_end_events_and_lost_records() -> None:
    a, b, c, d = ("t", 0), ("t", 1), ("t", 2), ("u", 0)
    maps = {a: PartitionMap(next_src=10), b: PartitionMap(next_src=10), c: PartitionMap(next_src=10)}
    batch = Batch(parts={a: [_msg(a, 10), _msg(a, 14)]}, reached={b: 12, a: 13}, lost={c: Gap(10, 30)})
    assert _reached(a, batch, maps) == 15  # its last record, past the end event
    assert _reached(b, batch, maps) == 12  # an end-of-partition event
    assert _reached(c, batch, maps) == 30  # records retention deleted count as read
    assert _reached(d, batch, maps) == 0  # not owned, nothing read
    assert _short_of({a: 15, b: 13, c: 30, d: 1}, batch, maps) == {b: 13, d: 1}


def test_keeping_the_goal_up_to_date_call_by_call_gives_what_a_full_pass_gives() -> None:
    """Random calls: records, end events and lost ranges on 300 partitions; after each call the partitions
    still short, kept from the touched ones only, equal a pass over every partition of the goal."""
    rng = random.Random(36)
    tps = [(f"t{i % 30}", i // 30) for i in range(300)]
    maps = {tp: PartitionMap(next_src=rng.randrange(0, 50)) for tp in tps[:280]}  # 20 not owned yet
    until = {tp: maps[tp].next_src + rng.randrange(0, 40) if tp in maps else rng.randrange(0, 5) for tp in tps}
    for _ in range(6):
        batch, at = Batch(), {tp: maps[tp].next_src if tp in maps else 0 for tp in tps}
        todo = _short_of(until, batch, maps)
        assert todo == {tp: end for tp, end in until.items() if at[tp] < end}
        while todo:
            touched: list[TP] = []
            for tp in rng.sample(tps, rng.randrange(1, 12)):
                kind = rng.random()
                if kind < 0.7:  # a run of records, maybe past a compacted hole
                    first = at[tp] + rng.randrange(0, 3)
                    run = [_msg(tp, first + i) for i in range(rng.randrange(1, 6))]
                    batch.parts.setdefault(tp, []).extend(run)
                    at[tp] = first + len(run)
                elif kind < 0.9:  # the end of the partition: only ever at or past what was read
                    batch.reached[tp] = at[tp] = at[tp] + rng.randrange(0, 4)
                else:  # retention deleted records ahead of the reader
                    batch.lost[tp] = Gap(at[tp], at[tp] + rng.randrange(1, 20))
                    at[tp] = batch.lost[tp].end
                touched.append(tp)
            _drop_reached(todo, touched, batch, maps)
            assert todo == _short_of(until, batch, maps)
            assert todo == {tp: end for tp, end in until.items() if at[tp] < end}
        for tp in tps[:280]:  # the batch committed: the next one starts where this one reached
            maps[tp].next_src = at[tp]
        until = {tp: end + rng.randrange(0, 30) for tp, end in until.items()}


def test_a_partition_the_call_did_not_touch_is_left_as_it_is() -> None:
    a, b = ("t", 0), ("t", 1)
    maps = {a: PartitionMap(next_src=0), b: PartitionMap(next_src=0)}
    batch = Batch(parts={a: [_msg(a, 0)], b: [_msg(b, 0)]})
    todo = {a: 1, b: 1}
    _drop_reached(todo, [a], batch, maps)
    assert todo == {b: 1}


def test_a_run_keeps_its_goal_from_the_partitions_each_committed_batch_touched() -> None:
    """Between batches the maps hold the committed progress; a partition the batch read records of, reached the
    end of or lost records of is checked against it, and only those."""
    a, b, c, d = ("t", 0), ("t", 1), ("t", 2), ("t", 3)
    maps = {tp: PartitionMap(next_src=0) for tp in (a, b, c, d)}
    left = _short_of({a: 5, b: 3, c: 9, d: 4}, Batch(), maps)
    assert left == {a: 5, b: 3, c: 9, d: 4}
    batch = Batch(parts={a: [_msg(a, 4)]}, reached={b: 3}, lost={c: Gap(0, 9)})
    assert sorted(batch.touched()) == [a, b, c]
    maps[a].next_src, maps[b].next_src, maps[c].next_src = 5, 3, 9  # the commit
    maps[d].next_src = 4  # not in the batch: not looked at
    _drop_reached(left, batch.touched(), Batch(), maps)
    assert left == {d: 4}
