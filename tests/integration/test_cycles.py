"""Switch back and forth: three promote/rollback cycles under live traffic, cutover SIGKILLed once in
each promote and each rollback, and records carried back each time. Real Kafka, the real mirror in
both directions, the drill's producer and consumer group following the routing file; nothing mocked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import read_all
from tests.integration.test_switch import PARTITIONS, _live_app, _plan, _switch_killed_once

#: (promote step, rollback step) after which cutover is SIGKILLed, one pair per cycle.
KILLS = [("drain-mirror", "drain-reverse-mirror"), ("sync-groups", "switch-clients"),
         ("switch-clients", "sync-groups")]


def _seqs(plan: Plan, side: str, topic: str) -> Counter[int]:
    return Counter(json.loads(r.value)["seq"] for r in read_all(plan.cluster(side), topic, PARTITIONS))


def _caught_up(plan: Plan) -> bool:
    """The forward mirror has started on every partition (a partition it never started on counts no lag)
    and trails by fewer than 300 records."""
    s = cutover("mirror", "status", "--plan", str(plan.file), "-o", "json").json()
    return bool(s["partitions"]) and all(p["position"] is not None for p in s["partitions"]) and s["lag"] < 300


@pytest.mark.slow  # about three minutes: in the slow suite, which CI also runs
def test_three_promote_rollback_cycles_keep_every_record_once_on_each_cluster_and_every_group_exact(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    app = _live_app(sandbox, plan, ns, tmp_path, 150, tables=False)
    main, kills, topic, producer, consumer = app.plan, app.kills, app.topic, app.producer, app.consumer
    carried: list[int] = []
    mirror: subprocess.Popen[bytes] | None = None
    try:
        for cycle, (promote_kill, rollback_kill) in enumerate(KILLS, 1):
            # The forward mirror follows the old cluster between switches (after a rollback: from where the
            # reverse mirror's copies end, mapping them, not copying them again).
            mirror = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(main.file)],
                                      stdout=subprocess.DEVNULL, stderr=(tmp_path / f"mirror{cycle}.err").open("w"))
            seen = consumer.count()
            wait_for(lambda s=seen: sum(1 for x in consumer.seen[s:] if x.cluster == "old") >= 150,  # type: ignore[misc]
                     90, f"cycle {cycle}: the app to produce and consume on the old cluster")
            wait_for(lambda: _caught_up(main), 90,
                     f"cycle {cycle}: the forward mirror to catch up (its log: {tmp_path}/mirror{cycle}.err)")
            sent = producer.count()  # every record from here to the rollback that goes to new is carried back
            promoted = _switch_killed_once(main, "promote", kills, promote_kill)
            assert promoted["phase"] == "promoted", promoted
            assert json.loads((tmp_path / "routing.json").read_text())["active"] == "new"
            mirror.terminate()  # fenced by the drain, closed by the switch
            mirror.wait(60)
            status = cutover("status", "--plan", str(main.file), "-o", "json").json()
            assert status["cycle"] == cycle and status["mirror"]["reverse"]["direction"] == "new -> old"

            seen = consumer.count()
            wait_for(lambda s=seen: sum(1 for x in consumer.seen[s:] if x.cluster == "new") >= 150,  # type: ignore[misc]
                     90, f"cycle {cycle}: the app to produce and consume on the new cluster")
            rolled = _switch_killed_once(main, "rollback", kills, rollback_kill)
            on_new = sum(1 for x in producer.sent[sent:] if x.cluster == "new")
            assert rolled["phase"] == "rolled-back" and rolled["carried_back"] == on_new > 0, (rolled, on_new)
            carried.append(rolled["carried_back"])
            assert json.loads((tmp_path / "routing.json").read_text())["active"] == "old"
        seen = consumer.count()
        wait_for(lambda: sum(1 for x in consumer.seen[seen:] if x.cluster == "old") >= 100, 90,
                 "the app to produce and consume on the old cluster after the third rollback")
        app.settle()
    finally:
        app.stop(mirror)

    seqs = [s.seq for s in producer.sent]
    assert len(set(seqs)) == len(seqs) and not producer.errors
    assert Counter(s.seq for s in consumer.seen) == Counter(seqs), \
        "each record processed exactly once across six switches: every group position translated exactly"
    assert _seqs(main, "old", topic) == Counter(seqs), "the old cluster holds every record exactly once"
    # The forward mirror, once more after the third rollback, brings the new cluster level: every record
    # exactly once there too, the reverse mirror's copies mapped and never copied back.
    caught_up = cutover("mirror", "--plan", str(main.file), "--until-caught-up", "-o", "json")
    assert caught_up.code == 0, caught_up.err
    assert _seqs(main, "new", topic) == Counter(seqs), "the new cluster holds every record exactly once"

    s = cutover("status", "--plan", str(main.file), "-o", "json").json()
    assert s["phase"] == "rolled-back" and s["cycle"] == 3 and s["problems"] == []
    assert [(a["cycle"], a["action"], a["outcome"], a["carried_back"]) for a in s["attempts"]] == [
        (c, action, "done", carried[c - 1] if action == "rollback" else None)
        for c in (1, 2, 3) for action in ("promote", "rollback")]
    assert all(a["runs"] == 2 for a in s["attempts"])  # each killed once, then finished


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_record_written_on_the_inactive_cluster_stops_the_next_cycle_naming_it(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    """Someone writes on the old cluster while the clients use the new one, before the reverse mirror's copies:
    the two clusters no longer agree on that partition's order. After the rollback the forward mirror refuses
    (it could only copy a copy twice or map out of order), names the offsets, and writes nothing."""
    from tests.integration.kafka_util import create_topic, produce

    main = _plan(sandbox, ns, tmp_path, {}, tables=False)
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 1)
    produce(plan.cluster("old"), topic, [{"value": b'{"seq": %d}' % i} for i in range(10)])
    assert cutover("mirror", "--plan", str(main.file), "--until-caught-up").code == 0
    promoted = cutover("promote", "--plan", str(main.file), "--execute")
    assert promoted.code == 0, promoted.err
    try:
        produce(plan.cluster("old"), topic, [{"value": b'{"seq": 100}'}])  # the rogue writer, at old offset 10
        produce(plan.cluster("new"), topic, [{"value": b'{"seq": %d}' % i} for i in range(10, 15)])
        wait_for(lambda: len(read_all(plan.cluster("old"), topic)) == 16, 60, "the reverse mirror to copy back")
    finally:
        rolled = cutover("rollback", "--plan", str(main.file), "--execute", "-o", "json")
    assert rolled.code == 0 and rolled.json()["carried_back"] == 5, rolled.err
    before = [r.value for r in read_all(plan.cluster("new"), topic)]
    refused = cutover("mirror", "--plan", str(main.file), "--until-caught-up")
    assert refused.code == 1, refused.err
    assert (f"{topic} partition 0: offset 11 is the reverse mirror's copy of offset 11 on the new cluster, yet it "
            "comes after offset 10, a record written on the old cluster while the clients used the new cluster"
            ) in refused.err, refused.err
    assert "Traceback" not in refused.err
    assert [r.value for r in read_all(plan.cluster("new"), topic)] == before  # nothing copied, the rogue neither
