"""Preconditions: named checks that refuse (exit 3) with "expected X, found Y" reasons.

A refusal is not an error: each check says what it wanted and what it found. An error
while checking (a cluster that does not answer) is reported as the check's reason too,
so a dry-run always lists every check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cutover.common import exact
from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import group_members
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import LagGate
from cutover.switch import hooks, journal, waits
from cutover.verify.results import LastVerify

if TYPE_CHECKING:
    from cutover.mirror.status import MirrorStatus


@dataclass(frozen=True)
class Check:
    name: str
    #: What must hold, in words.
    expects: str
    #: None when it holds, else why not.
    test: Callable[[], str | None]


@dataclass(frozen=True)
class Outcome:
    name: str
    expects: str
    refusal: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expects": self.expects, "passed": self.refusal is None, "reason": self.refusal}


def evaluate(checks: list[Check]) -> list[Outcome]:
    """Every check side by side, the outcomes in the checks' order: with a cluster out of reach, a dry run (or a
    refused execute) waits about one timeout, not one per check that asks that cluster."""
    if not checks:
        return []
    with ThreadPoolExecutor(len(checks), thread_name_prefix="precondition") as pool:
        return list(pool.map(_outcome, checks))


def _outcome(c: Check) -> Outcome:
    try:
        reason = c.test()
    except CutoverError as exc:
        reason = f"could not check: {exc.message}"
    return Outcome(c.name, c.expects, reason)


def lock_free(plan: Plan) -> Check:
    def test() -> str | None:
        who = journal.holder(journal.directory(plan))
        return f"another promote or rollback holds the lock: {who}" if who else None
    return Check("not-running", "no other promote or rollback is running for this plan", test)


def verified(plan: Plan, run_now: Callable[[], None] | None = None, at_execute: bool = False) -> Check:
    """`run_now`: verify first (promote --verify); `at_execute`: a dry run of promote --verify, which runs no
    verify (it records results on the tables) and says so beside what it read."""
    gates = plan.spec.gates
    limit = float(gates.verify_max_age)

    def test() -> str | None:
        from cutover.verify.run import last_result

        if run_now is not None:
            run_now()
        results = {pair.new: last_result(plan, pair.new) for pair in plan.spec.tables}
        refused = verify_refusal(results, dt.datetime.now(dt.UTC), limit, gates.max_lag_rows)
        if refused and at_execute:
            return (f"{refused}; with --verify, promote --execute runs cutover verify before this check: the dry "
                    "run changes nothing, so it read the last recorded results")
        return refused
    return Check("verify-passed", f"every table's last verify passed, at most {exact(limit)}s ago", test)


def verify_refusal(results: Mapping[str, LastVerify | None], now: dt.datetime, limit: float,
                   gate: LagGate) -> str | None:
    """Every table's every reason its last verify does not let the switch go (pure: the results are given)."""
    problems = []
    for table, last in results.items():
        if last is None:
            problems.append(f"{table} has never been verified")
            continue
        age = (now - dt.datetime.fromisoformat(last.at)).total_seconds()
        behind = _lag_over(gate, last)
        if not last.passed:
            problems.append(f"the last verify of {table} ({last.at}) did not pass")
        if behind:
            problems.append(f"the last verify of {table} ({last.at}): {behind}")
        if age > limit:
            problems.append(f"the last verify of {table} is {age / 60:.0f} min old; gates.verify_max_age is "
                            f"{exact(limit / 60)} min")
    return "; ".join(problems) + " (run cutover verify, or promote --verify)" if problems else None


def _lag_over(gate: LagGate, last: LastVerify) -> str | None:
    """The recorded lag against the plan's lag gate, now (a result recorded under other gates counts too)."""
    old_ahead, new_ahead = last.lag.old_ahead, last.lag.new_ahead
    if old_ahead > gate.old_ahead:
        return (f"the old table held {old_ahead} rows beyond the new table's position (gates.max_lag_rows.old_ahead "
                f"is {gate.old_ahead}): the new write path was behind, and those rows were never compared")
    if gate.new_ahead is not None and new_ahead > gate.new_ahead:
        return (f"the new table held {new_ahead} rows beyond the old table's position (gates.max_lag_rows.new_ahead "
                f"is {gate.new_ahead})")
    return None


def mirror_lag(plan: Plan, timeout: float) -> Check:
    gate = plan.spec.gates.max_mirror_lag

    def test() -> str | None:
        from cutover.mirror import status

        return mirror_refusal(status.status(plan, "forward", timeout), gate)
    return Check("mirror-lag", f"the forward mirror is at most {gate} records behind on every partition", test)


def mirror_refusal(s: MirrorStatus, gate: int) -> str | None:
    """Every partition the mirror has not started on, every retention gap, every partition over the lag gate
    (pure: the mirror's status is given)."""
    if not s.partitions:
        return "no selected topic exists on the old cluster"
    unmirrored = [f"{p.topic}/{p.partition}" for p in s.partitions if p.position is None]
    gaps = [f"{p.topic}/{p.partition} offsets {g.start}..{g.end - 1}" for p, g in s.gaps]
    over = [p for p in s.partitions if p.position is not None and p.lag > gate]
    problems = []
    if unmirrored:
        problems.append(f"the mirror has not started on {len(unmirrored)} partition(s): {', '.join(unmirrored)} "
                        "(run cutover mirror)")
    if gaps:
        problems.append(f"the mirror reports data deleted before it was copied on "
                        f"{len({(p.topic, p.partition) for p, _g in s.gaps})} partition(s): {', '.join(gaps)}")
    if over:
        problems.append(f"mirror lag > gate {gate} on {len(over)} partition(s): "
                        + ", ".join(f"{p.topic}/{p.partition} ({p.lag})" for p in over))
    return "; ".join(problems) or None


def groups_idle(plan: Plan, source: ClusterSide, target: ClusterSide, timeout: float) -> Check:
    def test() -> str | None:
        ref = ClusterRef.of(plan, target)
        return busy_refusal(group_members(ref, waits.selected_groups(plan, source, timeout), timeout), target)
    return Check(f"groups-idle-on-{target}", f"the selected groups have no active members on the {target} cluster",
                 test)


def busy_refusal(members: Mapping[str, int], target: ClusterSide) -> str | None:
    """Every selected group with members on the target (pure: the member counts are given)."""
    busy = {g: n for g, n in members.items() if n}
    if busy:
        return f"consumer groups have active members on the {target} cluster: " + ", ".join(
            f"{g} ({n})" for g, n in sorted(busy.items()))
    return None


def routing_usable(plan: Plan) -> Check:
    """The routing file reads as cutover wrote it, and its folder takes the new one (checked before the freeze,
    not found out at switch-clients)."""
    def test() -> str | None:
        import os

        from cutover.switch import routing

        routing.read(plan)  # a broken file raises, and is reported as the reason
        path = routing.path(plan)
        if path is None:
            return None
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"cannot write the routing file {path}: {folder} is not writable by this user"
        return None
    return Check("routing-file", "the routing file reads as cutover wrote it, and its folder is writable", test)


def hooks_runnable(plan: Plan) -> Check:
    def test() -> str | None:
        problems = hooks.check(plan)
        return "; ".join(problems) if problems else None
    return Check("hooks", "every hook in the plan exists and is executable", test)


def readers_movable(plan: Plan) -> Check:
    def test() -> str | None:
        from cutover.readers.translate import positions

        problems = positions(plan)[1]
        return "; ".join(p for _name, p, _fix in problems) if problems else None
    return Check("readers-movable", "every declared reader can be moved: its checkpoint, state folder, savepoint "
                 "folder or offsets topic is there, and what it reads is selected", test)


def tables_handover(plan: Plan) -> Check:
    def test() -> str | None:
        from cutover.lake import tables

        ours = [pair for pair in plan.spec.tables if pair.new_writer == "shadow"]  # not a platform's table: its
        # hand-over is the routing file's, once it caught up (switch/platform.py)
        problems = [p for p in (pair.handover_problem() for pair in ours) if p]
        for pair in ours:
            problems += _accepts(tables, plan, pair)
        problems += [f"table {pair.new} does not exist (its platform, {pair.new_writer}, makes it at its first record)"
                     for pair in plan.spec.tables if pair.new_writer != "shadow" and not tables.exists(plan, pair.new)]
        return "; ".join(problems) if problems else None
    return Check("tables-handover", "each old (canonical) table can take cutover's rows, and the plan says where "
                 "its writer stands", test)


def _accepts(tables: Any, plan: Plan, pair: Any) -> list[str]:
    """The canonical table must hold every column of the new table, with the same type."""
    _s, _c, old = tables.snapshots(plan, pair.old)
    _s, _c, new = tables.snapshots(plan, pair.new)
    sink = pair.writer_offsets == "iceberg-connect"  # the same sink goes on writing it: cutover writes no row there
    missing = ([] if old is not None else [f"table {pair.old} does not exist"]) + (
        [] if new is not None or sink else [f"table {pair.new} does not exist (run cutover shadow)"])
    if missing or sink:
        return missing
    assert old is not None and new is not None
    have = {f.name: str(f.field_type) for f in old.schema().fields}
    wrong = [f"{f.name} ({f.field_type})" for f in new.schema().fields if have.get(f.name) != str(f.field_type)]
    if wrong:
        return [f"table {pair.old} lacks or types differently the column(s) {', '.join(wrong)} that cutover writes"]
    return []


def phase(history: journal.History, action: str) -> Check:
    def test() -> str | None:
        now = history.phase()
        if now in ("completed", "cancelled"):
            record = history.ended or {}
            return (f"this migration was {now} at {record.get('at')} (record {record.get('record')}): its plan is "
                    "done; to migrate again, write a new plan (another name)")
        if now in ("completing", "cancelling") and action not in ("complete", "cancel"):
            ending = "complete" if now == "completing" else "cancel"
            return f"a {ending} is unfinished: re-run cutover {ending} --execute to finish it"
        if action == "promote" and now == "rolling-back":
            return "a rollback is unfinished: re-run cutover rollback to finish it"
        if action == "rollback" and now in ("ready", "rolled-back"):
            return f"there is nothing to roll back (phase {now})"
        if action == "complete" and now not in ("promoted", "completing"):
            return (f"complete follows a finished promote; the phase is {now}"
                    + (" (before any promote, cutover cancel ends the migration instead)" if now in
                       ("ready", "rolled-back") else ""))
        if action == "cancel" and now not in ("ready", "rolled-back", "cancelling"):
            return (f"cancel ends a migration before any promote (or after a finished rollback); the phase is {now}"
                    + (": roll back first (cutover rollback --execute), or finish with cutover complete"
                       if now in ("promoted", "promoting", "rolling-back") else ""))
        return None
    return Check("phase", f"the migration's phase allows {action}", test)


def verified_since_promote(plan: Plan, history: journal.History) -> Check:
    """complete: each pair's last verify passed after the last promote finished (the final verify runs again)."""
    def test() -> str | None:
        from cutover.verify.run import last_result

        promoted = history.last_finished("promote")
        since = dt.datetime.fromtimestamp(promoted.ended or promoted.started, dt.UTC) if promoted else None
        return since_promote_refusal({pair.new: last_result(plan, pair.new) for pair in plan.spec.tables}, since)
    return Check("verify-since-promote", "every table's last verify passed after the last promote", test)


def since_promote_refusal(results: Mapping[str, LastVerify | None], since: dt.datetime | None) -> str | None:
    """Every table never verified, verified before the promote, or whose last verify failed (pure)."""
    problems = []
    for table, last in results.items():
        if last is None:
            problems.append(f"{table} has never been verified")
            continue
        if since is not None and dt.datetime.fromisoformat(last.at) < since.replace(microsecond=0):
            problems.append(f"the last verify of {table} ({last.at}) is stale: it is older than the promote "
                            f"({since.isoformat(timespec='seconds')})")
        if not last.passed:
            problems.append(f"the last verify of {table} ({last.at}) did not pass")
    return "; ".join(problems) + " (run cutover verify)" if problems else None


def no_readers_on_old(plan: Plan, timeout: float) -> Check:
    def test() -> str | None:
        from cutover.kafka.inspect import list_groups
        from cutover.kafka.offsets import readers

        ref = ClusterRef.of(plan, "old")
        found = readers(ref, list_groups(ref, timeout), plan.spec.topics.matches, timeout)
        if found:
            return ("consumers still read the old cluster's selected topics: " + ", ".join(
                f"group {g} ({', '.join(t)})" for g, t in sorted(found.items()))
                + "; move them to the new cluster (or stop them) first")
        return None
    return Check("no-readers-on-old", "no consumer group on the old cluster has a member reading a selected topic",
                 test)


def shadow_stopped(plan: Plan, names: list[str]) -> Check:
    """The tables about to be dropped take no commits: their newest snapshot is older than three triggers."""
    idle = max(3 * float(plan.spec.spark.trigger_interval), 15.0)

    def test() -> str | None:
        import time

        from cutover.lake import tables

        busy = []
        for name in names:
            snaps, _current, _tbl = tables.snapshots(plan, name)
            newest = max((s.timestamp_ms for s in snaps), default=0) / 1000
            if newest and time.time() - newest < idle:
                busy.append(f"{name} (last commit {time.time() - newest:.0f}s ago)")
        return ("the shadow still commits to " + ", ".join(busy) + ": stop cutover shadow first") if busy else None
    return Check("shadow-stopped", f"no table about to be dropped took a commit in the last {idle:.0f}s", test)


def registry_ids(plan: Plan, direction: str, timeout: float) -> Check:
    def test() -> str | None:
        from cutover.switch import schemas

        return schemas.refusal(plan, direction, timeout)
    src, dst = ("old", "new") if direction == "forward" else ("new", "old")
    return Check("registry-ids-match", f"the {dst} schema registry can take every schema of the {src} one under its "
                 "id (no other schema under a needed id)"
                 + (", and every schema id in the new cluster's records means the same schema on both registries"
                    if direction == "forward" else ""), test)


def rights_match(plan: Plan, direction: str, timeout: float) -> Check:
    def test() -> str | None:
        from cutover.rights import run

        return run.refusal(plan, "forward" if direction == "forward" else "reverse", timeout)
    src, dst = ("old", "new") if direction == "forward" else ("new", "old")
    return Check("rights-match", f"every principal of the selection may do on the {dst} cluster what it may do on "
                 f"the {src} one, no less (and no more, unless rights.allow_extra); credentials in the plan "
                 "authenticate", test)
