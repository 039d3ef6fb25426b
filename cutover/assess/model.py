"""What `cutover assess` answers: the scorecard's rows, each a verdict with its reason, its evidence and
the drills in runbooks/ that test it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Verdict = Literal["ready", "risk", "blocker", "unknown"]
#: worst first: a row is as bad as the worst thing found for it
ORDER: tuple[Verdict, ...] = ("blocker", "risk", "unknown", "ready")

#: The seven questions of the field's readiness reviews, then the rows of their readiness table.
QUESTIONS = {
    "kafka-semantics": "Kafka semantics that must stay unchanged",
    "table-semantics": "Table semantics: offsets to snapshots, schema evolution, late data",
    "storage": "Storage model",
    "cost": "Cost model",
    "security": "Security model",
    "rollback": "Rollback model",
    "observability": "Observability model",
}
READINESS = {
    "offset-ownership": "Offset ownership",
    "table-commits": "Table commits and cleanup",
    "replay-window": "Replay window",
    "schema-governance": "Schema governance",
    "platform-elasticity": "Platform elasticity",
    "observability": "Observability",
}


#: The runbooks (runbooks/) that rehearse what each row is about: assess names them with a risk, and a drill's
#: report marks the rows it exercised with its result.
DRILLS: dict[str, tuple[str, ...]] = {
    "kafka-semantics": ("full-migration", "open-transaction-at-freeze"),
    "table-semantics": ("writer-crash-between-commits", "schema-change-mid-stream", "replay"),
    "storage": ("catalog-outage-during-shadow", "storage-outage-during-shadow"),
    "cost": ("full-migration",),
    "rollback": ("full-migration", "operator-machine-dies-mid-switch"),
    "offset-ownership": ("full-migration",),
    "table-commits": ("maintenance-during-shadow", "writer-crash-between-commits"),
    "replay-window": ("replay", "catalog-outage-during-shadow"),
    "schema-governance": ("schema-change-mid-stream",),
    "platform-elasticity": ("broker-restart-during-backfill", "mirror-crash-and-resume"),
}


def exercised(runbook: str) -> list[str]:
    """The titles of the scorecard's rows a runbook rehearses."""
    return [{**QUESTIONS, **READINESS}[key] for key, drills in DRILLS.items() if runbook in drills]


@dataclass
class Finding:
    """One thing found for a row: its verdict and why."""

    verdict: Verdict
    reason: str


@dataclass
class Row:
    key: str
    kind: Literal["question", "readiness"]
    title: str
    findings: list[Finding]
    evidence: dict[str, Any] = field(default_factory=dict)
    #: runbooks (names in runbooks/) that rehearse what this row is about
    drills: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        if not self.findings:
            return "ready"
        return min((f.verdict for f in self.findings), key=ORDER.index)

    @property
    def reason(self) -> str:
        worst = [f.reason for f in self.findings if f.verdict == self.verdict]
        return "; ".join(worst)

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "title": self.title, "verdict": self.verdict,
                "reason": self.reason, "findings": [asdict(f) for f in self.findings], "evidence": self.evidence,
                "drills": self.drills}


@dataclass
class Assessment:
    plan: str
    name: str
    at: str
    rows: list[Row]
    #: per-topic evidence for the report's charts: {topic: {...}}
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def blockers(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "blocker"]

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for r in self.rows if r.verdict == v) for v in ORDER}

    def as_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "name": self.name, "at": self.at, "ok": not self.blockers,
                "counts": self.counts(), "rows": [r.as_dict() for r in self.rows], "topics": self.topics}
