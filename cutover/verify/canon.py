"""Type-aware comparable values, so equal values compare equal whatever their representation.

A column of the same type on both sides is compared as it is (floats with -0 as 0 and
one NaN). A column whose types differ becomes a string on both sides, chosen from both
sides' types:
integers of any width as whole numbers; floats and doubles (and a decimal compared with
a float) as 15 significant digits (7 when either side is a 32-bit float), with -0 as 0
and NaN as NaN; decimals compared with decimals at the larger scale; timestamps (with
or without zone) as microseconds since the epoch in UTC; binary as hex; nested values
as JSON. NULL is a sentinel no value can take. The schema comparison lists what differs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

NULL = "\u0000"
_INT = {"tinyint", "smallint", "int", "bigint", "byte", "short", "long", "integer"}
_FLOAT = {"float", "double", "real"}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
#: Timestamp types and their fractional-second digits (Spark's are microseconds; Iceberg v3 adds nanoseconds).
_TS = {"timestamp": 6, "timestamp_ntz": 6, "timestamptz": 6, "timestamp_ns": 9, "timestamp_ntz_ns": 9,
       "timestamptz_ns": 9}
#: Integer widths, to tell widening from narrowing.
_INT_BITS = {"tinyint": 8, "byte": 8, "smallint": 16, "short": 16, "int": 32, "integer": 32, "bigint": 64, "long": 64}


def kind(spark_type: str) -> str:
    """The comparison family of a Spark simple type string."""
    t = spark_type.lower()
    if t in _INT:
        return "int"
    if t in _FLOAT:
        return "float"
    if _DECIMAL.fullmatch(t):
        return "decimal"
    if t in _TS:
        return "timestamp"
    if t in ("string", "date", "boolean", "binary"):
        return t
    return "nested"


def _scale(spark_type: str) -> int:
    m = _DECIMAL.fullmatch(spark_type.lower())
    return int(m.group(2)) if m else 0


def narrowing(old: str, new: str) -> bool:
    """Whether `new` can hold fewer values than `old` of the same family: a long stored as an int, a
    double as a float, a decimal with fewer integer or fractional digits, a coarser timestamp."""
    a, b = old.lower(), new.lower()
    family = kind(a)
    if family != kind(b) or a == b:
        return False
    if family == "int":
        return _INT_BITS.get(b, 64) < _INT_BITS.get(a, 64)
    if family == "float":
        return a in ("double", "real") and b == "float"
    if family == "decimal":
        (pa, sa), (pb, sb) = (_precision(a), _scale(a)), (_precision(b), _scale(b))
        return sb < sa or pb - sb < pa - sa
    if family == "timestamp":
        return _TS[b] < _TS[a]
    return False


def _precision(spark_type: str) -> int:
    m = _DECIMAL.fullmatch(spark_type.lower())
    return int(m.group(1)) if m else 0


def canonical(column: str, own: str, other: str) -> Column:
    """The comparable value of `column` (of type `own`) when compared with a column of type `other`.

    Same types compare as they are (floats with -0 made 0 and NaN made one NaN), which
    costs nothing; only columns whose types differ are converted to canonical strings.
    """
    from pyspark.sql import functions as F

    c = F.col(f"`{column}`")
    k, ko = kind(own), kind(other)
    if own.lower() == other.lower():
        if k == "float":
            return F.when(F.isnan(c), F.lit(float("nan")).cast(own)).when(c == 0, F.lit(0).cast(own)).otherwise(c)
        return F.to_json(c) if "map<" in own.lower() else c
    numeric = {"int", "decimal", "float"}
    if k == "int" and ko == "int":
        out = c.cast("bigint").cast("string")
    elif k in ("int", "decimal") and ko in ("int", "decimal"):
        out = c.cast(f"decimal(38,{max(_scale(own), _scale(other))})").cast("string")
    elif k in numeric and ko in numeric:
        out = _float(c, own, other)
    elif k == "timestamp":
        out = F.unix_micros(c.cast("timestamp")).cast("string")
    elif k == "binary":
        out = F.hex(c)
    elif k == "nested":
        out = F.to_json(c)
    else:
        out = c.cast("string")
    return F.coalesce(out, F.lit(NULL))


def _float(c: Column, own: str, other: str) -> Column:
    from pyspark.sql import functions as F

    digits = 7 if "float" in (own.lower(), other.lower()) else 15
    d = c.cast("double")
    return (F.when(F.isnan(d), F.lit("NaN"))
            .when(d == 0, F.lit("0"))
            .otherwise(F.format_string(f"%.{digits}g", d)))


def same(a: Any, b: Any) -> bool:
    """Equality of two canonical values as the counts see it: NaN equals NaN, -0.0 equals 0.0.

    The counts compare hashes of canonical values (where NaN is one value); samples, the
    report and the JSON use this, so a row never shows a column as differing that the
    counts consider equal.
    """
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def plain(v: Any) -> Any:
    """A value JSON can carry: NaN and the infinities as strings (standard JSON has no such numbers)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def row_hash(columns: list[Column]) -> Column:
    """64-bit hash of the compared values; which of them are null is part of it (Spark's
    hash skips nulls, so (null, 5) and (5, null) would otherwise collide)."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit(0).cast("bigint")
    return F.xxhash64(*columns, *[c.isNull() for c in columns])


@dataclass(frozen=True)
class Column_:
    name: str
    type: str
    nullable: bool


def schema_diff(old: list[Column_], new: list[Column_], ignore_old: set[str], ignore_new: set[str],
                allow_narrowing: set[str] | None = None) -> dict[str, Any]:
    """Columns missing from the new table, added in it, of another type, of other nullability.

    It fails (passed false) on a missing column, a type of another family (a decimal
    that became a double, a string that became a long), and narrowing within a family
    (a double stored as a float, a long as an int, a decimal with a smaller scale or
    fewer integer digits, a coarser timestamp), which can lose data, unless the column is
    in `allow_narrowing` (the plan's `tables[].allow_narrowing`). Widening within a
    family (int to long, float to double, a larger decimal), a column only the new table
    has, and nullability are listed without failing.
    """
    allowed_narrow = {c.lower() for c in allow_narrowing or set()}
    o = {c.name.lower(): c for c in old if c.name.lower() not in ignore_old}
    n = {c.name.lower(): c for c in new if c.name.lower() not in ignore_new}
    missing = sorted(o[k].name for k in o.keys() - n.keys())
    extra = sorted(n[k].name for k in n.keys() - o.keys())
    changed, nullability = [], []
    for k in sorted(o.keys() & n.keys()):
        a, b = o[k], n[k]
        if a.type.lower() != b.type.lower():
            same, narrow = kind(a.type) == kind(b.type), narrowing(a.type, b.type)
            changed.append({"column": a.name, "old": a.type, "new": b.type, "same_family": same,
                            "narrowing": narrow, "allowed": same and (not narrow or k in allowed_narrow)})
        if a.nullable != b.nullable:
            nullability.append({"column": a.name, "old_nullable": a.nullable, "new_nullable": b.nullable})
    return {"passed": not missing and all(c["allowed"] for c in changed), "missing_in_new": missing,
            "extra_in_new": extra, "type_changed": changed, "nullability_changed": nullability}
