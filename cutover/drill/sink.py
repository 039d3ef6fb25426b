"""The old pipeline as the field runs it, in a drill on the local sandbox: Apache Iceberg's Kafka
Connect sink, one connector per table pair whose `writer_offsets` is `iceberg-connect`, on the
sandbox's Connect worker (cutover.local.worker).

What an operator does to the connectors around a switch is here too, as the switch's hooks run it
(`python -m cutover.drill.sink ACTION CLUSTER --plan P --sandbox DIR`). One Connect cluster runs
every connector, and it moves as a whole, so the writer hooks (run once per table handed over) act
on all of them: `pause` pauses every connector on the cluster left (stop_old_writer /
stop_new_writer: the first table's hook pauses them all, the others find them paused), and `run`
(start_new_writer / start_old_writer) waits for the last table: once every sink table is stamped
with the cluster it goes to, the worker moves there and each connector is created there with the
same configuration, or resumed where it already is. cutover's hand-over of each table in between
moves that connector's state (cutover.switch.sink).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover.errors import CutoverError, Refused
from cutover.output import progress
from cutover.plan import ClusterSide, Plan, TablePair

if TYPE_CHECKING:
    from cutover.kafka.connect import Connect
    from cutover.local.sandbox import Sandbox

#: How often the sink's coordinator commits in a drill (the sink's default is 5 minutes). Each
#: commit adds a data file and a manifest: at one a second, the demo's canonical tables held about
#: 800 of each by the round trip's verify, whose scans then spent minutes opening them.
COMMIT_INTERVAL_MS = 5000
#: Hook event -> (action, cluster): what an operator does to the connector at each switch hook.
HOOKS: dict[str, tuple[str, ClusterSide]] = {
    "stop_old_writer": ("pause", "old"), "start_new_writer": ("run", "new"),
    "stop_new_writer": ("pause", "new"), "start_old_writer": ("run", "old")}


def pairs(plan: Plan) -> list[TablePair]:
    """The table pairs the Iceberg sink writes."""
    return [p for p in plan.spec.tables if p.writer_offsets == "iceberg-connect"]


def config(plan: Plan, pair: TablePair, cluster: ClusterSide = "old") -> dict[str, str]:
    """The connector's configuration: the pair's topic into its old table, the plan's catalog; Avro values
    through the registry of the cluster it runs on."""
    from cutover.local.connect import sink_config

    registry = getattr(plan.spec.registry, cluster)["url"] if pair.format == "avro" and plan.spec.registry else None
    return sink_config(plan.require_catalog("the Iceberg sink"), [pair.topic], pair.old,
                       control_topic=pair.control_topic, commit_interval_ms=COMMIT_INTERVAL_MS, avro_registry=registry)


def _rest(pair: TablePair) -> tuple[Connect, str]:
    from cutover.kafka.connect import Connect

    if not (pair.connect_url and pair.connector):
        raise CutoverError(f"table {pair.old}: a drill runs the Iceberg sink through its Connect REST API: give "
                           "tables[].connector and tables[].connect_url")
    return Connect(pair.connect_url), pair.connector


def run(box: Sandbox, plan: Plan, cluster: ClusterSide, timeout: float) -> dict[str, str]:
    """Each sink connector running on `cluster`: the sandbox's worker moved there if it runs on the
    other one, the control topic created if missing, the connector created (or resumed). Its states."""
    from cutover.kafka.clients import ClusterRef
    from cutover.switch.sink import ensure_control_topic

    box.start_connect(cluster)
    ref = ClusterRef.of(plan, cluster)
    _namespaces(plan)
    states = {}
    for pair in pairs(plan):
        rest, name = _rest(pair)
        ensure_control_topic(ref, pair, 1, timeout)
        if rest.config(name) is None:
            progress(f"creating the Iceberg sink connector {name} on the {cluster} cluster (writes {pair.old})")
            rest.put(name, config(plan, pair, cluster))
        else:
            rest.resume(name)
        states[name] = rest.wait(name, "RUNNING", timeout).state
    return states


def _namespaces(plan: Plan) -> None:
    """The old tables' namespaces, made before the connectors start: each connector creates its table's
    namespace when it is missing, and two doing so at once on the REST catalog failed one of them for
    good (a CI run's payments task: "Failed to execute: INSERT INTO iceberg_namespace_properties")."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    from cutover.lake import catalog

    cat = catalog.load(plan.require_catalog("the Iceberg sink"))
    for namespace in sorted({p.old.rsplit(".", 1)[0] for p in pairs(plan)}):
        with contextlib.suppress(NamespaceAlreadyExistsError):
            cat.create_namespace(namespace)


def pause(plan: Plan, timeout: float) -> dict[str, str]:
    """Each sink connector paused (its coordinator still commits what its workers announced)."""
    states = {}
    for pair in pairs(plan):
        rest, name = _rest(pair)
        if rest.config(name) is not None:
            rest.pause(name)
            states[name] = rest.wait(name, "PAUSED", timeout).state
    return states


def still_to_hand_over(plan: Plan, cluster: ClusterSide, timeout: float) -> list[str]:
    """The sink tables not yet handed to `cluster` (not stamped with its cluster id)."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import cluster_id
    from cutover.lake import tables

    there = cluster_id(ClusterRef.of(plan, cluster), timeout)
    return [p.old for p in pairs(plan) if tables.table_offsets(plan, p.old).cluster_id != there]


def caught_up(plan: Plan, cluster: ClusterSide, timeout: float, within: float) -> dict[str, int]:
    """Wait until each sink connector has committed to its table every record its topic holds on
    `cluster` now: its group past every committed record below the topic's end offsets taken now,
    then no `DataWritten` of its group sent before that left beyond the table's stored control-topic
    positions. Rows of each table, counted by the snapshot summary."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import partition_counts
    from cutover.kafka.offsets import committed_records, group_info, log_offsets
    from cutover.lake import tables
    from cutover.switch import sink

    ref = ClusterRef.of(plan, cluster)
    deadline = time.monotonic() + within

    def until(done: Any, what: str) -> Any:
        while not (got := done()):
            if time.monotonic() > deadline:
                raise CutoverError(f"{what} within {within:.0f}s on the {cluster} cluster; the Connect "
                                   "worker's log is connect/connect.log in the sandbox's folder")
            time.sleep(0.5)
        return got

    rows = {}
    for pair in pairs(plan):
        tps = [(pair.topic, p) for p in range(partition_counts(ref, timeout).get(pair.topic, 0))]
        ends = log_offsets(ref, tps, "end", timeout)

        def behind(pair: TablePair = pair, ends: dict[tuple[str, int], int] = ends) -> bool:
            done = group_info(ref, pair.sink_group, timeout).offsets
            starts = [(t, p, done.get((t, p), 0)) for (t, p), end in ends.items() if done.get((t, p), 0) < end]
            return any(True for _m in committed_records(ref, starts, f"reading {pair.topic}", timeout, until=ends))

        until(lambda b=behind: not b(), f"the sink connector {pair.connector} did not read {pair.topic} to its end")
        ctl = log_offsets(ref, [(pair.control_topic, p) for p in
                                range(partition_counts(ref, timeout).get(pair.control_topic, 0))], "end", timeout)

        def committed(pair: TablePair = pair, ctl: dict[tuple[str, int], int] = ctl) -> bool:
            if not tables.exists(plan, pair.old):
                return False  # the sink creates the table at its first write
            snaps, current, _t = tables.snapshots(plan, pair.old)
            try:
                stored = sink.stored_positions(snaps, current, pair.old, pair.control_topic, pair.sink_group)
            except Refused:  # not before the sink's first commit
                return False
            return not [f for f in sink.in_flight(ref, pair.control_topic, stored.positions, pair.sink_group, timeout)
                        if f[1] < ctl.get((pair.control_topic, f[0]), 0)]

        until(committed, f"the sink connector {pair.connector} did not commit its files to {pair.old}")
        snaps, current, _t = tables.snapshots(plan, pair.old)
        rows[pair.old] = int(next(s.summary.get("total-records", 0) for s in snaps if s.snapshot_id == current))
    return rows


def hooks(folder: Path, plan_file: Path, sandbox: Path) -> dict[str, str]:
    """Switch hook scripts (event -> path) that pause and run the plan's sink connectors."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for event, (action, cluster) in HOOKS.items():
        script = folder / event
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cutover.drill.sink {action} {cluster} '
                          f'--plan "{plan_file}" --sandbox "{sandbox}"\n')
        script.chmod(0o755)
        out[event] = str(script)
    return out


def main(argv: list[str]) -> int:
    from cutover.local.sandbox import Sandbox
    from cutover.plan import load_plan

    parser = argparse.ArgumentParser(prog="python -m cutover.drill.sink", description=__doc__)
    parser.add_argument("action", choices=("pause", "run"))
    parser.add_argument("cluster", choices=("old", "new"))
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--sandbox", required=True, type=Path)
    parser.add_argument("--timeout", type=float, default=180)
    a = parser.parse_args(argv)
    plan = load_plan(a.plan)
    try:
        if a.action == "pause":
            states = pause(plan, a.timeout)
        elif waiting := still_to_hand_over(plan, a.cluster, a.timeout):
            print(f"the Connect cluster moves to the {a.cluster} cluster once every connector on it is handed "
                  f"over; still to come: {', '.join(waiting)}")
            return 0
        else:
            states = run(Sandbox(a.sandbox), plan, a.cluster, a.timeout)
    except CutoverError as exc:
        print(f"cutover.drill.sink {a.action} {a.cluster}: {exc}", file=sys.stderr)
        return 1
    print(", ".join(f"connector {n}: {s} on the {a.cluster} cluster" for n, s in states.items()) or "no sink")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
