"""Spark filters written as SQL text: one Py4J call however many partitions or ranges they name.

Built from Column calls, each comparison is a few round trips to the JVM, per partition, per
batch or per pass; parsed from text, the whole expression is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def quoted(name: str) -> str:
    """A column name as Spark SQL reads it, whatever it holds."""
    return "`" + name.replace("`", "``") + "`"


def any_of(terms: Iterable[str]) -> Column:
    """True where any of these SQL conditions holds (false for none)."""
    from pyspark.sql import functions as F

    return F.expr(" OR ".join(terms) or "false")


def per_partition(partition: str, conditions: Mapping[int, str], otherwise: str) -> Column:
    """Each partition's own SQL condition (`otherwise` for a partition not named)."""
    from pyspark.sql import functions as F

    cases = " ".join(f"WHEN {int(p)} THEN {c}" for p, c in sorted(conditions.items()))
    return F.expr(f"CASE {partition} {cases} ELSE {otherwise} END" if cases else otherwise)
