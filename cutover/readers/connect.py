"""connect readers: a Kafka Connect cluster's source connectors, their positions checked across the move.

A source connector's positions are in the source system (a file's byte position, a database's log
sequence), kept by the worker in its offsets topic: key ["connector", {partition}], value {offset}.
They need no translation, only the same latest value per connector partition on both clusters, which
the mirror gives when the workers' config, offsets and status topics are selected (their records are
copied exactly, under the same keys). Source connectors write data: they stop with the producers
(the freeze_producers hook stops them or their worker), so their last offsets are in the drain.

A move reads the offsets topic on both clusters and refuses when a declared connector's latest
offsets differ, or when it still runs on the worker it leaves. After the target's worker is started
(start_reader), each connector's offsets through KIP-875 (GET /connectors/NAME/offsets, Connect 3.6+)
must equal the moved ones: the worker really resumes there. Sink connectors need no reader: their
positions are their groups' (connect-NAME), which the mirror's group sync translates.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from cutover.common import iso_z
from cutover.errors import Refused, UnreachableError, UsageError
from cutover.kafka import inspect
from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef
from cutover.kafka.connect import Connect, ConnectError
from cutover.kafka.offsets import committed_records, log_offsets
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader
from cutover.readers import journal
from cutover.readers.kind import Mode, Problem

DEFAULT_OFFSETS_TOPIC = "connect-offsets"
#: One connector's offsets: canonical JSON of its partition -> canonical JSON of its offset.
Offsets = dict[str, str]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def offsets_topic(r: Reader) -> str:
    return r.offsets_topic or DEFAULT_OFFSETS_TOPIC


def url(r: Reader, side: ClusterSide) -> str:
    found = r.old_url if side == "old" else r.new_url
    assert found is not None
    return found


def topic_offsets(ref: ClusterRef, topic: str, connectors: list[str], timeout: float) -> dict[str, Offsets]:
    """The latest offset per connector partition in a worker's offsets topic (a null value removes it), for
    the named connectors."""
    count = inspect.partition_counts(ref, timeout).get(topic)
    if count is None:
        return {c: {} for c in connectors}
    starts = log_offsets(ref, [(topic, p) for p in range(count)], "start", timeout)
    ends = log_offsets(ref, [(topic, p) for p in range(count)], "end", timeout)
    out: dict[str, Offsets] = {c: {} for c in connectors}
    for msg in committed_records(ref, [(t, p, o) for (t, p), o in starts.items()],
                                 f"reading the Connect offsets topic {topic}", timeout, until=ends):
        try:
            name, partition = json.loads(msg.key() or b"null")
        except (ValueError, TypeError):
            continue  # not a source offset record
        if name not in out:
            continue
        value = msg.value()
        if value is None:
            out[name].pop(_canonical(partition), None)
        else:
            out[name][_canonical(partition)] = _canonical(json.loads(value))
    return out


def _rest_offsets(raw: list[dict[str, Any]]) -> Offsets:
    return {_canonical(o["partition"]): _canonical(o["offset"]) for o in raw}


def _differences(name: str, want: Offsets, got: Offsets, where: str) -> list[str]:
    out = []
    for partition in sorted(set(want) | set(got)):
        if want.get(partition) != got.get(partition):
            out.append(f"connector {name} partition {partition}: {want.get(partition, 'none')} moved, "
                       f"{got.get(partition, 'none')} {where}")
    return out


def position(plan: Plan, r: Reader) -> tuple[dict[str, Any], list[Problem]]:
    """The declared connectors' offsets in the offsets topic of the cluster they are on."""
    on = journal.side(journal.last(plan, url(r, "old")))
    topic = offsets_topic(r)
    entry: dict[str, Any] = {"reader": r.name, "kind": r.kind, "location": url(r, "old"), "worker": url(r, on),
                             "offsets_topic": topic, "connectors": {}, "positions": {}, "note": None}
    problems: list[Problem] = []
    if not plan.spec.topics.matches(topic):
        problems.append((r.name, f"reader {r.name}: the workers' offsets topic {topic} is not in the plan's topic "
                         "selection: the mirror would not copy the source connectors' positions",
                         f"select {topic} (and the workers' config and status topics) in topics.include"))
    try:
        found = topic_offsets(ClusterRef.of(plan, on), topic, list(r.connectors or []), 10.0)
    except (UnreachableError, ConnectError) as exc:
        entry["note"] = f"could not read {topic} on the {on} cluster: {exc}"
        return entry, problems
    entry["connectors"] = {c: {p: json.loads(o) for p, o in offsets.items()} for c, offsets in found.items()}
    return entry, problems


def move(plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
         timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Check that the offsets topic holds the same source offsets on both clusters; record them (execute),
    for the check on the target's worker once it runs."""
    if mode == "starting-offsets":
        raise UsageError(f"reader {r.name}: --starting-offsets is for spark-checkpoint readers",
                         fix="use --dry-run or --execute")
    src: ClusterSide = "old" if direction == "forward" else "new"
    dst: ClusterSide = "new" if direction == "forward" else "old"
    topic, connectors = offsets_topic(r), list(r.connectors or [])
    head: dict[str, Any] = {"reader": r.name, "kind": r.kind, "direction": direction, "location": url(r, "old"),
                            "mode": mode, "offsets_topic": topic, "source_worker": url(r, src),
                            "target_worker": url(r, dst), "written": []}
    journal.refuse_back_first(plan, r, journal.last(plan, url(r, "old")), direction)
    if not plan.spec.topics.matches(topic):
        raise Refused(f"reader {r.name}: the workers' offsets topic {topic} is not in the plan's topic selection",
                      fix=f"select {topic} (and the workers' config and status topics) in topics.include; "
                          "nothing was recorded")
    running = [c for c in connectors if _state(url(r, src), c) in ("RUNNING", "UNASSIGNED", "RESTARTING")]
    if running:
        raise Refused(f"reader {r.name}: source connector(s) {', '.join(running)} still run on the {src} worker "
                      f"{url(r, src)}: offsets they commit after the drain would not be mirrored",
                      fix="stop them with the producers (the freeze_producers hook: PUT /connectors/NAME/stop, or "
                          "stop the worker); nothing was recorded")
    source = topic_offsets(ClusterRef.of(plan, src), topic, connectors, timeout)
    target = topic_offsets(ClusterRef.of(plan, dst), topic, connectors, timeout)
    differences = [d for c in connectors for d in _differences(c, source[c], target[c], f"on the {dst} cluster")]
    out: dict[str, Any] = {**head, "connectors": {c: {p: json.loads(o) for p, o in source[c].items()}
                                                  for c in connectors},
                           "differences": differences, "already_moved": False}
    if differences:
        raise Refused(f"reader {r.name}: the {dst} cluster's {topic} does not hold the source connectors' offsets "
                      "of the " + src + " cluster: " + "; ".join(differences[:3]),
                      fix=f"let the mirror copy {topic} (cutover mirror --until-caught-up), with the connectors "
                          "stopped before the drain; nothing was recorded")
    if mode == "dry-run":
        return out
    journal.record(plan, {"at": iso_z(), "reader": r.name, "kind": r.kind, "direction": direction,
                          "location": url(r, "old"), "phase": "done", "offsets": {c: source[c] for c in connectors},
                          "positions": [], "undo": "nothing was written: the offsets are the mirror's copy"})
    return out


def _state(worker: str, connector: str) -> str | None:
    """The connector's state on a worker; None when the worker does not run (its connectors with it) or has
    no such connector."""
    try:
        found = Connect(worker, timeout=10).state(connector)
    except UnreachableError:
        return None
    return None if found is None else found.state


def started(plan: Plan, r: Reader, side: ClusterSide, timeout: float) -> dict[str, Any]:
    """After the start_reader hook: each connector's offsets on the worker of `side`, through KIP-875, equal
    what the last move recorded. Waits for the worker and its connectors to come up within `timeout`."""
    last = journal.last(plan, url(r, "old"))
    if last is None:
        return {"checked": False, "why": "no move recorded"}
    want: dict[str, Offsets] = last["offsets"]
    worker = Connect(url(r, side), timeout=10)
    deadline = time.monotonic() + timeout
    differences: list[str] = []
    while True:
        try:
            got = {c: worker.offsets(c) for c in want}
            differences = [d for c, raw in got.items() for d in
                           (["connector " + c + " is not on the worker yet"] if raw is None else
                            _differences(c, want[c], _rest_offsets(raw), f"on the {side} worker"))]
        except (UnreachableError, ConnectError) as exc:
            differences = [str(exc)]
        if not differences:
            return {"checked": True, "worker": url(r, side),
                    "connectors": {c: len(o) for c, o in want.items()}}
        if time.monotonic() > deadline:
            raise Refused(f"reader {r.name}: the {side} worker {url(r, side)} does not resume the source "
                          f"connectors where they stopped: " + "; ".join(differences[:3]),
                          fix="check that the worker runs on the mirrored config, offsets and status topics "
                              "(the same names, the same group.id) and read its log; then run the step again")
        time.sleep(1)


# What the switch, plan check, status and `cutover readers move` say of a reader of this kind (ReaderKind).

def on_server(r: Reader) -> bool:
    """Its offsets are in the clusters' offsets topics and its workers: plan check --offline reads none."""
    return True


def step_text(r: Reader, target: ClusterSide) -> str:
    return "check its source connectors' offsets are the same in both clusters' offsets topics, and record them"


def would_move(plan: Plan, r: Reader, target: ClusterSide, where: str, now: dict[str, Any] | None) -> str:
    return (f"check that the {target} cluster's {offsets_topic(r)} holds the same latest offsets of "
            f"{', '.join(r.connectors or [])} as the other's, and that they stopped")


def started_check(r: Reader, side: ClusterSide) -> str | None:
    return (f"check, through KIP-875, that {', '.join(r.connectors or [])} resume on the {side} worker at the moved "
            "offsets")


def hook_context(plan: Plan, r: Reader) -> dict[str, str | None]:
    return {}


def position_line(e: dict[str, Any]) -> str:
    held = ", ".join(f"{c} ({len(o)} partition(s))" for c, o in e["connectors"].items() if o)
    return (f"reader {e['reader']} (connect, worker {e['worker']}): "
            + (f"{e['offsets_topic']} holds offsets of {held}" if held else e["note"] or
               f"{e['offsets_topic']} holds no offsets of {', '.join(e['connectors'])} yet"))


def status_text(e: dict[str, Any]) -> str:
    move = e["last_move"]
    held = ", ".join(f"{c} {o}" for c, o in e["connectors"].items()) or e["note"] or ""
    return (f"worker {e['worker']}: {held}"
            + ("" if move is None else f"; last moved {move['direction']} at {move['at']}"))


def moved_text(head: str, m: dict[str, Any]) -> str:
    lines = [f"{head}: {m['offsets_topic']}, the {m['source_worker']} worker's connectors stopped"]
    lines += [f"  {c}: {len(o)} partition(s), the same on both clusters: {o}" for c, o in m["connectors"].items()]
    lines.append("dry run: nothing recorded (--execute records them, for the check on the target's worker)"
                 if m["mode"] == "dry-run" else f"recorded: once {m['target_worker']} runs, each connector's "
                 "offsets there (KIP-875) must be these")
    return "\n".join(lines)


if TYPE_CHECKING:  # mypy checks this module against the protocol of every reader kind (readers/kind.py)
    from cutover.readers import connect as _this
    from cutover.readers.kind import ReaderKind

    _checked: ReaderKind = _this
