"""Verify's type families and schema comparison (pure): what fails the schema gate."""

from __future__ import annotations

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
