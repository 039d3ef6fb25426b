"""Every precondition of promote, rollback, complete and cancel, read from the list the switch itself builds
(`runner.preconditions`), so the docs' list cannot drift from the checks: a new check shows up with its name,
what it expects, which commands evaluate it and what in the plan brings it in.

Nothing here is evaluated: a check's test is a closure that runs only when a command evaluates it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutover.plan import Plan, PlanSpec
from cutover.switch import journal, runner, steps
from cutover.switch.journal import History, RunRecord, StepRecord

#: The situations a command meets, in the order the table lists them: (command, when, journal).
_SITUATIONS: tuple[tuple[journal.Action, str, Callable[[], History]], ...] = (
    ("promote", "", History),
    ("rollback", "before clients switched", History),
    ("rollback", "after clients switched", lambda: _promoted_past(steps.POINT_OF_NO_RETURN)),
    ("complete", "", History),
    ("cancel", "", History),
)

#: Optional parts of a plan, and the plan without each: a check that is gone without a part needs it.
_PARTS: tuple[tuple[str, Callable[[PlanSpec], PlanSpec]], ...] = (
    ("tables", lambda s: dataclasses.replace(s, tables=[])),
    ("readers", lambda s: dataclasses.replace(s, readers=[])),
    ("registry", lambda s: dataclasses.replace(s, registry=None)),
    ("rights", lambda s: dataclasses.replace(s, rights=None)),
    ("routing", lambda s: dataclasses.replace(s, routing=None)),
    ("complete.drop_new_tables", lambda s: dataclasses.replace(
        s, complete=dataclasses.replace(s.complete, drop_new_tables=False))),
)


@dataclass
class Precondition:
    name: str
    expects: str
    #: "promote", "rollback (after clients switched)", "complete (with `tables`)", ...
    checked_by: list[str] = field(default_factory=list)


def _promoted_past(step: str) -> History:
    """A journal whose promote attempt got past `step` (what a rollback then has to undo)."""
    run = RunRecord("promote", "reference", 0.0, "execute", [StepRecord(step, 0.0, 0.0, "done")])
    return History(runs=[run])


def catalogue(plan: Plan) -> list[Precondition]:
    """Every check the switch's commands build for `plan` (the fuller the plan, the more it shows), each with
    the commands that evaluate it and the plan parts it needs there."""
    found: dict[str, Precondition] = {}
    for action, when, history in _SITUATIONS:
        listed = _names(plan, action, history())
        for name, expects in listed.items():
            needs = [part for part, without in _PARTS
                     if name not in _names(Plan(without(plan.spec), plan.file), action, history())]
            entry = found.setdefault(name, Precondition(name, expects))
            words = [w for w in (when, *(f"with `{p}`" for p in needs)) if w]
            entry.checked_by.append(f"{action} ({', '.join(words)})" if words else action)
    return list(found.values())


def _names(plan: Plan, action: journal.Action, history: History) -> dict[str, str]:
    return {c.name: c.expects for c in runner.preconditions(plan, action, history)}


def markdown(plan: Plan | None = None) -> str:
    """The table of the docs' promote and rollback guide, for the shipped sample plan unless told."""
    plan = plan if plan is not None else sample_plan()
    rows = ["| precondition | what must hold | evaluated by |", "|---|---|---|"]
    rows += [f"| `{p.name}` | {_cell(p.expects)} | {_cell('; '.join(p.checked_by))} |" for p in catalogue(plan)]
    return "\n".join(rows) + "\n"


def sample_plan(sample: Path | None = None) -> Plan:
    """samples/plan.yaml (every plan key in use; `sample`, or the one beside the package in a checkout: the
    wheel does not carry it), its ${VAR}s set to placeholders, its env file left out, and
    complete.drop_new_tables on (so that complete's checks for it show too)."""
    import re
    import tempfile

    from cutover.plan import load_plan

    sample = sample or Path(__file__).resolve().parents[2] / "samples" / "plan.yaml"
    text = sample.read_text().replace("env_file: secrets.env", "")
    env = {name: "x" for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text)}
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "plan.yaml"
        copy.write_text(text)
        loaded = load_plan(copy, environ=env)
    spec = dataclasses.replace(loaded.spec, complete=dataclasses.replace(loaded.spec.complete, drop_new_tables=True))
    return Plan(spec, sample)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")
