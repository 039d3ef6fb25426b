"""Integration fixtures: one real sandbox (two KRaft clusters + an Iceberg catalog) and one
SparkSession per test session; each test gets its own topic/table namespace.

The catalog is SQLite on local files unless CUTOVER_TEST_CATALOG says rest or postgres (a
REST catalog server or PostgreSQL, over S3 storage): CI runs the tests marked `lake` once on
each (CUTOVER_TEST_CATALOG=rest pytest -m lake). Set CUTOVER_TEST_SANDBOX=DIR to reuse a
sandbox that is already up (faster local iteration); it is then left running.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, load_plan


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    kind, kept, dropped = catalog_kind(), [], []
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
        # `lake(only="rest")`: the test exercises S3 storage and a catalog server, not what kind of
        # catalog it is; on the other server catalogs it would repeat what REST already ran.
        lake = item.get_closest_marker("lake")
        only = lake.kwargs.get("only") if lake else None
        (dropped if only and kind != "sqlite" and kind != only else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def catalog_kind() -> str:
    """The sandbox catalog this test session runs on (CUTOVER_TEST_CATALOG, default sqlite)."""
    return os.environ.get("CUTOVER_TEST_CATALOG") or "sqlite"


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    reuse = os.environ.get("CUTOVER_TEST_SANDBOX")
    kind = catalog_kind()
    if reuse:
        folder = Path(reuse)
    elif kind == "postgres":
        # PostgreSQL does not run as root; as root, the sandbox runs it as `nobody`, who cannot
        # enter pytest's private temporary folders. A folder of our own, that others may enter.
        folder = Path(tempfile.mkdtemp(prefix="cutover-lake-"))
        folder.chmod(0o755)
    else:
        folder = tmp_path_factory.mktemp("sandbox")
    box = Sandbox(folder)
    box.up(catalog=None if reuse else kind)  # type: ignore[arg-type]
    yield box
    if not reuse:
        box.down(purge=kind == "postgres", kill=kind != "postgres")  # thrown away (PostgreSQL stopped cleanly)


@pytest.fixture
def servers(sandbox: Sandbox) -> Sandbox:
    """The sandbox, when its catalog runs on servers (REST or PostgreSQL, S3 storage)."""
    if sandbox.status()["catalog"]["kind"] == "sqlite":
        pytest.skip("the catalog is SQLite on local files: no catalog or storage server "
                    "(CUTOVER_TEST_CATALOG=rest or postgres pytest -m lake runs this)")
    return sandbox


@contextmanager
def shaped_sandbox(factory: pytest.TempPathFactory, name: str, *up_args: str, reuse_env: str | None = None,
                   timeout: float = 600) -> Iterator[Sandbox]:
    """A sandbox of another shape for one test module: `cutover local up UP_ARGS`, brought down
    at the end even when `up` failed half-way. With `reuse_env` set to a folder in the
    environment, that sandbox is used (and left running), for faster local iteration."""
    from tests.conftest import cutover

    reuse = os.environ.get(reuse_env) if reuse_env else None
    box = Sandbox(Path(reuse) if reuse else factory.mktemp(name))
    try:
        run = cutover("local", "up", *up_args, "--dir", str(box.dir), timeout=timeout)
        assert run.code == 0, run.err
        yield box
    finally:
        if not reuse:
            box.down(kill=True)  # thrown away: no controlled shutdown of every broker to wait for


@pytest.fixture(scope="session")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """The old cluster on ZooKeeper (Kafka 3.9.1, three brokers, SASL_SSL), the new one KRaft with
    mTLS: test_zookeeper.py and test_zookeeper_rights.py (next to each other in a run, so it is up
    once, for both). Set CUTOVER_TEST_ZK=DIR to reuse a sandbox of this shape that is up."""
    with shaped_sandbox(tmp_path_factory, "zk", "--metadata", "old=zookeeper", "--brokers", "old=3", "--security",
                        "old=sasl_ssl", "--security", "new=mtls", reuse_env="CUTOVER_TEST_ZK") as box:
        yield box


@pytest.fixture(scope="module")
def registries(sandbox: Sandbox) -> Iterator[dict[str, str]]:
    """The sandbox with one registry per cluster: their Confluent API URLs. The session's other modules
    get the sandbox back without them (a plan with a registry section adds promote's registry steps)."""
    had = "registry" in sandbox.status()
    status = sandbox.up(registry=True)
    yield {side: status["registry"][side]["url"] for side in ("old", "new")}
    if not had:
        sandbox.remove_registries()


@pytest.fixture(scope="session")
def sandbox_status(sandbox: Sandbox) -> dict[str, Any]:
    return sandbox.status()


@pytest.fixture(scope="session")
def plan(sandbox: Sandbox) -> Plan:
    return load_plan(sandbox.plan_file)


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A name unique to this test, for its topics, groups and Iceberg namespace."""
    base = "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:30]
    return f"t_{base}_{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def spark(plan: Plan) -> Iterator[Any]:
    from cutover.lake import spark as spark_mod

    session = spark_mod.session(plan, "cutover-tests")
    yield session
    session.stop()


@pytest.fixture
def hung_host() -> Iterator[tuple[int, list[Any]]]:
    """A loopback port whose listeners accept connections and never answer (hanging hosts): on
    127.0.0.1 and on 127.0.0.2, the same port, so a plan can name two clusters that both hang. And
    the connections accepted so far."""
    import socket
    import threading

    first = socket.socket()
    first.bind(("127.0.0.1", 0))
    port = int(first.getsockname()[1])
    second = socket.socket()
    second.bind(("127.0.0.2", port))
    listeners = [first, second]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept(listener: socket.socket) -> None:
        listener.listen(64)
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threads = [threading.Thread(target=accept, args=(one,), daemon=True) for one in listeners]
    for thread in threads:
        thread.start()
    try:
        yield port, held
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for conn in held:
            conn.close()
        for one in listeners:
            one.close()


@pytest.fixture
def silent_port(hung_host: tuple[int, list[Any]]) -> int:
    """A loopback port whose listener accepts connections and never answers: a hanging host."""
    return hung_host[0]


@contextmanager
def _serving(server: Any) -> Iterator[int]:
    """Serve a socketserver on a daemon thread; yield its port."""
    import threading

    with server:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()


@pytest.fixture
def banner_port() -> Iterator[int]:
    """A loopback port whose listener greets every connection like an SSH server: not Kafka."""
    import socketserver

    class Greet(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    with _serving(socketserver.ThreadingTCPServer(("127.0.0.1", 0), Greet)) as port:
        yield port


@pytest.fixture
def http_port() -> Iterator[int]:
    """A loopback port with a real HTTP server on it (Python's http.server): not Kafka."""
    import http.server

    with _serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)) as port:
        yield port


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): connections are refused."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
