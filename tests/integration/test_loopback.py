"""Every server cutover starts serves this host only unless told otherwise, as the kernel reports each process's
listening sockets: the sandbox's brokers (client and controller listeners) and its catalog and storage servers
(the REST catalog server and s3proxy, or PostgreSQL, in CI's lake lanes: marked `lake`); and the metrics of the
mirror, the shadow and the exporter, on 127.0.0.1 unless --metrics-host or the plan's observability.host name
another address. The servers other modules start anyway are checked there, with listen_util: the schema
registries (test_registry.py), the Kafka Connect worker (test_connect_sink.py), ZooKeeper (test_zookeeper.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cutover.cli import cli
from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan, derive
from tests.conftest import wait_for
from tests.integration.conftest import catalog_kind
from tests.integration.kafka_util import create_topic, produce
from tests.integration.listen_util import exposed, listening, serving
from tests.integration.mirror_util import scoped_plan, start_mirror, stop
from tests.integration.shadow_util import shadow_plan


@pytest.mark.lake
def test_the_sandbox_servers_listen_on_loopback_only(sandbox: Sandbox) -> None:
    lake = ("lake.server", "lake.storage") if catalog_kind() != "sqlite" else ()
    pids = serving(sandbox.dir, "clusters.old.nodes[0]", "clusters.new.nodes[0]", *lake)
    node = json.loads((sandbox.dir / "state.json").read_text())["clusters"]["old"]["nodes"][0]
    # the controller listener is among those checked
    assert {node["port"], node["controller_port"]} <= {port for _ip, port in listening(pids["clusters.old.nodes[0]"])}
    assert exposed(serving(sandbox.dir)) == {}  # and anything else the sandbox runs


def _served_at(proc: subprocess.Popen[str], port: int) -> set[tuple[str, int]]:
    """The process's listening sockets once one is on `port` (it serves its metrics)."""
    def bound() -> set[tuple[str, int]] | None:
        assert proc.poll() is None, proc.communicate()[1]
        found = listening(proc.pid)
        return found if any(p == port for _ip, p in found) else None

    return wait_for(bound, 60, f"a listener on port {port}")


def _serve(argv: list[str], port: int) -> tuple[set[tuple[str, int]], str]:
    """Start `cutover ARGV`, take its listening sockets once it serves on `port`, stop it (SIGTERM): the sockets
    and its stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "cutover", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ))
    try:
        sockets = _served_at(proc, port)
    finally:
        code, _out, err = stop(proc, signal.SIGTERM)
    assert code == 0, err
    return sockets, err


def test_the_mirror_and_the_exporter_serve_metrics_on_loopback_unless_told(sandbox: Sandbox, plan: Plan, ns: str,
                                                                           tmp_path: Path) -> None:
    create_topic(plan.cluster("old"), f"{ns}.orders", 1)
    plan_file = scoped_plan(sandbox.plan_file, ns, tmp_path)
    for host in (None, "127.0.0.2"):
        port = free_port()
        proc = start_mirror(plan_file, "--metrics-port", str(port), *(["--metrics-host", host] if host else []))
        try:
            assert _served_at(proc, port) == {(host or "127.0.0.1", port)}
        finally:
            code, _out, err = stop(proc)
        assert code == 0 and f"mirror: serving metrics on http://{host or '127.0.0.1'}:{port}/metrics" in err, err

    port = free_port()
    sockets, err = _serve(["exporter", "--plan", str(plan_file), "--port", str(port)], port)
    assert sockets == {("127.0.0.1", port)} and f"exporter: serving metrics on http://127.0.0.1:{port}/metrics" in err
    port = free_port()
    watched = derive(plan_file, tmp_path / "watched.yaml", merge=True,
                     observability={"host": "127.0.0.3", "ports": {"exporter": port}}).file
    sockets, err = _serve(["exporter", "--plan", str(watched)], port)
    assert sockets == {("127.0.0.3", port)} and f"serving metrics on http://127.0.0.3:{port}/metrics" in err
    port = free_port()
    sockets, err = _serve(["exporter", "--plan", str(watched), "--port", str(port), "--metrics-host", "127.0.0.2"],
                          port)
    assert sockets == {("127.0.0.2", port)}  # the command's own host and port win over the plan's


@pytest.mark.usefixtures("spark")
def test_the_shadow_serves_metrics_on_loopback_unless_told(sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    """In this process (the session's Spark): the shadow's metrics stay served after its run, as in a drill."""
    topic = f"{ns}.events"
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.old", "new": topic,
                                                          "format": "raw"}])
    create_topic(plan.cluster("new"), topic, 1)
    produce(plan.cluster("new"), topic, [{"value": b"x"}])
    for host in ("127.0.0.2", None):
        port = free_port()
        run = _shadow(["shadow", "--plan", str(plan.file), "--metrics-port", str(port),
                       *(["--metrics-host", host] if host else [])])
        assert run.exit_code == 0, run.output
        assert (host or "127.0.0.1", port) in listening(os.getpid())
        assert f"shadow: serving metrics on http://{host or '127.0.0.1'}:{port}/metrics" in run.stderr


def _shadow(argv: list[str]) -> Any:
    return CliRunner().invoke(cli, argv, catch_exceptions=False)
