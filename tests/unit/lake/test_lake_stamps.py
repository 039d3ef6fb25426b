"""Kafka positions stamped in snapshots (pure): round trips, lineage, maintenance, rollback."""

from __future__ import annotations

import pytest

from cutover.lake import stamps
from cutover.lake.stamps import Snapshot, TableStateError


def _snap(sid: int, parent: int | None, **summary: str) -> Snapshot:
    return Snapshot(sid, parent, sid * 1000, summary)


def test_stamp_round_trips_and_positions_only_hold_for_their_cluster() -> None:
    props = stamps.stamp("C1", "orders", {0: (5, 9), 2: (0, 3)}, {0: 10, 1: 7, 2: 4}, "run-1", 3)
    snap = _snap(1, None, **props)
    held = stamps.latest([snap], 1, "t")
    assert (held.cluster_id, held.topic, held.positions, held.run_id, held.dead_letter_rows) == (
        "C1", "orders", {0: 10, 1: 7, 2: 4}, "run-1", 3)
    assert stamps.ranges(snap) == {0: (5, 9), 2: (0, 3)}
    assert held.for_cluster("C1") == {0: 10, 1: 7, 2: 4} and held.for_cluster("C2") == {}


def test_latest_walks_the_current_lineage_past_foreign_snapshots_and_ignores_rolled_back_ones() -> None:
    a = _snap(1, None, **stamps.stamp("C", "t", {0: (0, 9)}, {0: 10}, "r", 0))
    b = _snap(2, 1, **stamps.stamp("C", "t", {0: (10, 19)}, {0: 20}, "r", 0))
    compaction = _snap(3, 2, operation="replace")
    rolled_back = _snap(4, 2, **stamps.stamp("C", "t", {0: (20, 29)}, {0: 30}, "r", 0))
    snaps = [a, b, compaction, rolled_back]
    assert stamps.latest(snaps, 3, "t").positions == {0: 20}
    assert stamps.latest(snaps, 4, "t").positions == {0: 30}
    assert [s.snapshot_id for s in stamps.stamped(snaps, 3)] == [1, 2]
    assert not stamps.latest([], None, "t").stamped


def test_the_recorded_state_holds_when_maintenance_expired_every_stamp_and_not_after_a_rollback() -> None:
    stamp_b = stamps.stamp("C", "t", {0: (10, 19)}, {0: 20, 1: 5}, "r", 0)
    a = _snap(1, None, **stamps.stamp("C", "t", {0: (0, 9)}, {0: 10}, "r", 0))
    b = _snap(2, 1, **stamp_b)
    props = {stamps.K_STATE: stamps.state_property(stamp_b, 2, 2000)}
    compacted = _snap(3, 2, operation="replace")
    # compaction, then expiry of everything but the head: only the recorded state knows the positions
    held = stamps.latest([compacted], 3, "t", props)
    assert held.positions == {0: 20, 1: 5} and held.cluster_id == "C" and held.snapshot_id == 2
    # nothing expired: the lineage's stamp (the same one)
    assert stamps.latest([a, b, compacted], 3, "t", props).snapshot_id == 2
    # rolled back to a (b still there, off the lineage): a's stamp, never the newer record
    assert stamps.latest([a, b, compacted], 1, "t", props).positions == {0: 10}
    # rolled back to before any stamp, and b expired since: the lineage reaches its root, nothing holds
    root = _snap(7, None, operation="append")
    assert not stamps.latest([root], 7, "t", props).stamped
    with pytest.raises(TableStateError, match=r"cutover\.kafka\.state is unreadable"):
        stamps.latest([compacted], 3, "t", {stamps.K_STATE: "{not json"})


def test_a_newer_stamp_version_is_refused_not_guessed() -> None:
    props = {**stamps.stamp("C", "t", {}, {}, "r", 0), stamps.K_VERSION: "2"}
    with pytest.raises(TableStateError, match="version 2; this cutover reads version 1"):
        stamps.latest([_snap(1, None, **props)], 1, "t")


def test_advance_takes_the_batch_end_and_never_goes_back() -> None:
    assert stamps.advance({0: 50, 1: 5}, {0: (10, 20), 1: (5, 9), 2: (0, 0)}) == {0: 50, 1: 10, 2: 1}
