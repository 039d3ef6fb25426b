"""`cutover complete` and `cutover cancel` as data: the two ways a migration ends.

complete, after the last promote: a final verify (it changes nothing: an attempt that stops
there leaves the migration promoted, and rollback may still follow), then both mirrors
retired (marked ended in their state, fenced, the background reverse mirror stopped), the
shadow's leftovers removed where the plan's `complete` section says so, and the mirrors'
state topics removed (unless --keep-state).

cancel, before any promote (or after a finished rollback): the mirrors retired, then what
cutover created on the new cluster and in the catalog removed: the consumer groups it
committed, the shadow's tables, dead-letter tables, branches and checkpoints, the mirrored
topics only with --delete-mirrored-topics, and the state topics (unless --keep-state).

The runner journals these steps like promote's; when the last one is done it writes the
completion record and archives the journal (journal.close).
"""

from __future__ import annotations

from cutover.plan import Plan
from cutover.switch.effects import Detail, Effects
from cutover.switch.leftovers import CATALOG
from cutover.switch.steps import Step

FINAL_VERIFY = "final-verify"


def _verify() -> Step:
    return Step(FINAL_VERIFY, "verify every table pair once more; stop here, removing nothing, unless all pass",
                lambda fx: fx.final_verify())


def _retire() -> Step:
    return Step("retire-mirrors", "mark both mirrors ended in their state (a mirror process still running, or "
                "started later, exits with code 8), stop the background reverse mirror, fence every mirror "
                "process of this plan", lambda fx: fx.retire_mirrors())


def _clear(name: str, does: str, *kinds: str) -> Step:
    def act(fx: Effects) -> Detail:
        return fx.clear(kinds)  # type: ignore[arg-type]
    return Step(name, does, act)


def complete(plan: Plan) -> list[Step]:
    steps = [_verify()] if plan.spec.tables else []
    steps.append(_retire())
    if plan.spec.tables:
        steps.append(_clear("remove-shadow-leftovers", "remove the shadow's leftovers the plan's complete section "
                            "names (new tables, dead-letter tables, stopped runs' commit branches) and the "
                            "checkpoints of the tables it drops", *CATALOG))
    steps.append(_clear("remove-mirror-state", "delete both mirrors' state topics (kept with --keep-state)",
                        "state-topic"))
    return steps


def cancel(plan: Plan) -> list[Step]:
    steps = [_retire(),
             _clear("remove-groups", "delete the consumer groups whose offsets the mirror committed on the new "
                    "cluster (none may have members)", "group")]
    if plan.spec.tables:
        steps.append(_clear("remove-shadow-tables", "drop and purge the shadow's new tables and dead-letter "
                            "tables, remove its commit branches and its checkpoints", *CATALOG))
    steps += [_clear("remove-mirrored-topics", "delete the topics the mirror created on the new cluster (only "
                     "with --delete-mirrored-topics; the old cluster's topics are never touched)", "mirrored-topic"),
              _clear("remove-mirror-state", "delete both mirrors' state topics (kept with --keep-state)",
                     "state-topic")]
    return steps
