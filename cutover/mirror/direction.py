"""When each direction of the mirror may be used: forward (old -> new) until a promote, reverse (new -> old)
from a promote until a rollback.

The reverse mirror carries the records clients write on the new cluster back to the old one,
so that a rollback loses nothing. Before any promote there is nothing of the kind to carry:
a reverse mirror run then would copy the forward mirror's own copies back where they came
from (or map them), create its state topics on the old cluster and commit the new cluster's
groups there. After a rollback the clients write to the old cluster again and the forward
mirror runs: a reverse mirror would copy in the direction nobody writes. Likewise, once a
promote closed the forward mirror, what writes old -> new (a group sync) would bring the old
cluster's stale offsets over the ones clients now commit on the new cluster.

The evidence is the switch's mark in the forward mirror's state, on the new cluster (where
every mirror process reads it), never the journal: a mirror may run on a host that has no
journal. Promote's drain-mirror step writes it ("closed"), rollback's reopen-mirror step
("open"), complete and cancel theirs ("closed" by complete or cancel). The switch's own steps
write in either direction whatever the mark says; these rules are for everyone else.
"""

from __future__ import annotations

from typing import Any

from cutover.common import iso_z
from cutover.errors import Refused
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.kafka.inspect import cluster_id
from cutover.mirror import state as st
from cutover.plan import Plan


def switch_mark(plan: Plan, timeout: float = DEFAULT_TIMEOUT, old_cluster: str | None = None) -> dict[str, Any] | None:
    """The switch's mark of this plan in the forward mirror's state (None: no switch has marked it). Read only:
    an absent state topic is no mark. `old_cluster`: the old cluster's id, when the caller knows it."""
    fwd = st.route(plan, "forward")
    return st.marks(fwd, old_cluster or cluster_id(fwd.source, timeout), timeout).get(plan.name)


def refusal(plan: Plan, direction: st.Direction, mark: dict[str, Any] | None, what: str,
            writes: bool) -> Refused | None:
    """Why `what` (a command of `direction`) must not run now; None when it may.

    Forward: reading always answers; writing is refused while the switch has the forward mirror closed.
    Reverse: reading is refused only before any promote, when there is nothing of the reverse direction to
    show; writing also after a rollback or once the migration ended."""
    if direction == "forward":
        closed = st.closed_by_switch(mark) if writes else None
        if closed is None or mark is None:
            return None
        if mark.get("action") in ("complete", "cancel"):
            return Refused(f"{what}: {closed}; nothing was written",
                           fix="nothing to do: the migration is over (cutover status shows its record)")
        return Refused(f"{what}: {mark.get('action', 'promote')} closed the forward mirror of plan {plan.name} (run "
                       f"{mark.get('run')}, {iso_z(mark.get('at', 0))}): the clients commit their offsets on the new "
                       "cluster now, and old -> new would bring the old cluster's stale ones over them; nothing was "
                       "written",
                       fix="nothing to do: the reverse mirror syncs the groups new -> old (cutover offsets sync "
                           "--reverse does it at once); old -> new runs again after cutover rollback --execute")
    if mark is None:
        fwd = st.route(plan, "forward")
        return Refused(f"{what}: there has been no promote of plan {plan.name} (no promote has closed its forward "
                       f"mirror: {fwd.progress_topic} on {fwd.state.describe()} holds no switch mark), so the "
                       "reverse direction (new -> old) has nothing to carry back; nothing was written",
                       fix="drop --reverse: before promote the forward mirror (old -> new) runs; cutover promote "
                           "--execute starts the reverse mirror itself")
    if not writes or (mark.get("forward") == "closed" and mark.get("action") not in ("complete", "cancel")):
        return None
    ended = st.closed_by_switch(mark)
    if ended:
        return Refused(f"{what}: {ended}; nothing was written",
                       fix="nothing to do: the migration is over (cutover status shows its record)")
    return Refused(f"{what}: plan {plan.name} was rolled back (cutover {mark.get('action', 'rollback')} run "
                   f"{mark.get('run')}, {iso_z(mark.get('at', 0))}): the clients write to the old cluster again and "
                   "the forward mirror (old -> new) runs, so nothing is to be carried new -> old; nothing was written",
                   fix="drop --reverse (the forward mirror runs now); the reverse mirror starts again at the next "
                       "cutover promote --execute")


def require(plan: Plan, direction: st.Direction, what: str, writes: bool, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Raise the refusal of `what` when `direction` may not be used now (see `refusal`)."""
    refused = refusal(plan, direction, switch_mark(plan, timeout), what, writes)
    if refused is not None:
        raise refused


def chosen(plan: Plan, reverse: bool, what: str, writes: bool, timeout: float = DEFAULT_TIMEOUT) -> st.Direction:
    """The direction of a command's --reverse flag, once allowed: --reverse only after a promote; what writes
    forward only while the switch has not closed the forward mirror (`what`: the command, without the flag)."""
    way: st.Direction = "reverse" if reverse else "forward"
    if reverse or writes:
        require(plan, way, f"cutover {what}{' --reverse' if reverse else ''}", writes, timeout)
    return way
