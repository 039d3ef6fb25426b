"""What a migration leaves behind, found live: the inventory `cutover complete` and `cancel` list and remove.

Each item names its kind, where it is, and whether this run removes it (and if not, why it
stays). Finding changes nothing; `remove` deletes one item and is idempotent (an item already
gone is done), so a re-run after a crash picks up where the last one stopped.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef, admin
from cutover.kafka.inspect import cluster_id, partition_counts
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan

Kind = Literal["state-topic", "mirrored-topic", "group", "new-table", "dead-letter-table", "branch", "checkpoints"]
#: A cutover_* branch younger than this with rows main does not hold may belong to a live shadow run.
BRANCH_IDLE_MS = 3_600_000


@dataclass(frozen=True)
class Item:
    kind: Kind
    #: "new cluster", "old cluster", "catalog" or "disk"
    where: str
    name: str
    remove: bool
    #: What it is, and if it stays, why.
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "name": self.name, "remove": self.remove, "note": self.note}

    def line(self) -> str:
        return f"{'remove' if self.remove else 'keep  '} {self.kind} {self.name} ({self.where}): {self.note}"


@dataclass(frozen=True)
class Leave:
    """What the command line keeps or adds to the removal."""

    keep_state: bool = False
    delete_mirrored_topics: bool = False


#: Keep the state, delete no mirrored topic: what the commands do without flags.
DEFAULT = Leave()
CATALOG: tuple[Kind, ...] = ("new-table", "dead-letter-table", "branch", "checkpoints")


def find(plan: Plan, action: Literal["complete", "cancel"], kinds: tuple[Kind, ...], leave: Leave,
         timeout: float) -> list[Item]:
    """The items of these kinds that exist now, each marked remove or keep (reads only)."""
    out: list[Item] = []
    state = _forward_state(plan, timeout) if {"group", "mirrored-topic"} & set(kinds) else None
    if "group" in kinds and state is not None:
        out += groups(plan, state, timeout)
    if "mirrored-topic" in kinds and state is not None:
        out += mirrored_topics(plan, state, leave.delete_mirrored_topics, timeout)
    if set(kinds) & {"new-table", "dead-letter-table", "branch"}:
        out += [i for i in tables(plan, action) if i.kind in kinds]
    if "checkpoints" in kinds:
        out += checkpoints(plan, action)
    if "state-topic" in kinds:
        out += state_topics(plan, leave.keep_state, timeout)
    return out


def state_topics(plan: Plan, keep: bool, timeout: float) -> list[Item]:
    """Both directions' state topics that exist (the forward mirror's on the new cluster, the reverse one's
    on the old). A pair that also holds another plan's state (the same mirror.state_prefix) is kept."""
    out = []
    directions: tuple[st.Direction, ...] = ("forward", "reverse")
    for direction in directions:
        rt = st.route(plan, direction)
        found = st.present(rt, timeout)
        if not found:
            continue
        where = "new cluster" if direction == "forward" else "old cluster"
        shared = st.foreign(st.load(rt, cluster_id(rt.source, timeout), with_map=False, timeout=timeout), plan) \
            if rt.progress_topic in found else []
        note = f"the {direction} mirror's state"
        if keep:
            note += " (kept: --keep-state)"
        elif shared:
            note += (f" (kept: it holds another plan's state too: {', '.join(shared[:5])}; this plan's mirrors "
                     "are marked ended in it)")
        out += [Item("state-topic", where, t, not keep and not shared, note) for t in found]
    return out


def _forward_state(plan: Plan, timeout: float) -> st.MirrorState | None:
    rt = st.route(plan, "forward")
    if rt.progress_topic not in st.present(rt, timeout):
        return None
    return st.load(rt, cluster_id(rt.source, timeout), with_map=False, timeout=timeout)


def mirrored_topics(plan: Plan, state: st.MirrorState, delete: bool, timeout: float) -> list[Item]:
    """The topics of this plan's selection that the forward mirror (its `state`) created on the new cluster."""
    present = partition_counts(st.route(plan, "forward").target, timeout)
    return [Item("mirrored-topic", "new cluster", t, delete,
                 "a topic the mirror created and filled" + ("" if delete else
                                                           " (kept: remove it too with --delete-mirrored-topics)"))
            for t in sorted(state.created) if t in present and plan.spec.topics.matches(t)]


def groups(plan: Plan, state: st.MirrorState, timeout: float) -> list[Item]:
    """The consumer groups whose offsets the forward mirror (its `state`) committed on the new cluster."""
    from cutover.kafka.inspect import list_groups

    present = set(list_groups(st.route(plan, "forward").target, timeout))
    return [Item("group", "new cluster", g, True, "offsets the mirror translated and committed")
            for g in sorted(state.groups) if g in present and plan.spec.groups.matches(g)]


def tables(plan: Plan, which: Literal["complete", "cancel"]) -> list[Item]:
    """The shadow's tables, dead-letter tables and stopped runs' commit branches in the catalog."""
    from cutover.lake import tables as lake

    if plan.spec.catalog is None:
        return []
    rules = plan.spec.complete
    out: list[Item] = []
    for pair in plan.spec.tables:
        drop_new = which == "cancel" or rules.drop_new_tables
        if lake.exists(plan, pair.new):
            out.append(Item("new-table", "catalog", pair.new, drop_new, "the shadow's table" + (
                "" if drop_new else "; kept (complete.drop_new_tables: false): the evidence of the last verify")))
        dead = lake.dead_letter_name(pair.new)
        drop_dead = which == "cancel" or rules.drop_dead_letter
        if lake.exists(plan, dead):
            out.append(Item("dead-letter-table", "catalog", dead, drop_dead, "records the shadow could not decode" + (
                "" if drop_dead else "; kept (complete.drop_dead_letter: false)")))
        for table in (pair.old, pair.new):
            if which == "cancel" and table == pair.new and drop_new:
                continue  # goes with its table
            out += _branches(plan, table, which == "cancel" or rules.drop_branches)
    return out


def _branches(plan: Plan, table: str, drop: bool) -> list[Item]:
    from cutover.lake import tables as lake

    tbl = lake.load_table(plan, table)
    if tbl is None:
        return []
    published = lake.in_main(tbl)
    now = int(time.time() * 1000)
    out = []
    for name, ref in sorted(tbl.metadata.refs.items()):
        if not name.startswith("cutover_"):
            continue
        snap = tbl.snapshot_by_id(ref.snapshot_id)
        idle = snap is None or now - snap.timestamp_ms > BRANCH_IDLE_MS
        if ref.snapshot_id in published:
            out.append(Item("branch", "catalog", f"{table}@{name}", drop, "a shadow run's commit branch; its rows "
                            "are in main" + ("" if drop else " (kept: complete.drop_branches: false)")))
        elif idle:
            out.append(Item("branch", "catalog", f"{table}@{name}", drop, "a stopped shadow run's branch; its rows "
                            "never reached main (a new run reads them again from the topic)"
                            + ("" if drop else " (kept: complete.drop_branches: false)")))
        else:
            out.append(Item("branch", "catalog", f"{table}@{name}", False, "kept: a shadow run may be writing it "
                            "now (rows main does not hold, head younger than an hour)"))
    return out


def checkpoints(plan: Plan, which: Literal["complete", "cancel"]) -> list[Item]:
    """Spark's per-run checkpoint folders of the shadow's new tables (the tables hold the offsets)."""
    if which == "complete" and not plan.spec.complete.drop_new_tables:
        return []
    configured = plan.spec.spark.checkpoint_dir
    root = (plan.base_dir / configured if configured else Path(tempfile.gettempdir()) / "cutover-checkpoints")
    return [Item("checkpoints", "disk", str(root / plan.name / pair.new), True, "Spark's checkpoints of the "
                 "shadow's runs") for pair in plan.spec.tables if (root / plan.name / pair.new).exists()]


def remove(plan: Plan, item: Item, timeout: float) -> None:
    """Delete one item (already gone: nothing to do)."""
    from cutover.lake import tables as lake

    if item.kind in ("state-topic", "mirrored-topic"):
        side: ClusterSide = "new" if item.where == "new cluster" else "old"
        _delete_topic(ClusterRef.of(plan, side), item.name, timeout)
    elif item.kind == "group":
        _delete_group(ClusterRef.of(plan, "new"), item.name, timeout)
    elif item.kind in ("new-table", "dead-letter-table"):
        lake.purge(plan, item.name)
    elif item.kind == "branch":
        table, branch = item.name.split("@", 1)
        lake.remove_branch(plan, table, branch)
    elif item.kind == "checkpoints":
        shutil.rmtree(item.name, ignore_errors=True)


def _delete_topic(ref: ClusterRef, topic: str, timeout: float) -> None:
    client = admin(ref)
    try:
        client.delete_topics([topic], request_timeout=timeout)[topic].result(timeout=timeout + 1)
    except KafkaException as exc:
        if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
            raise ref.failure(exc, f"deleting topic {topic}", client) from None
    deadline = time.monotonic() + timeout  # deletion is asynchronous on the brokers: wait until it is gone
    while topic in _listed(ref, client, timeout):
        if time.monotonic() > deadline:
            raise CutoverError(f"topic {topic} on {ref.describe()} is still listed {timeout:.0f}s after its "
                               "deletion was accepted", fix="run the command again to continue")
        time.sleep(0.2)


def _delete_group(ref: ClusterRef, group: str, timeout: float) -> None:
    client = admin(ref)
    try:
        client.delete_consumer_groups([group], request_timeout=timeout)[group].result(timeout=timeout + 1)
    except KafkaException as exc:
        name = exc.args[0].name()
        if name == "NON_EMPTY_GROUP":
            raise CutoverError(f"consumer group {group} on {ref.describe()} has members: it is in use",
                               fix="stop its consumers (or leave the group), then run the command again") from None
        if name not in ("GROUP_ID_NOT_FOUND", "GROUP_NOT_FOUND"):
            raise ref.failure(exc, f"deleting consumer group {group}", client) from None


def _listed(ref: ClusterRef, client: AdminClient, timeout: float) -> dict[str, object]:
    """The cluster's topics, a failure to list them named (the cluster went away while a topic was deleted)."""
    try:
        return dict(client.list_topics(timeout=timeout).topics)
    except KafkaException as exc:
        raise ref.failure(exc, "listing topics after a deletion", client) from None

