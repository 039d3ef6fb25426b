"""Observe-only waits of the switch: the postpone file, a quiet cluster, empty consumer groups.

Each polls the live system until its condition holds or its deadline passes, says what
it is waiting for on stderr, and never changes anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cutover.errors import CutoverError, Refused
from cutover.kafka.clients import ClusterRef, admin
from cutover.kafka.inspect import list_groups, partition_counts
from cutover.kafka.offsets import group_members, log_offsets
from cutover.output import progress

TP = tuple[str, int]
POLL = 0.5
SAY_EVERY = 10.0


class Clock:
    """Time and sleep, injectable so the waits' logic is tested without waiting."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def ref(plan: Any, side: str) -> ClusterRef:
    return ClusterRef(side, plan.cluster(side))


def selected_partitions(plan: Any, side: str, timeout: float) -> list[TP]:
    """The plan's topics on one side (never cutover's internal topics)."""
    prefix = plan.spec.mirror.state_prefix
    counts = partition_counts(ref(plan, side), timeout)
    return [(t, p) for t, n in sorted(counts.items())
            if plan.spec.topics.matches(t) and not t.startswith(prefix) and not t.startswith("__")
            for p in range(n)]


def selected_groups(plan: Any, side: str, timeout: float) -> list[str]:
    return [g for g in list_groups(ref(plan, side), timeout) if plan.spec.groups.matches(g)]


def postponed(plan: Any) -> Path | None:
    name = plan.spec.switch.postpone_file
    return plan.base_dir / name if name else None


def hold(plan: Any, clock: Clock | None = None) -> dict[str, Any]:
    """Wait while the postpone file exists (no deadline: the operator decides)."""
    clock = clock or Clock()
    flag = postponed(plan)
    started = clock.now()
    said = -SAY_EVERY
    while flag is not None and flag.exists():
        if clock.now() - said >= SAY_EVERY:
            progress(f"  holding: postpone file {flag} exists; remove it to go on "
                     f"(held {clock.now() - started:.0f}s)")
            said = clock.now()
        clock.sleep(POLL)
    return {"postpone_file": str(flag) if flag else None, "held_seconds": round(clock.now() - started, 3)}


def quiet(read_ends: Callable[[], dict[TP, int]], period: float, deadline: float, where: str,
          clock: Clock | None = None) -> dict[str, Any]:
    """Wait until end offsets stand still for `period` seconds; refuse if writes go on past `deadline`."""
    clock = clock or Clock()
    started = clock.now()
    ends = read_ends()
    still_since, moved = started, 0
    last_move: tuple[TP, int, int] | None = None
    said = started
    while clock.now() - still_since < period:
        if clock.now() - started > deadline:
            tp, a, b = last_move if last_move else (("?", -1), 0, 0)
            raise Refused(f"writes keep arriving on {where} after the freeze: {moved} partition moves in "
                          f"{deadline:.0f}s, the last {tp[0]}/{tp[1]} from offset {a} to {b}",
                          fix="make the freeze_producers hook stop every producer, then re-run to continue "
                              "(or cutover rollback to resume on the old cluster)")
        clock.sleep(POLL)
        now_ends = read_ends()
        changed = [(tp, ends.get(tp, 0), o) for tp, o in now_ends.items() if o != ends.get(tp)]
        if changed:
            moved += len(changed)
            last_move = changed[-1]
            still_since = clock.now()
        ends = now_ends
        if clock.now() - said >= SAY_EVERY:
            progress(f"  waiting for {where} to be quiet for {period:.0f}s ({moved} partition moves so far)")
            said = clock.now()
    return {"quiet_seconds": round(clock.now() - started, 3), "moves": moved,
            "ends": {f"{t}/{p}": o for (t, p), o in sorted(ends.items())}}


def cluster_quiet(plan: Any, side: str, timeout: float) -> dict[str, Any]:
    tps = selected_partitions(plan, side, timeout)
    cluster = ref(plan, side)
    client = admin(cluster)
    return quiet(lambda: log_offsets(cluster, tps, "high", timeout, client),
                 float(plan.spec.gates.quiet_period), float(plan.spec.switch.quiet_timeout),
                 f"the {side} cluster")


def groups_empty(plan: Any, side: str, timeout: float, clock: Clock | None = None) -> dict[str, Any]:
    """Wait until no selected group has members on `side`."""
    clock = clock or Clock()
    started = clock.now()
    deadline = float(plan.spec.switch.groups_timeout)
    names = selected_groups(plan, side, timeout)
    client_ref = ref(plan, side)
    client = admin(client_ref)
    said = started
    while True:
        active = {g: n for g, n in group_members(client_ref, names, timeout, client).items() if n}
        if not active:
            return {"groups": names, "waited_seconds": round(clock.now() - started, 3)}
        if clock.now() - started > deadline:
            raise CutoverError(
                f"consumer groups still have members on the {side} cluster {deadline:.0f}s after stop_consumers: "
                + ", ".join(f"{g} ({n} members)" for g, n in sorted(active.items())),
                fix="make the stop_consumers hook stop them, then re-run to continue")
        if clock.now() - said >= SAY_EVERY:
            progress(f"  waiting for {len(active)} group(s) to empty on the {side} cluster: "
                     + ", ".join(sorted(active)[:5]))
            said = clock.now()
        clock.sleep(POLL)
