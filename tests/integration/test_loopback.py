"""Every server cutover starts serves this host only, as the kernel reports each process's listening sockets:
the sandbox's brokers (client and controller listeners) and its catalog and storage servers (the REST catalog
server and s3proxy, or PostgreSQL, in CI's lake lanes: marked `lake`). The servers other modules start anyway
are checked there, with listen_util: the schema registries (test_registry.py), the Kafka Connect worker
(test_connect_sink.py), ZooKeeper (test_zookeeper.py)."""

from __future__ import annotations

import json

import pytest

from cutover.local.sandbox import Sandbox
from tests.integration.conftest import catalog_kind
from tests.integration.listen_util import exposed, listening, serving


@pytest.mark.lake
def test_the_sandbox_servers_listen_on_loopback_only(sandbox: Sandbox) -> None:
    lake = ("lake.server", "lake.storage") if catalog_kind() != "sqlite" else ()
    pids = serving(sandbox.dir, "clusters.old.nodes[0]", "clusters.new.nodes[0]", *lake)
    node = json.loads((sandbox.dir / "state.json").read_text())["clusters"]["old"]["nodes"][0]
    # the controller listener is among those checked
    assert {node["port"], node["controller_port"]} <= {port for _ip, port in listening(pids["clusters.old.nodes[0]"])}
    assert exposed(serving(sandbox.dir)) == {}  # and anything else the sandbox runs
