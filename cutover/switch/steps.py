"""Promote and rollback as data: ordered, named, idempotent steps built from the plan.

The same list is walked twice: by the runner against `Live` effects, and by the
dry-run against `DryRun`. A step's name is its identity in the journal, so a re-run
skips the steps a crashed run finished and repeats the one it died in (every step is
idempotent: waits re-observe, drains copy what is left, syncs commit the same offsets,
hand-overs find their stamp).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cutover.common import exact
from cutover.mirror.state import Direction
from cutover.plan import ClusterSide, Plan, TablePair
from cutover.plan.model import Reader
from cutover.readers import translate
from cutover.switch import handover
from cutover.switch.effects import Detail, Effects
from cutover.switch.journal import History

#: Once this step of promote has started, clients may write to the new cluster.
POINT_OF_NO_RETURN = "switch-clients"
FREEZE_STARTS, FREEZE_ENDS = "freeze-producers", "switch-clients"
#: Promote's first step: it changes nothing, so an attempt that stopped there begins again.
HOLD = "hold"
#: The last step before the point of no return: nothing written on the side the clients leave is left behind.
CHECK_DRAINED = "check-drained"
ARM_REVERSE, START_REVERSE, REVERSE_RUNNING = "arm-reverse-mirror", "start-reverse-mirror", "reverse-mirror-running"
SYNC_REGISTRY, OPEN_REGISTRY = "sync-registry", "open-registry"


@dataclass(frozen=True)
class Step:
    name: str
    #: What it does, in words (dry-run, status, progress).
    does: str
    act: Callable[[Effects], Detail | None]


def _all(*parts: Detail | None) -> Detail:
    out: Detail = {}
    for p in parts:
        out.update(p or {})
    return out


def _stop_consumers(side: ClusterSide) -> Callable[[Effects], Detail]:
    return lambda fx: _all({"hook": fx.hook("stop_consumers", cluster=side)}, fx.groups_empty(side))


def _switch(side: ClusterSide) -> Callable[[Effects], Detail]:
    return lambda fx: _all(fx.route(side), {"hook": fx.hook("switch_clients", active=side)})


def _hand_over(pair: TablePair) -> Callable[[Effects], Detail]:
    def act(fx: Effects) -> Detail:
        stopped = fx.hook("stop_old_writer", table=pair.old)
        detail = fx.hand_over(pair)
        started = fx.hook("start_new_writer", table=pair.old)
        return _all(detail, {"hooks": [h for h in (stopped, started) if h]})
    return act


def _hand_back(pair: TablePair) -> Callable[[Effects], Detail]:
    def act(fx: Effects) -> Detail:
        stopped = fx.hook("stop_new_writer", table=pair.old)
        detail = fx.hand_back(pair)
        offsets = handover.positions_env(detail, "old_positions") if "topic" in detail else None
        started = fx.hook("start_old_writer", table=pair.old, offsets=offsets)
        return _all(detail, {"hooks": [h for h in (stopped, started) if h]})
    return act


def _platform(pair: TablePair, side: ClusterSide) -> Callable[[Effects], Detail]:
    """A table the new cluster's platform writes: checked caught up before the routing file names it (promote), or
    names the old pipeline's again (rollback): switch/platform.py."""
    return lambda fx: fx.hand_over(pair) if side == "new" else fx.hand_back(pair)


def _move_reader(r: Reader, direction: Direction) -> Step:
    side: ClusterSide = "old" if direction == "forward" else "new"
    target: ClusterSide = "new" if direction == "forward" else "old"

    def act(fx: Effects) -> Detail:
        stopped = fx.hook("stop_reader", reader=r.name, cluster=side)
        return _all(fx.move_reader(r, direction), {"hook": stopped})
    what = translate.kind(r.kind).step_text(r, target)
    return Step(f"move-reader:{r.name}", f"stop reader {r.name} (hook stop_reader); {what}", act)


def _start_reader(r: Reader, side: ClusterSide) -> Step:
    def act(fx: Effects) -> Detail:
        started = fx.hook("start_reader", reader=r.name, active=side)
        return _all({"hook": started}, {"resumed": fx.reader_started(r, side)})
    said = translate.kind(r.kind).started_check(r, side)
    check = f"; {said}" if said else ""
    return Step(f"start-reader:{r.name}", f"start reader {r.name} on the {side} cluster (hook start_reader){check}",
                act)


def _check(side: ClusterSide, direction: Direction) -> Step:
    return Step(CHECK_DRAINED, f"check the {side} cluster took no write since the drain and its end offsets have "
                "stood still since wait-quiet for the quiet period (the confirmation window when the freeze hook "
                "returned); a late record (a producer the freeze missed) is copied, and the groups synced again, "
                "before the clients switch", lambda fx: fx.still_drained(direction))


def _wait_quiet(plan: Plan, side: ClusterSide) -> Step:
    if plan.spec.hooks.get("freeze_producers"):
        what = (f"wait until no transaction is open on the {side} cluster (the freeze_producers hook having returned, "
                f"its end offsets must then stand still for {exact(plan.spec.gates.quiet_confirm)}s, checked "
                "across the drain, to check-drained)")
    else:
        what = (f"wait until the {side} cluster's end offsets stand still and no transaction is open (the "
                f"{exact(plan.spec.gates.quiet_period)}s quiet period runs on across the drain, to check-drained)")
    return Step("wait-quiet", what, lambda fx: fx.quiet(side))


def _reopen() -> Step:
    return Step("reopen-mirror", "let the forward mirror (old -> new) run again; the records the reverse mirror "
                "carried back it maps to their originals on the new cluster, never copies twice",
                lambda fx: fx.reopen_mirror())


def _registry(plan: Plan, direction: Direction, stage: str) -> list[Step]:
    """The registry's steps, when the plan has one: the bulk sync before the freeze, the last one within it."""
    if plan.spec.registry is None:
        return []
    src, dst = ("old", "new") if direction == "forward" else ("new", "old")
    if stage == "prepare":
        return [Step(SYNC_REGISTRY, f"sync the {src} schema registry to the {dst} one, every schema under its id"
                     + (", and audit the new cluster's records' schema ids" if direction == "forward" else ""),
                     lambda fx: fx.registry(direction, "prepare"))]
    return [Step(OPEN_REGISTRY, f"sync what the {src} registry took since; open the moved subjects on the {dst} "
                 "registry for writes (out of IMPORT mode)", lambda fx: fx.registry(direction, "final"))]


def promote(plan: Plan) -> list[Step]:
    steps = [
        Step(HOLD, "hold while the postpone file exists; once released, check every precondition again",
             lambda fx: fx.hold()),
        *_registry(plan, "forward", "prepare"),
    ]
    if plan.spec.switch.reverse_mirror:
        steps.append(Step(ARM_REVERSE, "start the reverse mirror (new -> old) armed, before the freeze: it copies "
                          "nothing and reads nothing of the forward mirror's progress until start-reverse-mirror",
                          lambda fx: fx.arm_reverse_mirror()))
    steps += [
        Step("freeze-producers", "freeze producers on the old cluster (hook freeze_producers)",
             lambda fx: fx.hook("freeze_producers", cluster="old")),
        _wait_quiet(plan, "old"),
        Step("drain-mirror", "drain the mirror (old -> new) to zero lag", lambda fx: fx.drain("forward")),
        Step("stop-consumers", "stop consumers (hook stop_consumers); wait until the groups are empty on old",
             _stop_consumers("old")),
        Step("sync-groups", "commit every group's exactly translated offsets on the new cluster",
             lambda fx: fx.sync_groups("forward")),
        *(_move_reader(r, "forward") for r in plan.spec.readers),
    ]
    steps.append(_check("old", "forward"))
    steps += _registry(plan, "forward", "final")
    if plan.spec.switch.reverse_mirror:
        steps.append(Step(START_REVERSE, "start the reverse mirror (new -> old) so rollback loses nothing: tell the "
                          "armed one to go; it reads the drained forward map and the old cluster's ends, which the "
                          "freeze fixed, so the clients need not wait for it", lambda fx: fx.reverse_mirror(True)))
    steps += [Step(f"hand-over:{p.old}", f"check {p.new}, which the new cluster's platform writes, holds every record "
                   f"of {p.topic} (the old pipeline goes on, on the old cluster: rollback's table)",
                   _platform(p, "new")) for p in plan.spec.tables if p.new_writer != "shadow"]
    steps.append(Step(POINT_OF_NO_RETURN, "point the routing file at the new cluster (and each table a platform "
                      "writes); hook switch_clients", _switch("new")))
    steps += [Step(f"hand-over:{p.old}", f"stop the old writer of {p.old}; continue it from the new cluster at "
                   "the translated offsets", _hand_over(p)) for p in plan.spec.tables if p.new_writer == "shadow"]
    steps += [_start_reader(r, "new") for r in plan.spec.readers]
    steps.append(Step("resume", "resume producers and consumers, now on the new cluster (hook resume)",
                      lambda fx: fx.hook("resume", active="new")))
    if plan.spec.switch.reverse_mirror:
        steps.append(Step(REVERSE_RUNNING, "wait until the reverse mirror started at start-reverse-mirror owns its "
                          "partitions and copies (start it if a resumed run finds none)",
                          lambda fx: fx.reverse_mirror_running()))
    return steps


def past_point_of_no_return(history: History) -> bool:
    return any(s.name == POINT_OF_NO_RETURN for r in history.promote_attempt() for s in r.steps)


def rollback(plan: Plan, history: History) -> list[Step]:
    promoted = {s.name for r in history.promote_attempt() for s in r.steps}
    if not past_point_of_no_return(history):
        steps = []
        if promoted & {ARM_REVERSE, START_REVERSE}:
            steps.append(Step("stop-reverse-mirror", "stop the background reverse mirror",
                              lambda fx: fx.reverse_mirror(False)))
        # a reader moved before the promote stopped goes back to where it was, on the old cluster
        moved = [r for r in plan.spec.readers if f"move-reader:{r.name}" in promoted]
        steps += [_move_reader(r, "reverse") for r in moved]
        steps += [_start_reader(r, "old") for r in moved]
        steps.append(_reopen())
        steps.append(Step("resume", "resume producers and consumers on the old cluster (hook resume)",
                          lambda fx: fx.hook("resume", active="old")))
        return steps
    steps = [
        *_registry(plan, "reverse", "prepare"),
        Step("freeze-producers", "freeze producers on the new cluster (hook freeze_producers)",
             lambda fx: fx.hook("freeze_producers", cluster="new")),
        _wait_quiet(plan, "new"),
        Step("drain-reverse-mirror", "drain the reverse mirror (new -> old) to zero lag",
             lambda fx: fx.drain("reverse")),
        Step("stop-consumers", "stop consumers (hook stop_consumers); wait until the groups are empty on new",
             _stop_consumers("new")),
        Step("sync-groups", "commit every group's exactly translated offsets back on the old cluster",
             lambda fx: fx.sync_groups("reverse")),
        *(_move_reader(r, "reverse") for r in plan.spec.readers if f"move-reader:{r.name}" in promoted),
        _check("new", "reverse"),
        *_registry(plan, "reverse", "final"),
    ]
    steps += [Step(f"hand-back:{p.old}", f"check {p.old}, which the old pipeline went on writing, holds every record "
                   "the reverse mirror carried back", _platform(p, "old"))
              for p in plan.spec.tables if f"hand-over:{p.old}" in promoted and p.new_writer != "shadow"]
    steps.append(Step(POINT_OF_NO_RETURN, "point the routing file back at the old cluster (and each table); hook "
                      "switch_clients", _switch("old")))
    steps += [Step(f"hand-back:{p.old}", f"stop cutover's writer of {p.old}; restart the old writer at the "
                   "translated offsets", _hand_back(p))
              for p in plan.spec.tables if f"hand-over:{p.old}" in promoted and p.new_writer == "shadow"]
    steps += [_start_reader(r, "old") for r in plan.spec.readers if f"move-reader:{r.name}" in promoted]
    steps.append(_reopen())
    steps.append(Step("resume", "resume producers and consumers, on the old cluster again (hook resume)",
                      lambda fx: fx.hook("resume", active="old")))
    return steps
