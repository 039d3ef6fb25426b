"""`cutover readers find` names the traces of readers that keep their positions outside groups."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce
from tests.integration.mirror_util import scoped_plan


def _member(props: dict[str, str], group: str, topic: str) -> Consumer:
    """A consumer in `group`, assigned `topic`, that commits nothing."""
    c = Consumer({**props, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])

    def assigned() -> bool:
        c.poll(0.2)
        return bool(c.assignment())

    wait_for(assigned, 60, f"{group} to be assigned {topic}")
    return c


def test_spark_streams_connect_and_uncommitted_readers_are_named_with_their_evidence(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old = plan.cluster("old")
    topic, app = f"{ns}.orders", f"{ns}-wordcount"
    create_topic(old, topic, 1)
    produce(old, topic, [{"value": b"x"}])
    for internal in (f"{app}-counts-changelog", f"{app}-KSTREAM-REPARTITION-0000000003-repartition",
                     f"{ns}-connect-configs", f"{ns}-connect-offsets", f"{ns}-connect-status", f"{ns}-offsets"):
        create_topic(old, internal, 1)
    members = [_member(old, f"spark-kafka-source-{ns}-driver-0", topic), _member(old, f"{ns}.silent", topic),
               _member(old, app, topic)]
    try:
        scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
        run = cutover("readers", "find", "--plan", str(scoped), "-o", "json")
        assert run.code == 4, run.err
        mine = {(f["kind"], f["name"]): f for f in run.json()["findings"] if ns in f["name"]}
        assert set(mine) == {("spark-checkpoint", f"spark-kafka-source-{ns}-driver-0"), ("kafka-streams", app),
                             ("connect", f"{ns}-connect"), ("uncommitted-group", f"{ns}.silent"),
                             ("uncommitted-group", app)}
        streams = mine[("kafka-streams", app)]
        assert f"{app}-counts-changelog" in streams["evidence"] and "1 member(s)" in streams["evidence"]
        assert f"{ns}-connect-offsets" in mine[("connect", f"{ns}-connect")]["evidence"]
        assert f"reading {topic}, no commits" in mine[("uncommitted-group", f"{ns}.silent")]["evidence"]
        text = cutover("readers", "find", "--plan", str(scoped))
        assert text.code == 4 and f"kafka-streams: {app}" in text.out and "what to do:" in text.out
    finally:
        for c in members:
            c.close()
