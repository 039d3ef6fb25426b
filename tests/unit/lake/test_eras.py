"""A canonical table's eras: which cluster's offsets its rows carry, from its hand-over notes (pure)."""

from __future__ import annotations

import json

from cutover.lake import eras, stamps
from cutover.lake.eras import Span


def _note(direction: str, old: dict[int, int], new: dict[int, int]) -> str:
    return json.dumps({"direction": direction, "run": "r", "old": old, "new": new}, sort_keys=True)


def test_two_cycles_cut_each_partition_into_eras_of_alternating_clusters() -> None:
    snaps = [stamps.Snapshot(1, None, 10, {}),
             stamps.Snapshot(2, 1, 20, {eras.K_HANDOVER: _note("forward", {0: 100, 1: 7}, {0: 130, 1: 9})}),
             stamps.Snapshot(3, 2, 30, {}),
             stamps.Snapshot(4, 3, 40, {eras.K_HANDOVER: _note("reverse", {0: 160, 1: 7}, {0: 190, 1: 9})}),
             stamps.Snapshot(5, 4, 50, {eras.K_HANDOVER: _note("forward", {0: 200, 1: 12}, {0: 240, 1: 15})})]
    lines = eras.spans(eras.notes(snaps, 5, {}))
    assert lines[0] == [Span("old", 0, 100), Span("new", 130, 190), Span("old", 160, 200), Span("new", 240, None)]
    assert lines[1] == [Span("old", 0, 7), Span("new", 9, 9), Span("old", 7, 12), Span("new", 15, None)]
    old, new = eras.sides(lines[0], [99, 100, 135, 170, 195, 10**9])
    assert [(bool(a), bool(b)) for a, b in zip(old, new, strict=True)] == [
        (True, False), (False, False), (False, True), (True, True), (True, False), (False, True)]
    assert eras.spans(eras.notes(snaps[:1], 1, {})) == {}  # never handed over: one cluster's offsets


def test_the_notes_survive_snapshot_expiry_in_the_table_property() -> None:
    """The hand-over snapshots are expired; the property the same commits appended to still has them."""
    props: dict[str, str] = {}
    forward = json.loads(_note("forward", {0: 100}, {0: 130}))
    props[eras.K_HANDOVERS] = eras.appended(props, forward, 2, 20)
    props[eras.K_HANDOVERS] = eras.appended(props, json.loads(_note("reverse", {0: 160}, {0: 190})), 4, 40)
    props[eras.K_HANDOVERS] = eras.appended(props, forward, 2, 20)  # a retried commit: recorded once
    expired = [stamps.Snapshot(9, 8, 90, {})]  # the lineage after compaction and expiry
    assert eras.spans(eras.notes(expired, 9, props)) == {
        0: [Span("old", 0, 100), Span("new", 130, 190), Span("old", 160, None)]}
    # both sources agree: a note found in the lineage and the property is one note
    both = [stamps.Snapshot(2, None, 20, {eras.K_HANDOVER: _note("forward", {0: 100}, {0: 130})})]
    assert len(eras.notes(both, 2, props)) == 2


def test_notes_of_the_same_millisecond_keep_the_order_they_were_appended_in() -> None:
    props: dict[str, str] = {}
    for direction, snapshot in (("forward", 900), ("reverse", 100), ("forward", 500)):  # ids in no order
        note = json.loads(_note(direction, {0: snapshot}, {0: snapshot + 1}))
        props[eras.K_HANDOVERS] = eras.appended(props, note, snapshot, 0)
    assert [n["direction"] for n in eras.notes([], None, props)] == ["forward", "reverse", "forward"]
