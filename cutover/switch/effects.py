"""Everything promote and rollback change, behind one interface, in two implementations.

`Live` acts on the clusters, tables, routing file and hooks; `DryRun` says what it would
do and changes nothing. Steps are written once against `Effects`; the walker picks the
implementation at the top (STYLE.md, "dry-run is a second implementation").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from cutover.common import exact
from cutover.errors import CutoverError
from cutover.mirror import state as st
from cutover.output import progress
from cutover.plan import ClusterSide, Plan, TablePair
from cutover.plan.model import Reader
from cutover.switch import background, handover, hooks, leftovers, platform, routing, schemas, sink, waits

Detail = dict[str, Any]


class Effects(Protocol):
    def hook(self, event: str, **context: str | None) -> Detail | None: ...
    def hold(self) -> Detail: ...
    def quiet(self, side: ClusterSide) -> Detail: ...
    def drain(self, direction: st.Direction) -> Detail: ...
    def groups_empty(self, side: ClusterSide) -> Detail: ...
    def sync_groups(self, direction: st.Direction) -> Detail: ...
    def arm_reverse_mirror(self) -> Detail: ...
    def reverse_mirror(self, on: bool) -> Detail: ...
    def reverse_mirror_running(self) -> Detail: ...
    def still_drained(self, direction: st.Direction) -> Detail: ...
    def reopen_mirror(self) -> Detail: ...
    def route(self, side: ClusterSide) -> Detail: ...
    def hand_over(self, pair: TablePair) -> Detail: ...
    def hand_back(self, pair: TablePair) -> Detail: ...
    def move_reader(self, reader: Reader, direction: st.Direction) -> Detail: ...
    def reader_started(self, reader: Reader, side: ClusterSide) -> Detail | None: ...
    def registry(self, direction: st.Direction, stage: str) -> Detail: ...
    def final_verify(self) -> Detail: ...
    def retire_mirrors(self) -> Detail: ...
    def clear(self, kinds: tuple[leftovers.Kind, ...]) -> Detail: ...


#: Evaluates the preconditions again (after a hold) and raises Refused if one no longer holds.
Recheck = Callable[[], Detail]


class Live:
    def __init__(self, plan: Plan, action: str, run: str, timeout: float, recheck: Recheck | None = None,
                 leave: leftovers.Leave = leftovers.DEFAULT) -> None:
        self.plan, self.action, self.run, self.timeout = plan, action, run, timeout
        self.recheck, self.leave = recheck, leave
        #: set by the walker: the step running now (for hook environments)
        self.step = ""
        #: per side, from wait-quiet to check-drained: since when its end offsets stood still, and where
        self._still: dict[ClusterSide, waits.Still] = {}
        #: per direction, the positions this run's last drain committed (its summary: no state read)
        self._drained: dict[st.Direction, dict[tuple[str, int], int]] = {}
        #: the sides whose freeze_producers hook returned in this run: evidence the producers stopped
        self._frozen: set[ClusterSide] = set()
        #: when this run first saw each Iceberg sink connector paused: one commit interval covers them all
        self._paused: sink.PausedSince = {}

    def hook(self, event: str, **context: str | None) -> Detail | None:
        if context.get("reader"):
            context.update(_reader_context(self.plan, str(context["reader"])))
        env = hooks.environment(self.plan, **{"action": self.action, "run": self.run, "step": self.step,
                                              "event": event, "active": routing.active(self.plan), **context})
        done = hooks.run(self.plan, event, env, float(self.plan.spec.switch.hook_timeout))
        if done is None and event in ("freeze_producers", "stop_consumers"):
            progress(f"  no {event} hook in the plan: do it by hand now; cutover waits for the result")
        elif event == "freeze_producers" and context.get("cluster") in ("old", "new"):
            self._frozen.add(context["cluster"])  # type: ignore[arg-type]
        return done

    def hold(self) -> Detail:
        detail = waits.hold(self.plan)
        if detail["held"] and self.recheck is not None:
            # Hours may have passed: the last verify aged, the mirror fell behind, consumers joined.
            progress("  released: checking every precondition again")
            detail.update(self.recheck())
        return detail

    def quiet(self, side: ClusterSide) -> Detail:
        evidence = side in self._frozen
        detail = waits.cluster_quiet(self.plan, side, self.timeout, evidence)
        highs = {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])): h for k, h in detail["ends"].items()}
        self._still[side] = (time.monotonic() - detail["still_seconds"], highs)
        detail["evidence"] = "the freeze_producers hook returned" if evidence else None
        detail["hold_until_still_for"] = waits.quiet_period(self.plan, evidence)
        return detail

    def drain(self, direction: st.Direction) -> Detail:
        from cutover.mirror import runner

        if direction == "reverse":
            background.stop(self.plan)
        else:  # no forward mirror may start from here on: it would copy back what the reverse mirror carries
            st.set_mark(self.plan, "closed", self.action, self.run, self.timeout)
        fenced = runner.fence_layouts(self.plan, direction, self.timeout)
        summary = runner.run(self.plan, runner.Options(direction=direction, until_caught_up=True, timeout=self.timeout,
                                                       for_switch=True, started_by=self.action), threading.Event())
        if summary.gaps:
            raise CutoverError(f"the {direction} mirror reports data deleted on the source before it was copied: "
                               + ", ".join(f"{p.topic}/{p.partition}" for p in summary.gaps),
                               fix="cutover mirror status shows the ranges; decide whether to go on by hand")
        positions = {(p.topic, p.partition): p.position for p in summary.partitions}
        waits.drained(self.plan, "old" if direction == "forward" else "new", positions, self.timeout)
        self._drained[direction] = positions
        detail: Detail = {"records": summary.records, "fenced_shards": fenced}
        if direction == "reverse":  # every cycle's so far: the rollback's summary takes this cycle's share
            detail["carried_back_total"] = carried_back(self.plan, self.timeout)
        return detail

    def _mirrored(self, direction: st.Direction) -> dict[tuple[str, int], int]:
        """Each partition's position in the mirror's committed progress: as this run's drain left it, else (a
        run resumed after the drain) as the mirror's state says."""
        from cutover.mirror import status

        if direction in self._drained:
            return dict(self._drained[direction])

        left = status.status(self.plan, direction, self.timeout)
        return {(p.topic, p.partition): p.position or 0 for p in left.partitions}

    def groups_empty(self, side: ClusterSide) -> Detail:
        return waits.groups_empty(self.plan, side, self.timeout)

    def sync_groups(self, direction: st.Direction) -> Detail:
        from cutover.mirror import groups

        outcomes = groups.sync_now(self.plan, direction, timeout=self.timeout)
        bad = [o for o in outcomes if o.reason or o.skipped]
        if bad:
            raise CutoverError("consumer groups could not be translated exactly: " + "; ".join(
                f"{o.group}: {o.reason or ', '.join(f'{t}/{p} {r}' for (t, p), r in sorted(o.skipped.items()))}"
                for o in bad), fix="fix the cause, then re-run to continue")
        unmirrored = {o.group: groups.unmirrored_topics(o.unmirrored) for o in outcomes if o.unmirrored}
        for group, topics in unmirrored.items():
            progress(f"  group {group} also reads topic(s) this plan does not mirror, left alone: "
                     + ", ".join(t["topic"] for t in topics))
        return {"groups": {o.group: {f"{t}/{p}": off for (t, p), off in sorted(o.committed.items())}
                           for o in outcomes}, "unmirrored": unmirrored}

    def arm_reverse_mirror(self) -> Detail:
        return background.arm(self.plan)

    def reverse_mirror(self, on: bool) -> Detail:
        return background.start(self.plan, wait=False) if on else background.stop(self.plan)

    def reverse_mirror_running(self) -> Detail:
        return background.confirm(self.plan)

    def still_drained(self, direction: st.Direction) -> Detail:
        """After the groups' sync: the source took no write since the drain, and its end offsets have stood
        still for the quiet period since wait-quiet. A record a producer the freeze missed wrote meanwhile is
        copied after all and the groups synced again, so it is not left behind on the cluster the clients
        leave. (Before promote's reverse mirror starts: it reads the forward map and the old cluster's end
        once, when it starts.)"""
        side: ClusterSide = "old" if direction == "forward" else "new"

        def redrain() -> None:
            self.drain(direction)
            self.sync_groups(direction)

        since = self._still.pop(side, None) or (time.monotonic(), None)
        # a run resumed here has no evidence from this run's freeze hook: it holds the whole quiet period
        period = waits.quiet_period(self.plan, side in self._frozen)
        return waits.still(waits.ends_reader(self.plan, side, self.timeout), lambda: self._mirrored(direction),
                           redrain, period, since, f"the {side} cluster")

    def reopen_mirror(self) -> Detail:
        return st.set_mark(self.plan, "open", self.action, self.run, self.timeout)

    def route(self, side: ClusterSide) -> Detail:
        body = routing.write(self.plan, side, self.run)
        return {"routing": body} if body else {"routing": None, "note": "the plan names no routing file"}

    def hand_over(self, pair: TablePair) -> Detail:
        if pair.new_writer != "shadow":  # the platform's table: the routing file names it once it caught up
            return platform.caught_up_new(self.plan, pair, self.timeout)
        if pair.writer_offsets == "iceberg-connect":  # the same connector goes on (start_new_writer)
            return sink.move(self.plan, pair, self.run, self.timeout, "forward", self._paused)
        detail = handover.hand_over(self.plan, pair, self.run, self.timeout)
        detail["rows_written"] = _write_canonical(self.plan, pair, self.timeout)
        return detail

    def hand_back(self, pair: TablePair) -> Detail:
        if pair.new_writer != "shadow":  # the old pipeline never stopped: the routing file names its table again
            return platform.caught_up_old(self.plan, pair, self.timeout)
        if pair.writer_offsets == "iceberg-connect":
            return sink.move(self.plan, pair, self.run, self.timeout, "reverse", self._paused)
        return handover.hand_back(self.plan, pair, self.run, self.timeout)

    def move_reader(self, reader: Reader, direction: st.Direction) -> Detail:
        from cutover.readers import translate

        return translate.move(self.plan, reader, direction, "execute", self.timeout)

    def reader_started(self, reader: Reader, side: ClusterSide) -> Detail | None:
        from cutover.readers import translate

        return translate.started(self.plan, reader, side, self.timeout)

    def registry(self, direction: st.Direction, stage: str) -> Detail:
        return (schemas.prepare if stage == "prepare" else schemas.final)(self.plan, direction, self.timeout)

    def final_verify(self) -> Detail:
        from cutover.errors import DifferencesFound
        from cutover.verify import run as verify_run

        result = verify_run.verify(self.plan, verify_run.Options(timeout=self.timeout))
        if not result.passed:
            failed = [t.table for t in result.tables if not t.passed]
            what = ", ".join(failed) or "the registry audit"
            raise DifferencesFound(f"the final verify did not pass ({what}); nothing was removed",
                                   fix="cutover verify shows the differences; fix them (or roll back with cutover "
                                       "rollback --execute) before completing")
        return {"verify": {t.table: {"passed": t.passed, **t.counts.as_dict()} for t in result.tables}}

    def retire_mirrors(self) -> Detail:
        """Mark both mirrors ended in their state, stop the background reverse mirror, and fence every mirror
        process of this plan (both directions, every shard layout): a running one ends with exit code 8."""
        from cutover.mirror import runner

        detail = st.retire(self.plan, self.action, self.run, self.timeout)
        detail["reverse_process"] = background.stop(self.plan)["stopped"]
        detail["fenced"] = {d: runner.fence_layouts(self.plan, d, self.timeout, spare=frozenset())
                            for d in detail["retired"]}
        return detail

    def clear(self, kinds: tuple[leftovers.Kind, ...]) -> Detail:
        items = leftovers.find(self.plan, self.action, kinds, self.leave, self.timeout)  # type: ignore[arg-type]
        for item in items:
            progress(f"  {item.line()}")
            if item.remove:
                leftovers.remove(self.plan, item, self.timeout)
        return {"removed": [i.as_dict() for i in items if i.remove], "kept": [i.as_dict() for i in items
                                                                              if not i.remove]}


class DryRun:
    """Says, in order, what `Live` would do. Changes nothing; reads only what a step's plan depends on."""

    def __init__(self, plan: Plan,
                 outside: Callable[[Any, st.Direction, float], dict[str, list[tuple[str, int]]]] | None = None,
                 action: str = "promote", leave: leftovers.Leave = leftovers.DEFAULT, timeout: float = 30.0) -> None:
        self.plan, self.action, self.leave, self.timeout = plan, action, leave, timeout
        self.lines: list[str] = []
        #: What a step's dry run could not find out (a cluster out of reach), each with why: an explanation that
        #: is not whole, which the command says (exit 1) rather than letting "would find nothing" pass for it.
        self.unknown: list[str] = []
        self.step = ""
        #: Reads which selected groups also read topics the plan does not mirror (read-only).
        self.outside = outside or _outside

    def _would(self, text: str) -> Detail:
        self.lines.append(text)
        return {"would": text}

    def _unknown(self, text: str) -> Detail:
        self.unknown.append(text)
        return self._would(f"({text})")

    def hook(self, event: str, **context: str | None) -> Detail | None:
        argv = hooks.command(self.plan, event)
        if argv is None:
            return None if event not in ("freeze_producers", "stop_consumers") else \
                self._would(f"no {event} hook: the operator does it by hand")
        extra = "".join(f" {k}={v}" for k, v in sorted(context.items()) if v is not None and k != "offsets")
        return self._would(f"run hook {event}: {' '.join(argv)}{extra}")

    def hold(self) -> Detail:
        flag = waits.postponed(self.plan)
        if flag is None:
            return self._would("no postpone file in the plan: go on at once")
        return self._would(f"hold while {flag} exists (it {'exists now' if flag.exists() else 'does not exist now'}); "
                           "once released, evaluate every precondition again and refuse if one no longer holds")

    def quiet(self, side: ClusterSide) -> Detail:
        g = self.plan.spec
        opened = (f"no transaction is open on its partitions (refuse, naming them, after "
                  f"{exact(g.switch.quiet_timeout)}s)")
        if hooks.command(self.plan, "freeze_producers") is not None:
            return self._would(f"once the freeze_producers hook has returned (evidence the producers stopped), wait "
                               f"until {opened}; that the {side} cluster's end offsets stand still is checked "
                               f"across the drain, for {exact(waits.quiet_period(self.plan, True))}s, at check-drained")
        floor = min(float(g.gates.quiet_period), waits.QUIET_FLOOR)
        return self._would(f"wait until the {side} cluster's end offsets stand still for {floor:.1f}s and {opened}; "
                           f"the rest of the {exact(g.gates.quiet_period)}s quiet period is checked across the drain, "
                           "at check-drained")

    def drain(self, direction: st.Direction) -> Detail:
        closing = "close the forward mirror to every other process (in its state), then " \
            if direction == "forward" else ""
        return self._would(f"{closing}run the {direction} mirror in this process until it has copied everything "
                           "(fencing any other mirror process of this plan)")

    def groups_empty(self, side: ClusterSide) -> Detail:
        return self._would(f"wait until the selected groups have no members on the {side} cluster "
                           f"(give up after {exact(self.plan.spec.switch.groups_timeout)}s)")

    def sync_groups(self, direction: st.Direction) -> Detail:
        from cutover.mirror import groups

        src, dst = ("old", "new") if direction == "forward" else ("new", "old")
        detail = self._would(f"translate every selected group's offsets {src} -> {dst} exactly and commit them")
        try:  # read-only: which selected groups also read topics the plan does not mirror
            others = self.outside(self.plan, direction, self.timeout)
        except CutoverError as exc:
            return self._unknown(f"could not read the groups on the {src} cluster: {exc.message}")
        for group, tps in others.items():
            topics = ", ".join(f"{t['topic']} (partitions {', '.join(map(str, t['partitions']))})"
                               for t in groups.unmirrored_topics(tps))
            self._would(f"group {group} also reads {topics}, which this plan does not mirror: those offsets are "
                        f"left alone (its consumers of those topics must keep reading the {src} cluster)")
        return detail

    def arm_reverse_mirror(self) -> Detail:
        return self._would("start the reverse mirror (new -> old) armed: it fences older reverse mirrors and loads "
                           "its state, then copies nothing until start-reverse-mirror says go")

    def reverse_mirror(self, on: bool) -> Detail:
        return self._would("start the reverse mirror (new -> old) in the background, without waiting for it" if on
                           else "stop the background reverse mirror")

    def reverse_mirror_running(self) -> Detail:
        return self._would(f"wait until the reverse mirror owns its partitions (give up after "
                           f"{background.READY_TIMEOUT:.0f}s)")

    def still_drained(self, direction: st.Direction) -> Detail:
        side = "old" if direction == "forward" else "new"
        held = waits.quiet_period(self.plan, hooks.command(self.plan, "freeze_producers") is not None)
        return self._would(f"check the {side} cluster took no write since the drain; copy any late record (a "
                           "producer the freeze missed) and sync the groups again before the clients switch; keep "
                           f"the freeze until its end offsets have stood still for {exact(held)}s since wait-quiet")

    def reopen_mirror(self) -> Detail:
        return self._would("mark the forward mirror as free to run again in its state on the new cluster (the "
                           "records the reverse mirror carried back it maps to their originals, never copies twice)")

    def registry(self, direction: st.Direction, stage: str) -> Detail:
        return self._would(schemas.explain(self.plan, direction, stage, 30.0))

    def final_verify(self) -> Detail:
        return self._would(f"verify {len(self.plan.spec.tables)} table pair(s) once more (Spark); stop here, "
                           "removing nothing, unless every one passes")

    def retire_mirrors(self) -> Detail:
        return self._would(f"mark both mirrors of plan {self.plan.name} ended in their state (a mirror started "
                           "later, or running now, exits with code 8), stop the background reverse mirror, and "
                           "fence every mirror process of the plan")

    def clear(self, kinds: tuple[leftovers.Kind, ...]) -> Detail:
        try:
            items = leftovers.find(self.plan, self.action, kinds, self.leave, self.timeout)  # type: ignore[arg-type]
        except CutoverError as exc:
            return self._unknown(f"could not list the {', '.join(kinds)}s: {exc.message}")
        if not items:
            return self._would(f"find no {', '.join(kinds)}: nothing to remove")
        for item in items:
            self._would(item.line())
        return {"items": [i.as_dict() for i in items]}

    def route(self, side: ClusterSide) -> Detail:
        path = routing.path(self.plan)
        return self._would(f"write {path}: active={side}" if path else "no routing file in the plan")

    def hand_over(self, pair: TablePair) -> Detail:
        if pair.new_writer != "shadow":
            return self._would(f"{pair.new}: check the {pair.new_writer} table holds, per partition, every record the "
                               f"mirror copied to {pair.topic} on the new cluster; the routing file then names it "
                               f"for {pair.old}")
        if pair.writer_offsets == "iceberg-connect":
            return self._would(f"{pair.old}: check the sink connector is paused or stopped and its coordinator "
                               f"committed every DataWritten on {pair.control_topic}; translate its group "
                               f"{pair.sink_group}, commit it on the new cluster, create {pair.control_topic} there "
                               "if missing, and stamp the table with its end offsets so the same connector goes "
                               "on from the new cluster")
        source = (f"consumer group {pair.writer_group}" if pair.writer_offsets == "group" else
                  f"offset columns of {pair.old}")
        return self._would(f"{pair.old}: read the old writer's positions ({source}), translate them, stamp them on "
                           "the table, and write it from the new cluster until caught up")

    def hand_back(self, pair: TablePair) -> Detail:
        if pair.new_writer != "shadow":
            return self._would(f"{pair.old}: check the old pipeline's table reached the reverse mirror's position on "
                               f"{pair.topic}; the routing file then names it again")
        if pair.writer_offsets == "iceberg-connect":
            return self._would(f"{pair.old}: the same, the other way: the sink's group {pair.sink_group} on the new "
                               "cluster translated back and committed on the old one, the table stamped with the "
                               f"old {pair.control_topic}'s end offsets")
        return self._would(f"{pair.old}: translate the table's new-cluster positions back and stamp them for "
                           "the old writer")

    def reader_started(self, reader: Reader, side: ClusterSide) -> Detail | None:
        from cutover.readers import translate

        check = translate.kind(reader.kind).started_check(reader, side)
        return None if check is None else self._would(f"reader {reader.name}: {check}")

    def move_reader(self, reader: Reader, direction: st.Direction) -> Detail:
        from cutover.readers import translate

        target: ClusterSide = "new" if direction == "forward" else "old"
        now = next((r for r in translate.positions(self.plan)[0] if r["reader"] == reader.name), None)
        where = now["location"] if now else ""
        return self._would(f"reader {reader.name}: "
                           + translate.kind(reader.kind).would_move(self.plan, reader, target, where, now))


def _reader_context(plan: Plan, name: str) -> dict[str, str | None]:
    """What a reader's stop and start hooks need beyond its name (its kind says: a flink reader's savepoint
    folder and start file)."""
    from cutover.readers import translate

    r = next(r for r in plan.spec.readers if r.name == name)
    return translate.kind(r.kind).hook_context(plan, r)


def _write_canonical(plan: Plan, pair: TablePair, timeout: float) -> int:
    """The one place the switch drives the parallel write path: cutover's writer catches the canonical
    table up from the new cluster, from the stamps the hand-over left. Returns the rows it wrote."""
    from cutover.shadow import job

    summary = job.run(plan, job.Options(cluster="new", table=pair.old, canonical=True, timeout=timeout),
                      threading.Event())
    return summary.rows


def _outside(plan: Plan, direction: st.Direction, timeout: float) -> dict[str, list[tuple[str, int]]]:
    from cutover.mirror import groups

    return groups.outside(plan, direction, timeout)


def carried_back(plan: Plan, timeout: float) -> int:
    """Records the reverse mirror has copied from the new cluster to the old one, in every cycle so far
    (copies only: the forward mirror's records it mapped back are not counted)."""
    return sum(pm.records for pm in st.carried_back(plan, timeout=timeout).values())
