"""An old cluster still on ZooKeeper: Kafka 3.9.1 (the last release with it), three brokers
with SASL_SSL beside a ZooKeeper server, migrating to a KRaft 4.1.1 cluster with mTLS. The
mirror copies records and groups exactly, and Apache Kafka's own Java clients go through a
promote and a rollback.

Marked `production` (it starts a ZooKeeper and four brokers): CI runs it after the default suite.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from tests.conftest import cutover, wait_for
from tests.integration.listen_util import exposed, serving

pytestmark = pytest.mark.production


def test_the_zookeeper_and_its_brokers_listen_on_loopback_only(zk: Sandbox) -> None:
    serving(zk.dir, "clusters.old.zookeeper", "clusters.old.nodes", "clusters.new.nodes")
    assert exposed(serving(zk.dir)) == {}


def test_status_shows_the_zookeeper_and_the_brokers_use_it(zk: Sandbox) -> None:
    run = cutover("local", "status", "--dir", str(zk.dir), "-o", "json")
    assert run.code == 0, run.err
    old, new = run.json()["old"], run.json()["new"]
    assert (old["metadata"], old["kafka_version"], new["metadata"], new["kafka_version"]) == \
        ("zookeeper", "3.9.1", "kraft", "4.1.1")
    assert old["zookeeper"]["running"] and [b["running"] for b in old["brokers"]] == [True, True, True]
    assert "zookeeper" not in new
    config = (zk.dir / "old" / "server.properties").read_text()
    assert f"zookeeper.connect={old['zookeeper']['connect']}" in config and "process.roles" not in config
    assert "authorizer.class.name=kafka.security.authorizer.AclAuthorizer" in config
    assert "[KafkaServer id=1] started" in (zk.dir / "old" / "broker.log").read_text()
    for i, folder in enumerate(("old", "old-2", "old-3"), 1):  # the id the cluster chose, as each broker has it
        assert f"cluster.id={old['cluster_id']}\n" in (zk.dir / folder / "data" / "meta.properties").read_text()
        assert f"broker.id={i}\n" in (zk.dir / folder / "data" / "meta.properties").read_text()

    try:
        stopped = cutover("local", "stop", "old", "--dir", str(zk.dir), "-o", "json")
        assert stopped.code == 0 and stopped.json()["was_running"], stopped.err
        after = cutover("local", "status", "--dir", str(zk.dir), "-o", "json").json()["old"]
        assert not after["running"] and not after["zookeeper"]["running"]
        assert not any(b["running"] for b in after["brokers"])
    finally:
        started = cutover("local", "up", "--dir", str(zk.dir), "-o", "json", timeout=300)
    assert started.code == 0, started.err
    again = started.json()["old"]
    assert again["running"] and again["zookeeper"]["running"] and all(b["running"] for b in again["brokers"])
    assert again["bootstrap"] == old["bootstrap"]  # same ports: the plan stays valid

    os.kill(again["zookeeper"]["pid"], signal.SIGKILL)  # the ZooKeeper alone dies; its brokers run on
    wait_for(lambda: not cutover("local", "status", "--dir", str(zk.dir), "-o", "json").json()["old"]["running"],
             30, "status to see the ZooKeeper gone")
    healed = cutover("local", "up", "--dir", str(zk.dir), "-o", "json", timeout=300)
    assert healed.code == 0 and healed.json()["old"]["running"], healed.err
    assert healed.json()["old"]["zookeeper"]["pid"] != again["zookeeper"]["pid"]


def test_mirror_from_zookeeper_to_kraft_copies_records_and_groups_exactly(zk: Sandbox, tmp_path: Path,
                                                                          ns: str) -> None:
    from tests.integration.mirror_util import mirror_a_topic_and_a_group, scoped_plan

    mirror_a_topic_and_a_group(load_plan(zk.plan_file), scoped_plan(zk.plan_file, ns, tmp_path), ns, f"{ns}.orders")


def test_kafkas_own_clients_through_promote_and_rollback_from_zookeeper(zk: Sandbox, tmp_path: Path,
                                                                        ns: str) -> None:
    """VerifiableProducer/VerifiableConsumer over SASL_SSL to ZooKeeper-mode 3.9.1 and mTLS
    (a PEM key store cutover writes for Java) to KRaft 4.1.1: see java_clients.py."""
    from tests.integration.java_clients import promote_and_roll_back

    promote_and_roll_back(zk, tmp_path, ns)
