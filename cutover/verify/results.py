"""What verify found, as typed values: the result of a run, and the summary it leaves on each table.

Other packages read attributes; `as_dict()` is the JSON of `cutover verify -o json` and of
`result.json` (README "Verify"), and the report renders from it. The parts only the report
reads (the schema comparison, the suites' expectations, the samples, the cost) stay in
their JSON shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["offsets", "key", "content"]
COUNT_KEYS = ("old_rows", "new_rows", "matched", "missing", "extra", "mismatched", "duplicates_old", "duplicates_new")


@dataclass(frozen=True)
class Counts:
    old_rows: int = 0
    new_rows: int = 0
    matched: int = 0
    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    duplicates_old: int = 0
    duplicates_new: int = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in COUNT_KEYS}


@dataclass(frozen=True)
class Gate:
    limit: int | None  # None: no limit
    found: int

    @property
    def passed(self) -> bool:
        return self.limit is None or self.found <= self.limit

    def as_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "found": self.found, "passed": self.passed}


@dataclass(frozen=True)
class PartitionResult:
    partition: int
    counts: Counts
    #: offsets mode: the lowest and highest old-cluster offset compared, and where the window ends
    min_offset: int | None
    max_offset: int | None
    window_end: int | None
    old_ahead: int
    new_ahead: int

    def as_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, **self.counts.as_dict(), "min_offset": self.min_offset,
                "max_offset": self.max_offset, "window_end": self.window_end, "old_ahead": self.old_ahead,
                "new_ahead": self.new_ahead}


@dataclass(frozen=True)
class Lag:
    """Rows beyond the comparison window: held by one table past the other's position."""

    old_ahead: int = 0
    new_ahead: int = 0
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"old_ahead": self.old_ahead, "new_ahead": self.new_ahead, "note": self.note}


@dataclass(frozen=True)
class TableResult:
    table: str
    old_table: str
    topic: str
    mode: Mode
    passed: bool
    counts: Counts
    gates: dict[str, Gate]
    schema: dict[str, Any]
    suites: list[dict[str, Any]]
    partitions: tuple[PartitionResult, ...]
    samples: dict[str, list[dict[str, Any]]]
    lag: Lag
    cost: dict[str, Any]
    old_snapshot: int | None
    new_snapshot: int | None
    #: Per table ("old", "new"): record-to-commit delay p50/p95 (verify/freshness.py); None: not measured.
    freshness: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "old_table": self.old_table, "topic": self.topic, "mode": self.mode,
                "freshness": self.freshness,
                "passed": self.passed, "counts": self.counts.as_dict(),
                "gates": {name: g.as_dict() for name, g in self.gates.items()}, "schema": self.schema,
                "suites": self.suites, "partitions": [p.as_dict() for p in self.partitions],
                "samples": self.samples, "lag": self.lag.as_dict(), "cost": self.cost,
                "old_snapshot": self.old_snapshot, "new_snapshot": self.new_snapshot}

    def summary(self, at: str) -> LastVerify:
        """What is recorded on the new table, where promote reads it."""
        return LastVerify(at, self.passed, self.counts, Lag(self.lag.old_ahead, self.lag.new_ahead),
                          self.old_snapshot, self.new_snapshot)


@dataclass(frozen=True)
class VerifyResult:
    """One `cutover verify` run over the plan's table pairs."""

    plan: str
    name: str
    at: str
    tables: tuple[TableResult, ...]
    #: The registry audit of the new cluster (`cutover registry audit`'s JSON), when the plan has a registry.
    registry: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.tables) and (self.registry is None or bool(self.registry["passed"]))

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "plan": self.plan, "name": self.name, "at": self.at,
                "tables": [t.as_dict() for t in self.tables], "registry": self.registry}


@dataclass(frozen=True)
class LastVerify:
    """The last verify of a table, as recorded in its property `cutover.verify.last`."""

    at: str
    passed: bool
    counts: Counts
    lag: Lag
    old_snapshot: int | None = None
    new_snapshot: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "passed": self.passed, "counts": self.counts.as_dict(),
                "lag": {"old_ahead": self.lag.old_ahead, "new_ahead": self.lag.new_ahead},
                "old_snapshot": self.old_snapshot, "new_snapshot": self.new_snapshot}

    def to_property(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_property(cls, raw: str) -> LastVerify:
        """Read it back; results recorded before a field existed read it as zero."""
        data = json.loads(raw)
        counts = data.get("counts") or {}
        lag = data.get("lag") or {}
        return cls(data["at"], bool(data["passed"]), Counts(**{k: int(counts.get(k, 0)) for k in COUNT_KEYS}),
                   Lag(int(lag.get("old_ahead", 0)), int(lag.get("new_ahead", 0))),
                   data.get("old_snapshot"), data.get("new_snapshot"))
