"""One mirror process: prepare topics and state, then copy, sync groups and report until done.

Order matters for exactly-once: the transactional producer is initialised (fencing
any older process of this shard and aborting its open transaction) before the
committed progress is read, so the progress read is the one the target will keep.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cutover.common import NETWORK_TIMEOUT, TP, in_flight
from cutover.errors import CutoverError, ExitCode, Refused
from cutover.kafka import capabilities
from cutover.kafka.clients import admin
from cutover.kafka.inspect import cluster_id
from cutover.kafka.offsets import log_offsets, replaced
from cutover.mirror import direction, groups, owner, schemas, topics
from cutover.mirror import state as st
from cutover.mirror.copier import Copier, Fenced, transactional_id, went_back
from cutover.mirror.idempotent import IdempotentCopier
from cutover.mirror.metrics import Metrics
from cutover.mirror.offsetmap import PartitionMap, SourceWentBack, out_of_range
from cutover.mirror.shard import Shard
from cutover.output import progress
from cutover.plan import Plan
from cutover.plan.endpoint import Endpoint

log = logging.getLogger("cutover.mirror")


@dataclass(frozen=True)
class Options:
    direction: st.Direction = "forward"
    shard: Shard = field(default_factory=Shard)
    until_caught_up: bool = False
    allow_existing_target: bool = False
    allow_rewind: bool = False
    #: where to serve the Prometheus metrics (mirror/metrics.py); None: nowhere
    metrics_at: Endpoint | None = None
    timeout: float = NETWORK_TIMEOUT
    #: Seconds between progress lines on stderr.
    report_every: float = 5.0
    #: A transaction's batch: at most these records, about these bytes of values, read for at most
    #: these seconds. Bytes bound memory; records only keep a batch of tiny records from growing past
    #: what one transaction should hold (each commit waits for the producer's backlog: fewer is faster).
    #: A backlog of large records is copied in 256 MB transactions: at 64 KB a record, 64 MB ones took
    #: 1.10x the time and about 0.6x the peak RSS (bench/README.md, "The mirror's batch").
    batch_records: int = 200_000
    batch_bytes: int = 256 * 1024 * 1024
    batch_seconds: float = 0.5
    #: Called once the process owns its partitions and knows where each resumes.
    on_ready: Callable[[], None] | None = None
    #: An armed start (promote's reverse mirror, started before the freeze): called after the producer's
    #: init and the state's load, before anything that depends on the other direction's progress is read;
    #: it blocks until the switch says go (True) or the run is called off (False: exit, nothing copied).
    gate: Callable[[], bool] | None = None
    #: The switch's own drain: runs although the switch has closed the forward mirror to everyone else.
    for_switch: bool = False
    #: Takes each report instead of the progress line and the metrics (a worker of `--workers`).
    reporter: Callable[[Progress], None] | None = None
    #: Who started this process, for its owner record (mirror/owner.py): "hand", "promote" (the reverse mirror
    #: promote starts), or the switch action whose drain this is (with `for_switch`).
    started_by: str = "hand"


@dataclass(frozen=True)
class Progress:
    """A run's report: totals so far, and per partition the source end and the mirror's position."""

    direction: str
    shard: str
    records: int
    bytes: int
    transactions: int
    ends: dict[TP, int]
    positions: dict[TP, int]
    #: Group -> when this run last synced it.
    synced: dict[str, float]


@dataclass
class Run:
    plan: Plan
    opts: Options
    stop: threading.Event
    rt: st.Route = field(init=False)
    source_cluster: str = ""
    topics: dict[str, int] = field(default_factory=dict)
    prior: dict[TP, PartitionMap] | None = None
    group_outcomes: list[groups.GroupOutcome] = field(default_factory=list)
    #: Group -> when this run last synced it.
    synced: dict[str, float] = field(default_factory=dict)
    #: When the last progress report was made, and the totals (records, bytes, transactions) it said.
    last_report: float = 0.0
    reported: tuple[int, int, int] = (0, 0, 0)
    #: One admin client per side for the run's offset reads (a new client per read costs its
    #: connections and metadata, and a cold one now and then 1 to 3 s waiting for leaders).
    _admins: dict[str, AdminClient] = field(default_factory=dict)
    #: The progress topic's view, read incrementally at each group sync (made once the source is known).
    _progress: st.ProgressReader | None = None
    #: The owner record of the shard when this process started (None: none), and this process's own.
    prior_owner: dict[str, Any] | None = None
    owner: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rt = st.route(self.plan, self.opts.direction)

    @property
    def progress(self) -> st.ProgressReader:
        if self._progress is None:
            self._progress = st.ProgressReader(self.rt, self.source_cluster, self.opts.timeout)
        return self._progress

    def admin(self, side: str) -> AdminClient:
        """The run's admin client of its "source" or "target" cluster."""
        if side not in self._admins or replaced(self._admins[side]):
            ref = self.rt.source if side == "source" else self.rt.target
            self._admins[side] = admin(ref, warm_for=self.opts.timeout)
        return self._admins[side]

    def forget_clients(self) -> None:
        """Drop the run's admin clients: the next call makes new ones (librdkafka's admin client does not
        look up a partition its metadata does not have yet, it fails)."""
        self._admins.clear()

    def offsets(self, side: str, tps: Iterable[TP], which: str) -> dict[TP, int]:
        """Log offsets on the run's "source" or "target" cluster, through the run's client for that side."""
        ref = self.rt.source if side == "source" else self.rt.target
        return log_offsets(ref, tps, which, self.opts.timeout, self.admin(side))


def run(plan: Plan, opts: Options, stop: threading.Event) -> RunSummary:
    """Mirror until caught up (or until `stop` is set). Returns the run's summary."""
    r = Run(plan, opts, stop)
    metrics = Metrics(opts.metrics_at, opts.direction)  # a port in use is named before any cluster is asked
    rt, sel = r.rt, plan.spec.topics
    r.source_cluster, target_cluster = st.cluster_ids(rt, opts.timeout)
    if not opts.for_switch:  # before anything is written; a switch's drain follows a mirror that asked already
        capabilities.require(capabilities.listed(rt.target.properties, rt.target.name, opts.timeout),
                             capabilities.mirror_needs(plan.spec.mirror.mode), "cutover mirror")
    seen = st.Overview()  # the switch's drains read nothing of it: the switch fenced every layout itself
    if not opts.for_switch:  # before fencing anyone or writing anything
        seen = r.progress.overview()
        _refuse_while_switched(plan, seen.marks)
        if opts.direction == "reverse" and opts.gate is None:  # an armed one asks once the switch said go
            fwd = st.route(plan, "forward")
            _refuse_reverse(plan, st.marks(fwd, target_cluster, opts.timeout))
        r.prior_owner = seen.owners.get((plan.name, str(opts.shard)))
    r.topics = topics.selected_topics(rt, sel.include, sel.matches, rt.prefix, opts.timeout)
    limit, codec = topics.write_settings(rt, r.topics, plan.spec.mirror.compression, opts.timeout)
    kind = IdempotentCopier if plan.spec.mirror.mode == "idempotent" else Copier
    copier = kind(rt, transactional_id(rt, plan.name, opts.shard), opts.shard, limit, codec, opts.timeout)
    try:
        copier.init()
        _take(r)
        if isinstance(copier, IdempotentCopier):  # recorded before the state (and the switch's mark) is read: a
            # switch that closed the mirror before this record either sees it and waits, or this process sees
            # its mark and ends (fence_layouts); nothing fences it otherwise
            st.ensure_topics(rt, plan.spec.mirror.replication_factor, opts.timeout)
            st.note(rt, [st.owner_record(r.source_cluster, plan.name, str(opts.shard), r.owner)], opts.timeout)
        _fence_other_layouts(r, seen)
        state = st.load(rt, r.source_cluster, timeout=opts.timeout)
        if not opts.for_switch:
            _refuse_while_switched(plan, state.marks)  # closed while this process was starting
        if opts.gate is not None:
            if not opts.gate():
                return _summary(r, copier, 0.0)
            r.topics = topics.selected_topics(rt, sel.include, sel.matches, rt.prefix, opts.timeout)  # as of go
        if opts.direction == "reverse":
            fwd = st.route(plan, "forward")
            forward = st.load(fwd, cluster_id(fwd.source, opts.timeout), timeout=opts.timeout)
            if not opts.for_switch:  # complete or cancel may have removed this direction's state, not the other's
                _refuse_reverse(plan, forward.marks)
            if not forward.partitions and not state.partitions:
                raise Refused(f"the reverse mirror of plan {plan.name} found no state of its own on "
                              f"{rt.state.describe()} and no forward mirror's map on {fwd.state.describe()} "
                              f"({fwd.offsets_topic}): it would copy every record of the new cluster back to the "
                              "old one, where they came from",
                              fix="the reverse mirror runs after a promote, which starts it; if complete or cancel "
                                  "removed the state, the migration is over: remove this mirror's service")
            r.prior = forward.partitions
        copier.others = _opposite(r)
        _prepare_topics(r, {t for t, _p in state.partitions} | state.created, set(state.partitions))
        st.ensure_topics(rt, plan.spec.mirror.replication_factor, opts.timeout)
        copier.limits = topics.target_limits(rt, list(r.topics), opts.timeout)
        copier.refresh_limit = lambda t: topics.target_limits(rt, [t], opts.timeout).get(t, 1 << 31)
        copier.assign(r.source_cluster, _starting_points(r, state, set(copier.maps)), state.logs.get(str(opts.shard)),
                      state.intents.get(str(opts.shard)))
        copier.note(st.owner_record(r.source_cluster, plan.name, str(opts.shard), r.owner))  # its first transaction
        if opts.on_ready:
            opts.on_ready()
        try:
            return _loop(r, copier, metrics)
        except KafkaException as exc:  # a client error no step named (a fenced producer's, in a race): named
            raise copier.classified(exc, "mirroring") from None
    except Fenced as exc:
        if opts.for_switch:
            raise
        _refuse_while_switched(plan, r.progress.overview().marks)  # the switch's drain (complete, cancel) took it?
        raise _successor(r, exc) from None
    finally:
        copier.close()


#: How long a fenced process waits for its successor's owner record (written with the successor's first
#: transaction, once it has loaded its state: seconds, usually) to name it.
SUCCESSOR_WAIT = 30.0


def _take(r: Run) -> None:
    """Once this process's producer fenced the shard's older ones: say whom it took the shard from (a process
    that still ran, as far as can be known), and make this process's owner record."""
    prior = r.prior_owner if owner.running(r.prior_owner) else None
    if prior is not None:
        known = "" if owner.alive(prior) else " (if it still runs)"
        progress(f"taking over the {r.rt.direction} mirror's shard {r.opts.shard} from {owner.describe(prior)}"
                 f"{known}: fenced now, it stops at its next transaction and writes nothing more")
    r.owner = owner.mine(r.opts.started_by, r.opts.for_switch, prior)


def _successor(r: Run, fenced: Fenced) -> Fenced:
    """The error of a process another one fenced, naming that one once it has recorded itself."""
    deadline = time.monotonic() + min(r.opts.timeout, SUCCESSOR_WAIT)
    while True:
        found = _newer_owner(r, r.progress.overview())
        if found is not None:
            shard, record = found
            return Fenced(f"{fenced.message}; the {r.rt.direction} mirror's shard {shard} runs now as "
                          f"{owner.describe(record)}",
                          fix="nothing to do if that process is the one meant to run it (one process per shard, one "
                              "layout of shards: the newer carries on); otherwise stop it first, then start this one "
                              "again (cutover status shows who holds each shard)")
        if time.monotonic() > deadline:
            return Fenced(f"{fenced.message}; the process that took it over did not record itself within "
                          f"{min(r.opts.timeout, SUCCESSOR_WAIT):.0f}s (cutover status shows it once it does)",
                          fix=fenced.fix)
        time.sleep(0.5)


def _newer_owner(r: Run, seen: st.Overview) -> tuple[str, dict[str, Any]] | None:
    """(shard, record) of the process that took this one's shard: a newer owner of the same shard, else one of
    another layout that started after this process (it fences the layouts before its own)."""
    shard = str(r.opts.shard)
    same = seen.owners.get((r.plan.name, shard))
    if same is not None and not owner.same(same, r.owner) and not owner.same(same, r.prior_owner):
        return shard, same
    since = float(r.owner.get("started_at") or 0)
    others = [(float(rec.get("started_at") or 0), s, rec) for (name, s), rec in seen.owners.items()
              if name == r.plan.name and Shard.parse(s).count != r.opts.shard.count and rec.get("ended") is None
              and float(rec.get("started_at") or 0) >= since]
    return max(others, key=lambda o: o[0])[1:] if others else None


def _closed_at_sync(r: Run, copier: Copier, seen: st.Overview) -> None:
    """End the run if the switch closed this mirror. In idempotent mode the process first records its end: the
    switch, which has no transactional id to fence it by, waits for that (see `fence_layouts`)."""
    try:
        _refuse_while_switched(r.plan, seen.marks)
    except ClosedBySwitch:
        if isinstance(copier, IdempotentCopier):
            copier.note(st.owner_record(r.source_cluster, r.plan.name, str(r.opts.shard),
                                        owner.ended(r.owner, "closed by the switch")))
            copier.commit(copier.read(0, 0, 0))
        raise


def _stop_if_taken(r: Run, seen: st.Overview) -> None:
    """In idempotent mode, stop once another process has recorded itself as this shard's owner (or a newer
    layout's): without transactions the broker cannot fence this one."""
    found = _newer_owner(r, seen)
    if found is not None:
        shard, record = found
        raise Fenced(f"the {r.rt.direction} mirror's shard {shard} was taken over by {owner.describe(record)}: this "
                     "process stopped (idempotent mode: the target has no transactions to fence it, so it stops at "
                     "its first group sync after the other started)",
                     fix="run each shard in exactly one process; the newer process carries on")


class ClosedBySwitch(CutoverError):
    """The switch closed the forward mirror (promote drained it): the end it was run for, not a failure."""

    exit_code = ExitCode.CLOSED_BY_SWITCH


def _refuse_while_switched(plan: Plan, marks: dict[str, Any]) -> None:
    mark = marks.get(plan.name)
    reason = st.closed_by_switch(mark)
    if reason and mark and mark.get("action") in ("complete", "cancel"):
        raise ClosedBySwitch(f"the migration ended: {reason}",
                             fix="nothing to do: remove this mirror's service (exit code 8 tells the shipped systemd "
                                 "units and Kubernetes manifest it is done)")
    if reason:
        raise ClosedBySwitch(f"the switch closed this mirror: {reason}",
                             fix="nothing to do: this is how a forward mirror ends at promote (exit code 8, which the "
                                 "shipped systemd units and Kubernetes manifest treat as done); it runs again after "
                                 "cutover rollback --execute has finished")


def refuse_reverse(plan: Plan, timeout: float) -> None:
    """Before any process of a reverse run starts (`--workers`): refused unless a promote closed the forward
    mirror, as each process would be (see _refuse_reverse)."""
    fwd = st.route(plan, "forward")
    _refuse_reverse(plan, st.marks(fwd, cluster_id(fwd.source, timeout), timeout))


def _refuse_reverse(plan: Plan, marks: dict[str, Any]) -> None:
    """A reverse mirror runs only after a promote closed the forward mirror (`marks`: the forward state's), and
    ends with exit 8 once complete or cancel ended the migration (see mirror/direction.py)."""
    _refuse_while_switched(plan, {k: m for k, m in marks.items() if m.get("action") in ("complete", "cancel")})
    refused = direction.refusal(plan, "reverse", marks.get(plan.name), "cutover mirror --reverse", writes=True)
    if refused is not None:
        raise refused


def _opposite(r: Run) -> dict[TP, PartitionMap]:
    """The other direction's maps, for the records it wrote on this mirror's source (see Copier._copies).

    Forward after a rollback: the reverse mirror's copies on the old cluster. Reverse after a second
    promote: the forward mirror's copies on the new cluster. Read once: the other direction is stopped
    while this one runs (the switch closes the forward mirror before the reverse one starts, and stops
    the reverse mirror before the forward one reopens).
    """
    other = r.prior
    if other is None:
        if not r.plan.spec.switch.reverse_mirror:
            return {}  # nothing was ever carried back
        back = st.route(r.plan, "reverse")
        other = st.load(back, cluster_id(back.source, r.opts.timeout), timeout=r.opts.timeout).partitions
    return {tp: pm for tp, pm in other.items() if pm.segment_count and r.plan.spec.topics.matches(tp[0])}


def _prepare_topics(r: Run, ours: set[str], progressed: set[TP]) -> None:
    allow = r.opts.allow_existing_target or r.opts.direction == "reverse"
    changes = topics.plan_changes(r.rt, r.topics, ours, progressed, allow, r.opts.shard.owns, r.opts.timeout,
                                  (r.admin("source"), r.admin("target")))
    topics.apply(r.rt, changes, r.plan.spec.mirror.replication_factor, r.source_cluster, r.opts.timeout)
    if changes:  # the run's clients knew the target before its topics were made or grown: new ones
        r.forget_clients()


def _owned(r: Run) -> list[TP]:
    return [(t, p) for t, n in r.topics.items() for p in range(n) if r.opts.shard.owns(t, p)]


def _starting_points(r: Run, state: st.MirrorState, assigned: set[TP]) -> dict[TP, PartitionMap]:
    """Where each newly owned partition resumes: committed progress, else where it must begin."""
    todo = [tp for tp in _owned(r) if tp not in assigned]
    starts = r.offsets("source", todo, "start")
    resumed = [tp for tp in todo if tp in state.partitions]
    highs = r.offsets("source", resumed, "high")
    fresh = [tp for tp in todo if tp not in state.partitions]
    target_ends = r.offsets("target", fresh, "end")
    out = {}
    for tp in todo:
        pm = state.partitions.get(tp)
        if pm is None:
            begin = starts[tp]
            if r.prior is not None and tp in r.prior:  # reverse: only what the forward mirror did not write
                begin = max(begin, r.prior[tp].next_tgt)
            pm = PartitionMap(start_src=begin, next_src=begin, next_tgt=target_ends[tp])
        else:
            try:
                gap = out_of_range(pm.next_src, starts[tp], highs[tp])
            except SourceWentBack as exc:
                raise went_back(r.rt.source.describe(), tp, exc) from None
            if gap is not None:
                log.error("DATA LOSS ON THE SOURCE: %s partition %d offsets %d..%d (%d records) were deleted by "
                          "retention on %s before they were mirrored", tp[0], tp[1], gap.start, gap.end - 1,
                          gap.records, r.rt.source.describe())
                pm.gaps.append(gap)
                pm.next_src = gap.end
        out[tp] = pm
    return out


def _loop(r: Run, copier: Copier, metrics: Metrics) -> RunSummary:
    opts = r.opts
    goal = r.offsets("source", copier.maps, "end") if opts.until_caught_up else {}
    started = r.last_report = time.monotonic()
    in_flight(r.stop, lambda: "the transaction in flight" if copier.writing else
              "the batch being read (committed in one transaction)")
    schemas.follower(r.plan, opts.direction, opts.shard.index, not opts.until_caught_up and
                                 not opts.for_switch, r.stop, opts.timeout)
    _copy(r, copier, metrics, goal, started)
    if not opts.for_switch:  # the switch's drain: its sync-groups step syncs them after the consumers stopped
        _sync_groups(r, copier, metrics)
        how = "stopped" if r.stop.is_set() else "caught up"
        copier.note(st.owner_record(r.source_cluster, r.plan.name, str(opts.shard), owner.ended(r.owner, how)))
    copier.commit(copier.read(0, 0, 0))  # writes the group syncs, if any, and the end of this process's ownership
    _report(r, copier, metrics, time.monotonic() - r.last_report, r.reported)
    in_flight(r.stop, None)
    return _summary(r, copier, time.monotonic() - started)


def _copy(r: Run, copier: Copier, metrics: Metrics, goal: dict[TP, int], started: float) -> None:
    opts = r.opts
    last_sync = started if opts.until_caught_up else 0.0  # a catch-up run syncs once, at its end
    sync_every = float(r.plan.spec.mirror.group_sync_interval)
    # A catch-up run's reads end at its goal (the end offsets at its start), not at the batch time: `left` is the
    # goal's partitions not reached yet, kept up to date from what each batch touched (not a pass over them all).
    left = copier.short_of(goal)
    sync_cost = report_cost = 0.0  # what the last of each took: see `due`
    while not r.stop.is_set():
        # Each batch is written as it is read, in one transaction; librdkafka fetches the next meanwhile.
        batch = copier.copy(opts.batch_records, opts.batch_bytes, opts.batch_seconds,
                            left if opts.until_caught_up else None)
        now = time.monotonic()
        if now >= due(last_sync, sync_every, sync_cost):
            seen = r.progress.overview()  # what was committed to the progress topic since the last sync
            if not opts.for_switch:  # promote (complete, cancel) closed it: end, as designed
                _closed_at_sync(r, copier, seen)
            if isinstance(copier, IdempotentCopier):  # no broker fences an older process in this mode: it stops here
                _stop_if_taken(r, seen)
            if not opts.for_switch:  # the switch syncs the groups itself, once their consumers have stopped
                _sync_groups(r, copier, metrics)
            _follow_topics(r, copier, seen)
            last_sync, sync_cost = now, time.monotonic() - now
        if now >= due(r.last_report, opts.report_every, report_cost):
            began = time.monotonic()
            r.reported = _report(r, copier, metrics, now - r.last_report, r.reported)
            r.last_report, report_cost = now, time.monotonic() - began
        if goal:
            copier.drop_reached(left, batch)
            if not left:
                break
        if opts.until_caught_up and not goal:
            break


#: The periodic work of a run (the lag report, the groups' sync and following the source's topics) costs more
#: the more partitions and topics there are, and a catch-up run lasts longer too: at a fixed interval, their
#: share grew with the square of the partitions (at 12,000 partitions a third of a drain's CPU, listing every
#: end offset every 5 s and every topic's configs). Each is spaced so that it takes at most 1/PACE of the run.
PACE = 10.0


def due(last: float, every: float, cost: float) -> float:
    """When periodic work last done at `last`, which took `cost` seconds, is due again: after its interval
    `every`, or after PACE times its cost if that is longer."""
    return last + max(every, PACE * cost)


def _sync_groups(r: Run, copier: Copier, metrics: Metrics) -> None:
    tr = groups.Translator(copier.maps, r.prior)
    outcomes = groups.sync(r.rt, r.plan.spec.groups.matches, tr, lambda tp: tp in copier.maps,
                           r.opts.allow_rewind, r.opts.timeout, groups.mirrored(r.plan),
                           (r.admin("source"), r.admin("target")))
    r.group_outcomes = outcomes
    syncs = groups.record(outcomes)
    copier.record_groups(syncs)
    for s in syncs:
        metrics.synced(r.rt.direction, s.group, s.at)
        r.synced[s.group] = s.at


def _follow_topics(r: Run, copier: Copier, seen: st.Overview) -> None:
    """Follow the source while running: new matching topics, partitions added, topic configs changed.

    Any shard grows a topic the mirror owns, whether or not it owns one of its partitions (`seen`: the
    progress topic's view at this sync)."""
    sel = r.plan.spec.topics
    now = topics.selected_topics(r.rt, sel.include, sel.matches, r.rt.prefix, r.opts.timeout, r.admin("source"))
    grew, r.topics = now != r.topics, now
    _prepare_topics(r, seen.topics | {t for t, _p in copier.maps}, set(copier.maps))
    if not grew:
        return
    r.forget_clients()  # the source's topics changed since they were made
    copier.limits = topics.target_limits(r.rt, list(r.topics), r.opts.timeout)
    added = _starting_points(r, st.load(r.rt, r.source_cluster, with_map=False, timeout=r.opts.timeout),
                             set(copier.maps))
    if added:
        log.warning("mirroring %d more partitions: %s", len(added), sorted(added))
        copier.assign(r.source_cluster, added)


def _report(r: Run, copier: Copier, metrics: Metrics, elapsed: float,
            before: tuple[int, int, int]) -> tuple[int, int, int]:
    ends = r.offsets("source", copier.maps, "end")
    t = copier.totals
    positions = {tp: pm.next_src for tp, pm in copier.maps.items()}
    if r.opts.reporter is not None:
        r.opts.reporter(Progress(r.rt.direction, str(r.opts.shard), t.records, t.bytes, t.transactions, ends,
                                 positions, dict(r.synced)))
        return t.records, t.bytes, t.transactions
    metrics.observe(r.rt.direction, ends, positions)
    metrics.copied(r.rt.direction, t.records - before[0], t.bytes - before[1], t.transactions - before[2])
    say_progress(f"{r.rt.direction} {r.opts.shard}", t.records, t.bytes, before, elapsed,
                 topic_lag(ends, positions))
    return t.records, t.bytes, t.transactions


def topic_lag(ends: Mapping[TP, int], positions: Mapping[TP, int], into: dict[str, int] | None = None
              ) -> dict[str, int]:
    """Records behind the source's end, per topic (added to `into`, if given)."""
    lag = into if into is not None else {}
    for tp, end in ends.items():
        lag[tp[0]] = lag.get(tp[0], 0) + max(0, end - positions.get(tp, end))
    return lag


#: The most topics a progress line names (a mirror of thousands of topics named every one).
LAG_TOPICS = 10


def say_progress(who: str, records: int, nbytes: int, before: tuple[int, ...], elapsed: float,
                 lag: Mapping[str, int]) -> None:
    """The progress line: totals, the rate since the last line (records, bytes before it), lag per topic (the
    LAG_TOPICS topics furthest behind, then how many more and their lag)."""
    elapsed = max(elapsed, 1e-6)
    shown = sorted(sorted(lag.items()), key=lambda kv: -kv[1])[:LAG_TOPICS]
    lags = " ".join(f"{k}={v:,}" for k, v in sorted(shown))
    if len(lag) > len(shown):
        lags += f" and {len(lag) - len(shown):,} more topics={sum(lag.values()) - sum(v for _k, v in shown):,}"
    progress(f"mirror {who}: {records:,} records, {(records - before[0]) / elapsed:,.0f} rec/s, "
             f"{(nbytes - before[1]) / elapsed / 1e6:.1f} MB/s; lag {lags}")


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    position: int
    target_position: int
    gaps: tuple[tuple[int, int], ...]  # (start, end exclusive) lost to retention before they were mirrored

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "position": self.position,
                "target_position": self.target_position, "gaps": [list(g) for g in self.gaps]}


@dataclass(frozen=True)
class RunSummary:
    """What one mirror run did (`cutover mirror -o json`, README "The mirror")."""

    direction: st.Direction
    shard: str
    source_cluster: str
    records: int
    bytes: int
    transactions: int
    seconds: float
    partitions: tuple[PartitionResult, ...]
    groups: tuple[groups.GroupOutcome, ...]

    @property
    def gaps(self) -> list[PartitionResult]:
        """The partitions that lost records to retention before they were mirrored."""
        return [p for p in self.partitions if p.gaps]

    def as_dict(self) -> dict[str, Any]:
        parts = [p.as_dict() for p in self.partitions]
        return {"direction": self.direction, "shard": self.shard, "source_cluster": self.source_cluster,
                "records": self.records, "bytes": self.bytes, "transactions": self.transactions,
                "seconds": self.seconds, "partitions": parts, "gaps": [p for p in parts if p["gaps"]],
                "groups": [o.as_dict() for o in self.groups]}


def _summary(r: Run, copier: Copier, seconds: float) -> RunSummary:
    parts = tuple(PartitionResult(t, p, pm.next_src, pm.next_tgt, tuple((g.start, g.end) for g in pm.gaps))
                  for (t, p), pm in sorted(copier.maps.items()))
    return RunSummary(r.rt.direction, str(r.opts.shard), r.source_cluster, copier.totals.records,
                      copier.totals.bytes, copier.totals.transactions, round(seconds, 3), parts,
                      tuple(r.group_outcomes))


def fence_layouts(plan: Plan, direction: st.Direction, timeout: float, spare: frozenset[str] = frozenset({"0/1"}),
                  ) -> list[str]:
    """Fence every shard layout but `spare` (the one this process drains as) that has mirrored this
    direction (its transactional ids), so no other mirror process copies on. Returns the layouts fenced."""
    rt = st.route(plan, direction)
    if plan.spec.mirror.mode == "idempotent":
        return _await_stopped(plan, rt, timeout)
    layouts = st.load(rt, cluster_id(rt.source, timeout), with_map=False, timeout=timeout).shards - spare
    for layout in sorted(layouts):
        _fence(rt, plan.name, layout, timeout)
        progress(f"  fenced mirror shard {layout} ({direction})")
    return sorted(layouts)


def _await_stopped(plan: Plan, rt: st.Route, timeout: float) -> list[str]:
    """In idempotent mode there is no transactional id to fence a mirror process by: wait until none of this
    plan's processes of the direction may still run (each ends at its next group sync once the switch's mark
    closed it, recording its end), and refuse when one still does after `timeout` and two group syncs. Returns
    the shard layouts waited for."""
    source = cluster_id(rt.source, timeout)
    deadline = time.monotonic() + timeout + 2 * float(plan.spec.mirror.group_sync_interval)
    waited: set[str] = set()
    while True:
        running = {layout: rec for (name, layout), rec in st.overview(rt, source, timeout).owners.items()
                   if name == plan.name and owner.running(rec)}
        if not running:
            return sorted(waited)
        if time.monotonic() > deadline:
            layout, rec = sorted(running.items())[0]
            raise Refused(f"the {rt.direction} mirror's shard {layout} still runs ({owner.describe(rec)}) and, without "
                          "transactions (mirror.mode: idempotent), cannot be fenced: the switch would copy beside it",
                          fix="stop that process (it stops by itself at its next group sync once the switch closed "
                              "the mirror), then run the switch again: it resumes here")
        if not running.keys() <= waited:
            progress(f"  waiting for the {rt.direction} mirror's shard(s) {', '.join(sorted(running))} to stop "
                     "(idempotent mode: each stops at its next group sync, seeing the switch's mark)")
            waited |= running.keys()
        time.sleep(0.5)


def _fence(rt: st.Route, plan_name: str, layout: str, timeout: float) -> None:
    """Fence the producers of one shard layout's transactional id (its open transaction is aborted)."""
    from confluent_kafka import Producer

    producer = Producer(rt.target.config(**{"transactional.id": transactional_id(rt, plan_name,
                                                                                   Shard.parse(layout))}))
    try:
        producer.init_transactions(timeout)
    except Exception as exc:
        raise rt.target.failure(exc, f"fencing mirror shard {layout}", producer) from None


def _fence_other_layouts(r: Run, seen: st.Overview) -> None:
    """Shards of two layouts (i/N and j/M, M != N) own overlapping partitions, each under its own transactional
    id: side by side they would copy the same records twice, and fencing by id cannot see it. So a process,
    once it fenced its own shard's older processes, fences the processes of this plan's other layouts that
    may still run too (their owner records say which), before it reads the state (their last commit is then
    in what it reads), and says so. A layout whose owner recorded a clean end is left alone (an earlier
    layout, given up for this one)."""
    mine = r.opts.shard.count
    for (name, layout), record in sorted(seen.owners.items()):
        if name != r.plan.name or Shard.parse(layout).count == mine or not owner.running(record):
            continue
        if r.plan.spec.mirror.mode == "idempotent":
            raise Refused(f"the {r.rt.direction} mirror's shard {layout} may still run ({owner.describe(record)}): "
                          f"shards of {Shard.parse(layout).count} and of {mine} would copy the same partitions twice, "
                          "and without transactions (mirror.mode: idempotent) it cannot be fenced",
                          fix=f"stop the processes of the {Shard.parse(layout).count}-shard layout first (cutover "
                              "status shows who holds each shard), then start this one again")
        _fence(r.rt, r.plan.name, layout, r.opts.timeout)
        known = "" if owner.alive(record) else ", if it still runs"
        progress(f"fenced the {r.rt.direction} mirror's shard {layout} ({owner.describe(record)}): shards of "
                 f"{Shard.parse(layout).count} and of {mine} would copy the same partitions twice; it stops at its "
                 f"next transaction{known}. Run every shard of one layout (--shard i/{mine} for each i, or --workers "
                 f"{mine})")
