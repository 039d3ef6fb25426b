"""The sandbox's broker and ZooKeeper configurations (pure rendering, no process started)."""

from __future__ import annotations

from pathlib import Path

from cutover.local import broker, zookeeper


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_a_zookeeper_mode_broker_has_no_controller_and_uses_the_acl_authorizer(tmp_path: Path) -> None:
    spec = broker.BrokerSpec("old", tmp_path / "old-2", 9102, 0, "id", "sasl_ssl", tmp_path / "tls", "3.9.1",
                             node_id=2, voters=((1, 0), (2, 0), (3, 0)), zookeeper=2181)
    props = _props(broker.render_config(spec, "admin-pw", "store-pw"))
    assert props["broker.id"] == "2" and props["zookeeper.connect"] == "127.0.0.1:2181"
    assert not {"process.roles", "node.id", "controller.listener.names", "controller.quorum.voters"} & set(props)
    assert props["listeners"] == props["advertised.listeners"] == "SASL_SSL://127.0.0.1:9102"
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL"
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("3", "2")


def test_a_kraft_broker_keeps_its_controller_listener(tmp_path: Path) -> None:
    spec = broker.BrokerSpec("new", tmp_path / "new", 9092, 9093, "id", "scram")
    props = _props(broker.render_config(spec, "admin-pw"))
    assert props["process.roles"] == "broker,controller" and "zookeeper.connect" not in props
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def test_zookeeper_listens_on_loopback_only(tmp_path: Path) -> None:
    props = _props(zookeeper.render_config(zookeeper.ZooKeeperSpec("old", tmp_path / "zk", 2181)))
    assert (props["clientPort"], props["clientPortAddress"], props["admin.enableServer"]) == \
        ("2181", "127.0.0.1", "false")


def test_both_start_messages_are_recognised() -> None:
    assert broker.started("[main] INFO kafka.server.KafkaServer - [KafkaServer id=3] started")
    assert broker.started("[main] INFO kafka.server.KafkaRaftServer - Kafka Server started")
    assert not broker.started("[main] INFO kafka.server.KafkaServer - [KafkaServer id=3] starting")


def test_free_ports_are_below_the_ephemeral_range_and_never_handed_out_twice() -> None:
    """A port the kernel may give an outgoing connection (a broker's own, say) could be taken before the
    sandbox's server binds it: CI once met exactly that. Ports below the range are only taken by a bind."""
    import socket

    from cutover.local.ports import _ephemeral_low, free_port

    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(10000 <= p < _ephemeral_low() for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))  # free when handed out
