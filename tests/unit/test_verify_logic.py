"""Pure logic of verify: type families, the schema comparison, the offset window, and the
new-to-old position through the mirror's map."""

from __future__ import annotations

import json

from cutover.mirror.offsetmap import PartitionMap, Segment
from cutover.verify.align import new_position_in_old, window
from cutover.verify.canon import Column_, kind, same, schema_diff
from cutover.verify.reconcile import _sample


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
        "type_changed": [{"column": "Amount", "old": "decimal(12,2)", "new": "double", "same_family": False,
                          "narrowing": False, "allowed": False},
                         {"column": "score", "old": "float", "new": "double", "same_family": True,
                          "narrowing": False, "allowed": True}],
        "nullability_changed": [{"column": "id", "old_nullable": False, "new_nullable": True}]}
    widened = schema_diff([Column_("score", "float", True)], [Column_("score", "double", True)], set(), set())
    assert widened["passed"]


def test_narrowing_within_a_family_fails_unless_the_plan_allows_it() -> None:
    """A double stored as a float (or long as int, a smaller decimal scale) can lose data."""
    pairs = [("double", "float"), ("bigint", "int"), ("int", "smallint"), ("smallint", "tinyint"),
             ("decimal(12,4)", "decimal(12,2)"), ("decimal(12,2)", "decimal(10,2)"), ("timestamp_ns", "timestamp")]
    for old_type, new_type in pairs:
        d = schema_diff([Column_("c", old_type, True)], [Column_("c", new_type, True)], set(), set())
        assert not d["passed"], (old_type, new_type)
        assert d["type_changed"] == [{"column": "c", "old": old_type, "new": new_type, "same_family": True,
                                      "narrowing": True, "allowed": False}]
        allowed = schema_diff([Column_("c", old_type, True)], [Column_("c", new_type, True)], set(), set(),
                              allow_narrowing={"C"})
        assert allowed["passed"] and allowed["type_changed"][0]["allowed"], (old_type, new_type)
    for old_type, new_type in [("float", "double"), ("int", "bigint"), ("decimal(10,2)", "decimal(12,4)"),
                               ("timestamp", "timestamp_ntz"), ("timestamp", "timestamp_ns")]:
        d = schema_diff([Column_("c", old_type, True)], [Column_("c", new_type, True)], set(), set())
        assert d["passed"] and not d["type_changed"][0]["narrowing"], (old_type, new_type)


def test_window_ends_where_the_side_behind_ends() -> None:
    assert window({0: 100, 1: 50, 2: 7}, {0: 80, 1: 60}) == {0: 80, 1: 50, 2: 0}


def test_new_positions_go_back_through_the_map() -> None:
    pm = PartitionMap(start_src=0, next_src=12, next_tgt=14)
    pm.add([Segment(0, 0, 5), Segment(7, 6, 5)])  # source gap 5-6 (aborted), target marker at 5 and 11..13
    # 5 (a marker on new) and 6 both mean "next is source 7": 5..6 hold no committed record on old.
    assert new_position_in_old(pm, 5) == 7 and new_position_in_old(pm, 6) == 7 and new_position_in_old(pm, 9) == 10
    assert new_position_in_old(pm, 14) == 12 and new_position_in_old(pm, 99) == 12
    assert new_position_in_old(None, 42) == 42


def test_samples_compare_values_the_way_the_counts_do() -> None:
    """NaN = NaN and -0.0 = 0.0 in the samples too; NaN and infinities stay valid JSON."""
    nan, inf = float("nan"), float("inf")
    row = {"_p": 0, "_id": 5, "n_o": 1, "n_n": 1,
           "r_old": {"_h": 1, "_c0": "n5", "_c1": nan, "_c2": -0.0, "_c3": inf},
           "r_new": {"_h": 2, "_c0": "changed", "_c1": nan, "_c2": 0.0, "_c3": inf}}
    names, canon = ["name", "score", "zero", "big"], ["_c0", "_c1", "_c2", "_c3"]
    sample = _sample(row, "mismatched", names, canon)
    assert sample == {"partition": 0, "id": 5, "columns": {"name": {"old": "n5", "new": "changed"}}}
    missing = _sample(row, "missing", names, canon)
    assert missing["values"] == {"name": "n5", "score": "NaN", "zero": 0.0, "big": "Infinity"}
    json.loads(json.dumps(missing, allow_nan=False))
    assert same(nan, nan) and same(-0.0, 0.0) and not same(nan, 1.0) and not same(None, 0.0)
