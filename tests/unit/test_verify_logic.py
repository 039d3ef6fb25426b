"""Pure logic of verify: type families, the schema comparison, the offset window, and the
new-to-old position through the mirror's map."""

from __future__ import annotations

from cutover.mirror.offsetmap import PartitionMap, Segment
from cutover.verify.align import new_position_in_old, window
from cutover.verify.canon import Column_, kind, schema_diff


def test_type_families() -> None:
    assert [kind(t) for t in ("int", "bigint", "float", "double", "decimal(12,2)", "timestamp", "timestamp_ntz",
                              "string", "array<int>")] == [
        "int", "int", "float", "float", "decimal", "timestamp", "timestamp", "string", "nested"]


def test_schema_diff_fails_on_missing_columns_and_other_families_only() -> None:
    old = [Column_("id", "bigint", False), Column_("Amount", "decimal(12,2)", True), Column_("score", "float", True),
           Column_("gone", "string", True), Column_("kafka_offset", "bigint", True)]
    new = [Column_("id", "bigint", True), Column_("amount", "double", True), Column_("score", "double", True),
           Column_("extra", "string", True), Column_("kafka_offset", "bigint", True)]
    d = schema_diff(old, new, {"kafka_offset"}, {"kafka_offset"})
    assert d == {
        "passed": False, "missing_in_new": ["gone"], "extra_in_new": ["extra"],
        "type_changed": [{"column": "Amount", "old": "decimal(12,2)", "new": "double", "same_family": False},
                         {"column": "score", "old": "float", "new": "double", "same_family": True}],
        "nullability_changed": [{"column": "id", "old_nullable": False, "new_nullable": True}]}
    widened = schema_diff([Column_("score", "float", True)], [Column_("score", "double", True)], set(), set())
    assert widened["passed"]


def test_window_ends_where_the_side_behind_ends() -> None:
    assert window({0: 100, 1: 50, 2: 7}, {0: 80, 1: 60}) == {0: 80, 1: 50, 2: 0}


def test_new_positions_go_back_through_the_map() -> None:
    pm = PartitionMap(start_src=0, next_src=12, next_tgt=14)
    pm.add([Segment(0, 0, 5), Segment(7, 6, 5)])  # source gap 5-6 (aborted), target marker at 5 and 11..13
    # 5 (a marker on new) and 6 both mean "next is source 7": 5..6 hold no committed record on old.
    assert new_position_in_old(pm, 5) == 7 and new_position_in_old(pm, 6) == 7 and new_position_in_old(pm, 9) == 10
    assert new_position_in_old(pm, 14) == 12 and new_position_in_old(pm, 99) == 12
    assert new_position_in_old(None, 42) == 42
