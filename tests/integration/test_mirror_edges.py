"""cutover mirror at the edges production reaches: a shard that died inside a transaction, a
source log that went backwards, topics that change while the mirror runs. Real brokers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import KafkaException

from cutover.local.sandbox import Sandbox
from cutover.mirror import state as st
from cutover.mirror.copier import transactional_id
from cutover.mirror.shard import Shard
from cutover.plan import Plan, load_plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import content, scoped_plan, start_mirror, stop

#: A process that opens a transaction on the mirror's state topics as a shard does, writes its
#: state record, and is then SIGKILLed before it commits: a shard that died mid-transaction.
ZOMBIE = """
import json, sys, time
from confluent_kafka import Producer
props, txn_id, topics, key = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
p = Producer({**props, "transactional.id": txn_id, "transaction.timeout.ms": 6000})
p.init_transactions(30)
p.begin_transaction()
for t in topics:
    p.produce(t, key=key.encode(), value=json.dumps({"v": 2, "p": []}).encode(), partition=0)
assert p.flush(30) == 0
print("open", flush=True)
time.sleep(600)
"""


def _count(props: dict[str, str], topic: str, partitions: int) -> int:
    """Records in a topic now; -1 while the topic is not there yet (the mirror is creating it)."""
    try:
        return len(read_all(props, topic, partitions, timeout=10))
    except KafkaException:
        return -1


def test_a_shard_that_died_mid_transaction_does_not_hide_another_shards_progress(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 4)
    me = next(Shard(i, 2) for i in (0, 1) if Shard(i, 2).owns(topic, 0))
    other = Shard(1 - me.index, 2)
    mine = [p for p in range(4) if me.owns(topic, p)]
    produce(old, topic, [{"value": b"a%d" % i, "partition": mine[i % len(mine)]} for i in range(60)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    ready = tmp_path / "ready"
    running = start_mirror(scoped, "--shard", str(me), "--ready-file", str(ready))
    wait_for(lambda: ready.exists() or running.poll() is not None, 120, "the shard to start copying")
    wait_for(lambda: _count(new, topic, 4) == 60, 60, "the shard to copy the first records")

    # The other shard dies with a transaction open on the state topics (its records and its progress in it).
    rt = st.route(load_plan(scoped))
    source = json.loads(cutover("mirror", "status", "--plan", str(scoped), "-o", "json").out)["source_cluster"]
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, json.dumps(new), transactional_id(rt, ns, other),
         json.dumps([rt.offsets_topic, rt.progress_topic]), json.dumps(["delta", source, str(other), 0])],
        stdout=subprocess.PIPE, text=True)
    try:
        assert zombie.stdout is not None and zombie.stdout.readline().strip() == "open"
    finally:
        zombie.kill()
        zombie.wait(30)

    # The running shard goes on copying and commits its progress behind the open transaction ...
    produce(old, topic, [{"value": b"b%d" % i, "partition": mine[i % len(mine)]} for i in range(60)])
    wait_for(lambda: _count(new, topic, 4) == 120, 60, "the shard to copy the later records")
    code, _out, err = stop(running)
    assert code == 0, err
    # ... and restarts while that transaction is still open: it must read its own progress to the end.
    again = cutover("mirror", "--plan", str(scoped), "--shard", str(me), "--until-caught-up", "-o", "json")
    assert again.code == 0, again.err
    assert again.json()["records"] == 0, "the restart copied records again: it read stale progress"
    assert content(read_all(new, topic, 4)) == content(read_all(old, topic, 4))
