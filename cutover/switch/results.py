"""What promote and rollback say, as typed values: the dry-run's explanation and the outcome of a run.

Other packages read attributes; `as_dict()` is the JSON of `promote/rollback -o json`
(README "Promote and rollback"). The summary a finished run journals is persisted JSON,
and `SwitchResult` keeps it as journaled, reading its fields through properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cutover.switch.checks import Outcome


@dataclass(frozen=True)
class StepRow:
    """One step of an attempt, as its last record says (a re-run's repeat wins over the crashed try)."""

    name: str
    #: done, failed, or interrupted (the run died in it)
    outcome: str
    seconds: float | None
    started_at: str
    error: str | None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome, "seconds": self.seconds, "started_at": self.started_at,
                "error": self.error, "detail": self.detail}


@dataclass(frozen=True)
class FreezeWindow:
    frozen_at: str
    switched_at: str | None
    seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"frozen_at": self.frozen_at, "switched_at": self.switched_at, "seconds": self.seconds}

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> FreezeWindow | None:
        return cls(data["frozen_at"], data.get("switched_at"), data.get("seconds")) if data else None


@dataclass(frozen=True)
class SwitchResult:
    action: str
    plan: str
    run: str | None
    already_done: bool
    phase: str
    steps: tuple[StepRow, ...]
    #: what the last finished run of this action journaled: freeze_window, past_point_of_no_return,
    #: routing, and for a rollback carried_back (empty when none finished)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def freeze_window(self) -> FreezeWindow | None:
        return FreezeWindow.of(self.summary.get("freeze_window"))

    @property
    def past_point_of_no_return(self) -> bool:
        return bool(self.summary.get("past_point_of_no_return"))

    @property
    def carried_back(self) -> int | None:
        value = self.summary.get("carried_back")
        return int(value) if value is not None else None

    @property
    def routing(self) -> dict[str, Any] | None:
        routing: dict[str, Any] | None = self.summary.get("routing")
        return routing

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "plan": self.plan, "run": self.run, "already_done": self.already_done,
                "phase": self.phase, "steps": [s.as_dict() for s in self.steps], **self.summary}


@dataclass(frozen=True)
class StepPlan:
    name: str
    does: str
    done_earlier: bool
    would: tuple[str, ...]
    #: What the dry run could not find out for this step, and why (empty when it could say everything).
    unknown: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "does": self.does, "done_earlier": self.done_earlier, "would": list(self.would),
                "unknown": list(self.unknown)}


@dataclass(frozen=True)
class Explanation:
    """The dry-run: every precondition evaluated live, and what each step would do. An execution that a
    precondition refuses says the same of its checks (`dry_run` false, no steps: none ran), so automation
    reads one shape either way."""

    action: str
    plan: str
    phase: str
    checks: tuple[Outcome, ...]
    steps: tuple[StepPlan, ...]
    dry_run: bool = True

    @property
    def passed(self) -> bool:
        return all(o.refusal is None for o in self.checks)

    @property
    def unknown(self) -> list[str]:
        """`step: what it could not find out`, for every step the dry run could not fully explain."""
        return [f"{s.name}: {u}" for s in self.steps for u in s.unknown]

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "plan": self.plan, "dry_run": self.dry_run, "phase": self.phase,
                "checks": [o.as_dict() for o in self.checks], "passed": self.passed,
                "steps": [s.as_dict() for s in self.steps], "explained": not self.unknown}
