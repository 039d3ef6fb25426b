"""Observe-only waits of the switch: the postpone file, a quiet cluster, empty consumer groups.

Each polls the live system until its condition holds or its deadline passes, says what
it is waiting for on stderr, and never changes anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cutover.common import TP
from cutover.errors import CutoverError, Refused
from cutover.kafka.clients import ClusterRef, admin
from cutover.kafka.inspect import list_groups, partition_counts
from cutover.kafka.offsets import group_members, log_offsets
from cutover.output import progress
from cutover.plan import ClusterSide, Plan

POLL = 0.5
SAY_EVERY = 10.0
#: How long wait-quiet sees the end offsets stand still before the drain may begin. The rest of
#: `gates.quiet_period` is proven by check-drained, overlapping the drain and the groups' sync.
QUIET_FLOOR = 0.5


class Clock:
    """Time and sleep, injectable so the waits' logic is tested without waiting."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def selected_partitions(plan: Plan, side: ClusterSide, timeout: float) -> list[TP]:
    """The plan's topics on one side (never cutover's internal topics)."""
    prefix = plan.spec.mirror.state_prefix
    counts = partition_counts(ClusterRef.of(plan, side), timeout)
    return [(t, p) for t, n in sorted(counts.items())
            if plan.spec.topics.matches(t) and not t.startswith(prefix) and not t.startswith("__")
            for p in range(n)]


def selected_groups(plan: Plan, side: ClusterSide, timeout: float) -> list[str]:
    return [g for g in list_groups(ClusterRef.of(plan, side), timeout) if plan.spec.groups.matches(g)]


def postponed(plan: Plan) -> Path | None:
    name = plan.spec.switch.postpone_file
    return plan.base_dir / name if name else None


def hold(plan: Plan, clock: Clock | None = None) -> dict[str, Any]:
    """Wait while the postpone file exists (no deadline: the operator decides)."""
    clock = clock or Clock()
    flag = postponed(plan)
    started = clock.now()
    said = -SAY_EVERY
    held = flag is not None and flag.exists()
    while flag is not None and flag.exists():
        if clock.now() - said >= SAY_EVERY:
            progress(f"  holding: postpone file {flag} exists; remove it to go on "
                     f"(held {clock.now() - started:.0f}s)")
            said = clock.now()
        clock.sleep(POLL)
    return {"postpone_file": str(flag) if flag else None, "held": held,
            "held_seconds": round(clock.now() - started, 3)}


#: Per partition: (high watermark, last stable offset).
Ends = dict[TP, tuple[int, int]]


def quiet(read_ends: Callable[[], Ends], period: float, deadline: float, where: str,
          clock: Clock | None = None, bootstrap: str = "HOST:PORT") -> dict[str, Any]:
    """Wait until the high watermarks stand still for `period` seconds and no transaction is open.

    A transaction left open (an exactly-once app paused mid-transaction, a producer killed
    less than its transaction timeout ago) holds a partition's last stable offset below
    its high watermark: its records and every record behind it are not readable committed
    yet, so the mirror's drain would stop short of them and report no lag. Such a
    transaction is waited out within `deadline` (a commit or an abort both leave nothing
    behind), then refused, naming it: cutover never aborts someone else's transaction.
    """
    clock = clock or Clock()
    started = clock.now()
    ends = read_ends()
    still_since, moved = started, 0
    last_move: tuple[TP, int, int] | None = None
    seen_open: set[TP] = set()
    said = started
    while True:
        pending = _open(ends)
        seen_open |= set(pending)
        if clock.now() - still_since >= period and not pending:
            break
        if clock.now() - started > deadline:
            if pending and clock.now() - still_since >= period:
                raise _open_refusal(where, pending, deadline, bootstrap)
            tp, a, b = last_move if last_move else (("?", -1), 0, 0)
            raise Refused(f"writes keep arriving on {where} after the freeze: {moved} partition moves in "
                          f"{deadline:.0f}s, the last {tp[0]}/{tp[1]} from offset {a} to {b}",
                          fix="make the freeze_producers hook stop every producer, then re-run to continue "
                              "(or cutover rollback to resume on the old cluster)")
        clock.sleep(POLL)
        now_ends = read_ends()
        changed = [(tp, ends.get(tp, (0, 0))[0], hs[0]) for tp, hs in now_ends.items()
                   if hs[0] != ends.get(tp, (None, None))[0]]
        if changed:
            moved += len(changed)
            last_move = changed[-1]
            still_since = clock.now()
        ends = now_ends
        if clock.now() - said >= SAY_EVERY:
            waiting = _open(ends)
            progress(f"  waiting for {where} to be quiet for {period:.0f}s ({moved} partition moves so far"
                     + (f"; a transaction is open on {', '.join(f'{t}/{p}' for t, p in sorted(waiting)[:5])}"
                        if waiting else "") + ")")
            said = clock.now()
    return {"quiet_seconds": round(clock.now() - started, 3), "moves": moved,
            "still_seconds": round(clock.now() - still_since, 3), "open_transactions_seen": len(seen_open),
            "ends": {f"{t}/{p}": hs[0] for (t, p), hs in sorted(ends.items())}}


def _open(ends: Ends) -> dict[TP, tuple[int, int]]:
    """Partitions whose last stable offset is below the high watermark: (stable, high)."""
    return {tp: (stable, high) for tp, (high, stable) in ends.items() if stable < high}


def _open_refusal(where: str, pending: dict[TP, tuple[int, int]], waited: float, bootstrap: str) -> Refused:
    shown = sorted(pending.items())
    ranges = ", ".join(f"{t}/{p}: offsets {lso}..{hw - 1} are undecided" for (t, p), (lso, hw) in shown[:10])
    (t, p), (lso, _hw) = shown[0]
    tool = f"kafka-transactions.sh --bootstrap-server {bootstrap}"
    return Refused(
        f"a transaction is open on {where} on {ranges}{' (and more)' if len(shown) > 10 else ''}; it stayed "
        f"open for {waited:.0f}s after the freeze. Its records, and every record written behind it, cannot be "
        "read committed yet, so the mirror would stop before them: nothing irreversible was done",
        fix=f"find the producer: {tool} describe-producers --topic {t} --partition {p} (and {tool} list); let "
            f"its application commit or abort, or, if it is hanging (its producer is gone), abort it: {tool} "
            f"abort --topic {t} --partition {p} --start-offset {lso}; then re-run to continue "
            "(or cutover rollback to resume)")


def ends_reader(plan: Plan, side: ClusterSide, timeout: float) -> Callable[[], Ends]:
    """Reads (high watermark, last stable offset) of the plan's partitions on one side."""
    tps = selected_partitions(plan, side, timeout)
    cluster = ClusterRef.of(plan, side)
    client = admin(cluster, warm_for=timeout)

    def read() -> Ends:
        high = log_offsets(cluster, tps, "high", timeout, client)
        stable = log_offsets(cluster, tps, "end", timeout, client)
        return {tp: (high[tp], stable[tp]) for tp in tps}

    return read


def cluster_quiet(plan: Plan, side: ClusterSide, timeout: float, evidence: bool) -> dict[str, Any]:
    """wait-quiet: no transaction is open and, without evidence, the end offsets stand still for QUIET_FLOOR
    (at most the quiet period). With evidence (the freeze_producers hook returned), one reading with no open
    transaction is enough: the ends standing still is proven by `still` (check-drained), across the drain."""
    period = 0.0 if evidence else min(float(plan.spec.gates.quiet_period), QUIET_FLOOR)
    return quiet(ends_reader(plan, side, timeout), period, float(plan.spec.switch.quiet_timeout),
                 f"the {side} cluster", bootstrap=ClusterRef.of(plan, side).bootstrap)


def quiet_period(plan: Plan, evidence: bool) -> float:
    """How long check-drained holds the freeze after wait-quiet's reading: the quiet period, or with the freeze
    hook's evidence the (shorter) confirmation window."""
    period = float(plan.spec.gates.quiet_period)
    return min(period, float(plan.spec.gates.quiet_confirm)) if evidence else period


#: When the end offsets were last seen to move (a Clock time), and their high watermarks then.
Still = tuple[float, dict[TP, int] | None]


def still(read_ends: Callable[[], Ends], read_positions: Callable[[], dict[TP, int]], redrain: Callable[[], None],
          period: float, since: Still, where: str, clock: Clock | None = None, tries: int = 3) -> dict[str, Any]:
    """check-drained: the mirror's positions equal the high watermarks, and have done so for `period` seconds
    since the end offsets last moved, so the freeze held for the whole quiet period.

    `since` comes from wait-quiet in the same run (the drain and the groups' sync then count toward the
    period); a run resumed here starts the period now. A record written after the drain (a producer the
    freeze missed) is copied by `redrain` and the period starts again; after `tries` re-drains, refused.
    """
    clock = clock or Clock()
    started, seen = since
    late: dict[str, int] = {}
    redrains = 0
    said_at: float | None = None
    positions = read_positions()  # they only move when this re-drains
    while True:
        ends = read_ends()
        now = clock.now()
        behind = left_behind(ends, positions)
        if behind:
            for (t, p), (position, high) in behind.items():
                late[f"{t}/{p}"] = late.get(f"{t}/{p}", 0) + high - position
            if redrains == tries:
                raise Refused(f"writes keep arriving on {where} after the freeze and the drain: "
                              + ", ".join(f"{k} (+{n})" for k, n in sorted(late.items())[:10]),
                              fix="make the freeze_producers hook stop every producer, then re-run to continue "
                                  "(or cutover rollback to resume where the clients are)")
            progress(f"  {where} took writes after the drain on {len(behind)} partition(s) (a producer the freeze "
                     "missed): copying them before the clients switch")
            redrain()
            redrains += 1
            positions = read_positions()
            started, seen = clock.now(), None
            continue
        highs = {tp: high for tp, (high, _stable) in ends.items()}
        if seen is not None and highs != seen:  # moved between wait-quiet and the drain (which copied it)
            started = now
        seen = highs
        left = period - (now - started)
        if left <= 0:
            return {"late_offsets": late, "still_seconds": round(now - started, 3)}
        if said_at is None or now - said_at >= SAY_EVERY:
            progress(f"  keeping {where} frozen until its end offsets have stood still for {period:.0f}s "
                     f"({left:.1f}s to go)")
            said_at = now
        clock.sleep(min(left, POLL))


def drained(plan: Plan, side: ClusterSide, positions: dict[TP, int], timeout: float) -> None:
    """After a drain: every partition's mirrored position is at its high watermark, so no record,
    committed or still undecided in an open transaction, is left behind (refused otherwise)."""
    ends = ends_reader(plan, side, timeout)()
    pending = _open(ends)
    if pending:
        raise _open_refusal(f"the {side} cluster", pending, 0, ClusterRef.of(plan, side).bootstrap)
    behind = left_behind(ends, positions)
    if behind:
        raise CutoverError("the mirror is still behind after draining: " + ", ".join(
            f"{t}/{p} at {a} of {b}" for (t, p), (a, b) in sorted(behind.items())[:10]),
            fix="writes are still arriving: check the freeze, then re-run to continue")


def left_behind(ends: Ends, positions: dict[TP, int]) -> dict[TP, tuple[int, int]]:
    """Partitions whose mirrored position is below the high watermark: (position, high watermark)."""
    return {tp: (positions.get(tp, 0), high) for tp, (high, _stable) in ends.items() if positions.get(tp, 0) < high}


def groups_empty(plan: Plan, side: ClusterSide, timeout: float, clock: Clock | None = None) -> dict[str, Any]:
    """Wait until no selected group has members on `side`."""
    clock = clock or Clock()
    started = clock.now()
    deadline = float(plan.spec.switch.groups_timeout)
    names = selected_groups(plan, side, timeout)
    client_ref = ClusterRef.of(plan, side)
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
