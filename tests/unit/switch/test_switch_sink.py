"""Reading Apache Iceberg's Kafka Connect sink's own state (pure logic): the control-topic positions
its coordinator stores in snapshot summaries, and the type and group of a control-topic event
(real events of iceberg-kafka-connect 1.11.0, captured from the sandbox's sink)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.errors import Refused
from cutover.lake.stamps import Snapshot
from cutover.switch.sink import control_stamp, event, stored_positions, summary_key

DATA = Path(__file__).parents[1] / "data"
GROUP = "connect-t_test_the_iceberg_sink_writes_t_0538ff-sink"
KEY = summary_key("control-iceberg", "connect-orders")


def _lineage(*summaries: dict[str, str]) -> tuple[list[Snapshot], int]:
    snaps = [Snapshot(i + 1, i or None, 1000 * i, s) for i, s in enumerate(summaries)]
    return snaps, len(summaries)


def test_the_coordinators_positions_come_from_the_newest_snapshot_of_the_lineage_that_has_them() -> None:
    snaps, current = _lineage({KEY: '{"0":5}'}, {KEY: '{"0":15,"1":3}'}, {"other": "x"})  # a compaction last
    stray = Snapshot(99, 2, 9000, {KEY: '{"0":999}'})  # a branch's snapshot: not in the current lineage
    stored = stored_positions([*snaps, stray], current, "db.t", "control-iceberg", "connect-orders")
    assert stored.positions == {0: 15, 1: 3} and stored.snapshot == 2


def test_offsets_of_another_control_group_are_refused_naming_what_was_found() -> None:
    snaps, current = _lineage({summary_key("control-iceberg", "connect-billing"): '{"0":5}'})
    with pytest.raises(Refused) as refused:
        stored_positions(snaps, current, "db.t", "control-iceberg", "connect-orders")
    assert "kafka.connect.offsets.control-iceberg.connect-billing" in str(refused.value)
    assert "not for kafka.connect.offsets.control-iceberg.connect-orders" in str(refused.value)
    assert refused.value.exit_code == 3


def test_a_table_without_sink_offsets_is_refused() -> None:
    snaps, current = _lineage({"added-records": "10"})
    with pytest.raises(Refused, match="no snapshot of its current lineage holds the Iceberg sink's offsets"):
        stored_positions(snaps, current, "db.t", "control-iceberg", "connect-orders")


@pytest.mark.parametrize("value", ['[5]', '{"0":"x"}', "0:5", '{"zero":5}'])
def test_a_summary_format_cutover_does_not_know_is_refused(value: str) -> None:
    snaps, current = _lineage({KEY: value})
    with pytest.raises(Refused, match="is not the format cutover reads"):
        stored_positions(snaps, current, "db.t", "control-iceberg", "connect-orders")


def test_the_stamp_that_supersedes_the_other_clusters_positions_is_in_the_sinks_own_format() -> None:
    from cutover.plan.model import TablePair

    pair = TablePair(topic="orders", old="db.t", new="db.n", writer_offsets="iceberg-connect", connector="orders")
    assert control_stamp(pair, {1: 0, 0: 7}) == {KEY: '{"0":7,"1":0}'}
    snaps, current = _lineage(control_stamp(pair, {1: 0, 0: 7}))
    assert stored_positions(snaps, current, "db.t", "control-iceberg", "connect-orders").positions == {0: 7, 1: 0}


def test_a_control_event_says_its_type_and_group() -> None:
    assert event((DATA / "iceberg-1.11-start-commit.avro").read_bytes(), "here") == ("StartCommit", GROUP)
    assert event((DATA / "iceberg-1.11-data-complete.avro").read_bytes(), "here") == ("DataComplete", GROUP)


@pytest.mark.parametrize("damage", [lambda b: b"{" + b[1:], lambda b: b[:40], lambda b: b[:700 - 60]])
def test_an_event_cutover_cannot_read_is_refused_naming_where_it_is(damage: object) -> None:
    raw = (DATA / "iceberg-1.11-start-commit.avro").read_bytes()
    with pytest.raises(Refused, match="control topic c partition 0 offset 7"):
        event(damage(raw), "control topic c partition 0 offset 7")  # type: ignore[operator]
