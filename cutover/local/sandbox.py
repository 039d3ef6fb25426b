"""The local sandbox: two Kafka clusters ("old", "new") and an Iceberg catalog.

Each cluster has one or three brokers, on KRaft or (the old one, on Kafka 3.9) ZooKeeper, or is
one Tansu broker (`cutover.local.tansu`), a second Kafka implementation.
The catalog is SQLite on local files (the default), or production-shaped: an Iceberg
REST catalog server or PostgreSQL, over S3-compatible storage (cutover.local.lake).

Everything lives in one folder: a state file (ports, cluster ids, PIDs), one folder
per broker (config, data, broker.log), the catalog and warehouse (catalog.db and
warehouse/, or catalog/ and storage/ with their servers' logs), and a generated plan
with its secrets file. Commands take a lock on the folder, so two
`up`s cannot race. Ports are chosen once and kept, so the plan stays valid across
stop/start.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import secrets as pysecrets
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cutover import jvm
from cutover.errors import SandboxError, UsageError
from cutover.local import broker, lake, sandbox_plan, tansu, zookeeper
from cutover.local.ports import free_port
from cutover.local.registry import RegistryServers, RegistryState
from cutover.local.worker import ConnectState, ConnectWorker
from cutover.output import progress
from cutover.plan import ClusterSide
from cutover.plan.model import Catalog

SIDES: tuple[ClusterSide, ...] = ("old", "new")
#: 3 when the lake has servers (REST or PostgreSQL catalog, S3 storage), 2 when a cluster runs
#: on ZooKeeper: an older cutover, which reads only 1 (or 1 and 2), then refuses the state
#: instead of taking the catalog for SQLite or the cluster for KRaft; 1 otherwise.
STATE_VERSION = 3
_STATE_VERSIONS = (1, 2, 3)
CATALOG_NAME = "cutover"
_PORT_TRIES = 5


def default_dir() -> Path:
    return Path(os.environ.get("CUTOVER_SANDBOX") or jvm.cutover_home() / "sandbox").expanduser().absolute()


@dataclass
class NodeState:
    port: int
    controller_port: int
    pid: int | None = None

    @classmethod
    def fresh(cls) -> NodeState:
        return cls(free_port(), free_port())


#: How a cluster keeps its metadata: KRaft (every release), or ZooKeeper (Kafka 3.9 only).
METADATA = ("kraft", "zookeeper")


@dataclass
class ClusterState:
    cluster_id: str
    nodes: list[NodeState]
    security: broker.Security = "plaintext"
    kafka_version: str = jvm.KAFKA_VERSION
    #: ZooKeeper mode: its server's port and PID (controller_port unused); None: KRaft.
    zookeeper: NodeState | None = None
    #: Which implementation runs it: Apache Kafka, or Tansu (one broker, plaintext).
    platform: str = "kafka"

    @classmethod
    def load(cls, raw: dict[str, Any]) -> ClusterState:
        if "nodes" not in raw:  # written before clusters could have several brokers
            return cls(raw["cluster_id"], [NodeState(raw["port"], raw["controller_port"], raw.get("pid"))],
                       raw.get("security") or ("scram" if raw.get("secure") else "plaintext"),
                       raw.get("kafka_version") or jvm.KAFKA_VERSION)
        zk = raw.get("zookeeper")
        return cls(raw["cluster_id"], [NodeState(**n) for n in raw["nodes"]], raw["security"], raw["kafka_version"],
                   NodeState(**zk) if zk else None, raw.get("platform", "kafka"))

    @property
    def metadata(self) -> str:
        return "zookeeper" if self.zookeeper else "kraft"

    @property
    def version(self) -> str:
        return tansu.VERSION if self.platform == "tansu" else self.kafka_version

    @property
    def mode(self) -> broker.Security:
        return self.security

    @property
    def tls(self) -> bool:
        return broker.PROTOCOL[self.mode].endswith("SSL")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)


@dataclass
class LakeState:
    """The catalog's kind and, unless SQLite, its server's and the S3 storage's port and PID."""

    catalog: lake.CatalogKind = "sqlite"
    storage: lake.Server | None = None
    server: lake.Server | None = None

    @classmethod
    def load(cls, raw: dict[str, Any] | None) -> LakeState:
        if not raw:
            return cls()
        return cls(raw["catalog"], lake.Server(**raw["storage"]) if raw.get("storage") else None,
                   lake.Server(**raw["server"]) if raw.get("server") else None)


@dataclass
class State:
    clusters: dict[str, ClusterState] = field(default_factory=dict)
    version: int = STATE_VERSION
    lake: LakeState = field(default_factory=LakeState)
    connect: ConnectState | None = None  # the Connect worker; an older cutover ignores the key
    registries: dict[str, RegistryState] | None = None  # the schema registries (local up --registry)


class Sandbox(ConnectWorker, RegistryServers):
    def __init__(self, folder: Path | None = None) -> None:
        self.dir = (folder or default_dir()).absolute()

    # ----- files
    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    @property
    def plan_file(self) -> Path:
        return self.dir / "plan.yaml"

    @property
    def secrets_file(self) -> Path:
        return self.dir / "secrets.env"

    @property
    def catalog_db(self) -> Path:
        return self.dir / "catalog.db"

    @property
    def warehouse(self) -> Path:
        return self.dir / "warehouse"

    @property
    def tls_dir(self) -> Path:
        """The sandbox's CA, certificates and key stores (made when a cluster uses TLS)."""
        return self.dir / "tls"

    def spec(self, side: ClusterSide, st: ClusterState, node: int = 1) -> broker.BrokerSpec:
        """Node `node` (1-based) of a cluster; node 1 lives in the folder named after the side."""
        n = st.nodes[node - 1]
        voters = tuple((i, m.controller_port) for i, m in enumerate(st.nodes, 1)) if len(st.nodes) > 1 else ()
        return broker.BrokerSpec(side, self.dir / (side if node == 1 else f"{side}-{node}"), n.port,
                                 n.controller_port, st.cluster_id, st.mode, self.tls_dir if st.tls else None,
                                 st.version, node, voters, st.zookeeper.port if st.zookeeper else None)

    def zookeeper_of(self, side: ClusterSide, st: ClusterState) -> tuple[zookeeper.ZooKeeperSpec, NodeState] | None:
        """A ZooKeeper-mode cluster's server (its spec, and its port and PID); None for KRaft."""
        if st.zookeeper is None:
            return None
        return zookeeper.ZooKeeperSpec(side, self.dir / f"{side}-zookeeper", st.zookeeper.port,
                                       st.version), st.zookeeper

    def specs(self, side: ClusterSide, st: ClusterState) -> list[broker.BrokerSpec]:
        return [self.spec(side, st, i) for i in range(1, len(st.nodes) + 1)]

    def process(self, side: ClusterSide, st: ClusterState, node: int = 1) -> broker.Process:
        """Node `node` of a cluster as a process the sandbox runs: a Kafka broker, or Tansu."""
        return self._tansu(side, st) if st.platform == "tansu" else self.spec(side, st, node)

    def _tansu(self, side: ClusterSide, st: ClusterState) -> tansu.TansuSpec:
        return tansu.TansuSpec(side, self.dir / side, st.nodes[0].port, st.cluster_id, lake=self._table_topics())

    def _table_topics(self) -> tansu.TableTopics | None:
        """Tansu writes its topics as Iceberg tables with a REST catalog (the only kind Tansu 0.6.0 writes through)."""
        lk = self._load().lake if self.exists() else None
        if lk is None or lk.catalog != "rest":
            return None
        return tansu.TableTopics.over(self._catalog_server(lk).uri, self._storage(lk).endpoint, self._secrets())

    def processes(self, side: ClusterSide, st: ClusterState) -> list[broker.Process]:
        return [self.process(side, st, i) for i in range(1, len(st.nodes) + 1)]

    def exists(self) -> bool:
        return self.state_file.is_file()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SandboxError(f"another cutover command is working on the sandbox in {self.dir}",
                                   fix="wait for it to finish") from None
            yield

    def _load(self) -> State:
        if not self.exists():
            if not self.dir.exists():  # a mistyped --dir (or CUTOVER_SANDBOX): bad input, not a state
                raise UsageError(f"no sandbox in {self.dir}: the folder does not exist",
                                 fix="check --dir (or CUTOVER_SANDBOX); cutover local up --dir DIR makes one")
            raise SandboxError(f"no sandbox in {self.dir}", fix="run: cutover local up")
        raw = json.loads(self.state_file.read_text())
        if raw.get("version") not in _STATE_VERSIONS:
            raise SandboxError(f"{self.state_file} has state version {raw.get('version')}; this cutover reads "
                               f"{' or '.join(map(str, _STATE_VERSIONS))}", fix="cutover local down --purge, then up")
        return State(clusters={k: ClusterState.load(v) for k, v in raw["clusters"].items()},
                     lake=LakeState.load(raw.get("lake")),
                     connect=ConnectState(**raw["connect"]) if raw.get("connect") else None,
                     registries=RegistryState.load_all(raw.get("registries")))

    def _save(self, state: State) -> None:
        state.version = 3 if state.lake.catalog != "sqlite" else \
            2 if any(st.zookeeper for st in state.clusters.values()) else 1
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2, sort_keys=True))
        tmp.replace(self.state_file)

    def _secrets(self) -> dict[str, str]:
        if not self.secrets_file.is_file():
            return {}
        from cutover.plan.source import read_env_file

        return read_env_file(self.secrets_file)

    # ----- lifecycle
    def up(self, security: Mapping[ClusterSide, broker.Security] | None = None,
           versions: Mapping[ClusterSide, str] | None = None, brokers: Mapping[ClusterSide, int] | None = None,
           metadata: Mapping[ClusterSide, str] | None = None, catalog: lake.CatalogKind | None = None,
           registry: bool = False, platforms: Mapping[ClusterSide, str] | None = None) -> dict[str, Any]:
        """Create (first time) and start whatever is not running. Idempotent.

        `security` chooses each cluster's client listener (default plaintext) and `versions`
        its Kafka release (default jvm.KAFKA_VERSION) and `brokers` how many brokers it has
        (1, or 3 with replication factor 3 and min.insync.replicas 2) when the sandbox is
        created; an existing sandbox keeps its own and refuses different ones. `metadata`
        "zookeeper" runs a cluster on ZooKeeper instead of KRaft (Kafka 3.9.1, the last
        release with it; the default version of such a cluster). `catalog` chooses the Iceberg
        catalog: sqlite (default, local files), rest or postgres (over S3 storage). `platforms`
        "tansu" runs a cluster on Tansu instead of Apache Kafka (one broker, plaintext, KRaft-less).
        """
        security, versions, sizes = dict(security or {}), dict(versions or {}), dict(brokers or {})
        modes, platforms = dict(metadata or {}), dict(platforms or {})
        tansu.check_options(platforms, security, versions, sizes, modes)
        zk_version = zookeeper.ZOOKEEPER_KAFKA_VERSION
        for side, mode in modes.items():
            if mode == "zookeeper" and versions.setdefault(side, zk_version) != zk_version:
                raise UsageError(f"Kafka {versions[side]} for the {side} cluster cannot run on ZooKeeper "
                                 "(Kafka 4.0 removed it)",
                                 fix=f"use --kafka-version {side}={zk_version} with --metadata {side}=zookeeper, "
                                 "or leave --metadata out for KRaft")
        for side, version in versions.items():
            if version not in jvm.KAFKA_VERSIONS:
                raise UsageError(f"Kafka {version} for the {side} cluster: the sandbox runs "
                                 f"{' or '.join(jvm.KAFKA_VERSIONS)}",
                                 fix=f"use --kafka-version {side}={jvm.KAFKA_VERSIONS[-1]} (or leave it out)")
        jvm.java()  # before anything is written: a missing JVM leaves no trace
        for version in {jvm.KAFKA_VERSION, *versions.values()}:
            jvm.resolve(jvm.kafka_broker(version))
        with self._locked():
            state = self._load() if self.exists() else self._create(security, versions, sizes, modes,
                                                                    catalog or "sqlite", platforms)
            if catalog is not None and catalog != state.lake.catalog:
                raise UsageError(f"the sandbox in {self.dir} already exists with a {state.lake.catalog} catalog",
                                 fix="cutover local down --purge, then up with the --catalog you want")
            for side in SIDES:
                st = state.clusters[side]
                if security.get(side, st.mode) != st.mode or versions.get(side, st.version) != st.version \
                        or sizes.get(side, len(st.nodes)) != len(st.nodes) \
                        or modes.get(side, st.metadata) != st.metadata \
                        or platforms.get(side, st.platform) != st.platform:
                    raise UsageError(f"the sandbox in {self.dir} already exists with different settings "
                                     f"({side}: {st.mode}, {tansu.name(st.platform, st.version)}"
                                     f"{' on ZooKeeper' if st.zookeeper else ''}, {len(st.nodes)} broker(s))",
                                     fix="cutover local down --purge, then up with the options you want")
            for side in SIDES:  # a sandbox made with another release than the default
                if state.clusters[side].platform == "kafka":
                    jvm.resolve(jvm.kafka_broker(state.clusters[side].version))
                    broker.ensure_class_archive(state.clusters[side].version)
            for side in SIDES:
                self._ensure_running(state, side)
            self._ensure_lake(state)
            self._ensure_registries(state, registry)
            self._init_catalog(state)
            self._write_plan(state)
            self._ensure_class_archive()
            return self._describe(state)

    def _ensure_class_archive(self) -> None:
        """The Spark driver's class-data archive for the sandbox plan's sessions (made once per Java,
        Spark and jars, shared by every sandbox): each shadow, verify and drill starts faster."""
        from cutover.lake import class_archive, spark
        from cutover.plan import load_plan

        plan = load_plan(self.plan_file)
        if plan.spec.spark.class_archive:
            class_archive.ensure(spark.session_conf(plan, "cutover"))

    def _create(self, security: Mapping[ClusterSide, broker.Security], versions: Mapping[ClusterSide, str],
                sizes: Mapping[ClusterSide, int], modes: Mapping[ClusterSide, str],
                catalog: lake.CatalogKind, platforms: Mapping[ClusterSide, str]) -> State:
        progress(f"creating sandbox in {self.dir}")
        state = State()
        secrets_env: dict[str, str] = {}
        if catalog != "sqlite":
            state.lake = LakeState(catalog, lake.Server(free_port()), lake.Server(free_port()))
            secrets_env[lake.ACCESS_KEY_VAR] = f"sandbox-{pysecrets.token_hex(6)}"
            secrets_env[lake.SECRET_KEY_VAR] = pysecrets.token_urlsafe(24)
            if catalog == "postgres":
                secrets_env[lake.DB_PASSWORD_VAR] = pysecrets.token_urlsafe(18)
        for side in SIDES:
            mode = security.get(side, "plaintext")
            st = ClusterState(broker.new_cluster_id(), [NodeState.fresh() for _ in range(sizes.get(side, 1))],
                              mode, versions.get(side, jvm.KAFKA_VERSION),
                              NodeState(free_port(), 0) if modes.get(side) == "zookeeper" else None,
                              platforms.get(side, "kafka"))
            if st.platform == "tansu":
                st.nodes, st.cluster_id = [NodeState(free_port(), 0)], f"cutover-{side}"
            state.clusters[side] = st
            if mode in ("scram", "sasl_ssl"):
                for user in (broker.ADMIN_USER, broker.READER_USER):
                    secrets_env[broker.password_var(side, user)] = pysecrets.token_urlsafe(18)
        if any(st.tls for st in state.clusters.values()):
            secrets_env[STORE_PASSWORD_VAR] = pysecrets.token_urlsafe(18)
        self._write_secrets(secrets_env)
        if STORE_PASSWORD_VAR in secrets_env:
            from cutover.local import certs

            progress(f"making the sandbox's CA and certificates in {self.tls_dir}")
            certs.make_all(self.tls_dir, secrets_env[STORE_PASSWORD_VAR],
                           [side for side, st in state.clusters.items() if st.tls],
                           [side for side, st in state.clusters.items() if st.mode == "mtls"],
                           (broker.ADMIN_USER, broker.READER_USER))
        for side in SIDES:
            self._format(state, side)
        self._save(state)
        return state

    def _write_secrets(self, values: dict[str, str]) -> None:
        body = "# Generated by cutover local up: passwords of the sandbox's SCRAM users and key stores.\n"
        body += "".join(f"{k}={v}\n" for k, v in sorted(values.items()))
        fd = os.open(self.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(body)

    def _format(self, state: State, side: ClusterSide) -> None:
        st = state.clusters[side]
        if st.platform == "tansu":  # nothing to format: its storage is made at its first start
            return
        pw = self._secrets()
        admin_pw = pw.get(broker.password_var(side, broker.ADMIN_USER))
        users = self._scram_users(side, st, pw)
        for spec in self.specs(side, st):
            spec.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(spec.config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(broker.render_config(spec, admin_pw, pw.get(STORE_PASSWORD_VAR)))
            if not spec.data_dir.exists() and not st.zookeeper:  # ZooKeeper mode: users go in at first start
                broker.format_storage(spec, users)

    @staticmethod
    def _scram_users(side: ClusterSide, st: ClusterState, pw: Mapping[str, str]) -> dict[str, str]:
        return ({u: pw[broker.password_var(side, u)] for u in (broker.ADMIN_USER, broker.READER_USER)}
                if st.mode in ("scram", "sasl_ssl") else {})

    def _ensure_zookeeper(self, state: State, side: ClusterSide) -> None:
        """ZooKeeper mode: the cluster's ZooKeeper runs, its PID saved at once, and it holds the
        SCRAM users (written once, marked done only when they are in)."""
        st = state.clusters[side]
        found = self.zookeeper_of(side, st)
        if found is None or broker.running(found[0], found[1].pid):
            return
        spec, zk = found
        users_done = spec.folder / "scram-users.done"
        for attempt in range(_PORT_TRIES):
            progress(f"starting the {spec.label} on {spec.connect}")
            try:
                zk.pid = zookeeper.start(spec)
                break
            except broker.PortInUse:
                if users_done.exists() or attempt == _PORT_TRIES - 1:
                    raise SandboxError(f"the {spec.label}'s port {zk.port} is in use",
                                       fix="free the port, or cutover local down --purge to choose new ports") \
                        from None
                # Never set up: choose a new port, and point the brokers at it.
                zk.port = free_port()
                self._format(state, side)
                spec = dataclasses.replace(spec, port=zk.port)
        self._save(state)
        if not users_done.exists():
            zookeeper.add_scram_users(spec, self._scram_users(side, st, self._secrets()))
            users_done.touch()

    def _ensure_running(self, state: State, side: ClusterSide, node: int | None = None) -> None:
        st = state.clusters[side]
        self._ensure_zookeeper(state, side)  # before any broker: they cannot start without it
        down = [i for i in range(1, len(st.nodes) + 1) if (node is None or i == node)
                and not broker.running(self.process(side, st, i), st.nodes[i - 1].pid)]
        if down:
            self._start(state, side, down)
        if broker.authenticates(st.mode) and node is None:
            self._grant_reader(side, st)

    def _start(self, state: State, side: ClusterSide, nodes: list[int]) -> None:
        st = state.clusters[side]
        if st.platform == "tansu":
            self._start_tansu(state, side)
            return
        for attempt in range(_PORT_TRIES):
            specs = [self.spec(side, st, i) for i in nodes]
            which = "" if len(nodes) == len(st.nodes) else f" (broker {', '.join(map(str, nodes))})"
            progress(f"starting the {side} cluster{which} on {st.bootstrap}")
            try:
                for i, pid in zip(nodes, broker.start_all(specs), strict=True):
                    st.nodes[i - 1].pid = pid
                break
            except broker.PortInUse:
                if any(broker.has_started_before(s) for s in self.specs(side, st)) or attempt == _PORT_TRIES - 1:
                    raise SandboxError(f"a port of the {side} cluster ({st.bootstrap}, controllers "
                                       f"{', '.join(str(n.controller_port) for n in st.nodes)}) is in use",
                                       fix="free the port, or cutover local down --purge to choose new ports") \
                        from None
                # Never started: choose new ports. The storage records the controllers'
                # endpoints, so every node is formatted again for the new ones.
                st.nodes = [NodeState.fresh() for _ in st.nodes]
                progress(f"a port was taken; moving the {side} cluster to {st.bootstrap}")
                for spec in self.specs(side, st):
                    shutil.rmtree(spec.data_dir, ignore_errors=True)
                self._format(state, side)
        self._save(state)
        progress(f"{side} cluster up at {st.bootstrap} (log: {self.spec(side, st).log_file})")

    def _start_tansu(self, state: State, side: ClusterSide) -> None:
        st = state.clusters[side]
        for attempt in range(_PORT_TRIES):
            spec = self._tansu(side, st)
            progress(f"starting the {spec.title} on {st.bootstrap}")
            try:
                st.nodes[0].pid = tansu.start(spec)
                break
            except broker.PortInUse:
                if spec.config_file.exists() or attempt == _PORT_TRIES - 1:
                    raise SandboxError(f"the {side} cluster's port {st.nodes[0].port} is in use", fix="free the "
                                       "port, or cutover local down --purge to choose new ports") from None
                st.nodes = [NodeState(free_port(), 0)]  # never started: clients know no port yet
        self._save(state)
        progress(f"{side} cluster up at {st.bootstrap} (log: {spec.log_file})")

    def _grant_reader(self, side: ClusterSide, st: ClusterState) -> None:
        """The reader principal may read and describe everything, and write nothing."""
        from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

        from cutover.kafka.clients import ClusterRef, admin

        ref = ClusterRef(side, self.client_properties(side, st, broker.ADMIN_USER))
        grants = [(ResourceType.TOPIC, "*", op) for op in
                  (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)]
        grants += [(ResourceType.GROUP, "*", op) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        grants += [(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
                   (ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)]
        bindings = [AclBinding(rt, name, ResourcePatternType.LITERAL, f"User:{broker.READER_USER}", "*", op,
                               AclPermissionType.ALLOW) for rt, name, op in grants]
        # A cluster that has just started may drop the first requests (a new quorum still
        # settling its leaders): ask again, with a fresh client, for up to a minute.
        deadline = time.monotonic() + 60
        while True:
            client = admin(ref)  # keep a reference: the futures die with the client
            try:
                for fut in client.create_acls(bindings, request_timeout=15).values():
                    fut.result(timeout=20)
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise ref.failure(exc, "creating the reader ACLs") from None
                progress(f"the {side} cluster did not take the reader ACLs yet ({exc}); asking again")
                time.sleep(2)

    def client_properties(self, side: ClusterSide, st: ClusterState, user: str = broker.ADMIN_USER,
                          reveal: bool = True) -> dict[str, str]:
        """Client properties for a sandbox cluster; the password as ${VAR} unless reveal."""
        from cutover.local import certs

        props = {"bootstrap.servers": st.bootstrap}
        if st.mode != "plaintext":
            props["security.protocol"] = broker.PROTOCOL[st.mode]
        if st.mode in ("scram", "sasl_ssl"):
            var = broker.password_var(side, user)
            props.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                          "sasl.password": self._secrets()[var] if reveal else f"${{{var}}}"})
        if st.tls:
            props["ssl.ca.location"] = str(certs.ca_file(self.tls_dir))
        if st.mode == "mtls":
            ident = certs.Identity(self.tls_dir, f"{side}-{user}")
            props.update({"ssl.certificate.location": str(ident.cert), "ssl.key.location": str(ident.key)})
        return props

    def _init_catalog(self, state: State) -> None:
        """Create the SQL catalog's tables with the V1 schema that both sides can use (a REST
        catalog's server made its own); check that the catalog answers."""
        from cutover.lake import catalog

        if state.lake.catalog == "sqlite":
            self.warehouse.mkdir(parents=True, exist_ok=True)
        catalog.load(self._catalog_section(state, reveal=True))

    def catalog_spec(self) -> Catalog:
        """The catalog as cutover uses it (secrets filled in)."""
        return self._catalog_section(self._load(), reveal=True)

    def _catalog_section(self, state: State, reveal: bool) -> Catalog:
        """The plan's catalog section: secrets as ${VAR}, or filled in with reveal."""
        if state.lake.catalog == "sqlite":
            return Catalog(name=CATALOG_NAME, uri=f"sqlite:///{self.catalog_db}", warehouse=self.warehouse.as_uri())
        section = lake.catalog_section(CATALOG_NAME, self._catalog_server(state.lake), self._storage(state.lake))
        if not reveal:
            return section
        values = self._secrets()
        return dataclasses.replace(section, uri=lake.fill(section.uri, values),
                                   properties={k: lake.fill(v, values) for k, v in section.properties.items()})

    # ----- the lake's servers (REST or PostgreSQL catalog, S3 storage); none for SQLite

    def _storage(self, lk: LakeState) -> lake.StorageSpec:
        assert lk.storage is not None
        return lake.StorageSpec(self.dir / "storage", lk.storage.port)

    def _catalog_server(self, lk: LakeState) -> lake.CatalogSpec:
        assert lk.server is not None and lk.catalog != "sqlite"
        return lake.CatalogSpec(lk.catalog, self.dir / "catalog", lk.server.port)

    def _ensure_lake(self, state: State, only: str | None = None) -> None:
        """Start the storage, then the catalog server (it writes through the storage), if down."""
        lk = state.lake
        if lk.catalog == "sqlite":
            return
        assert lk.storage is not None and lk.server is not None
        storage, server = self._storage(lk), self._catalog_server(lk)
        if only in (None, "storage") and not broker.running(storage, lk.storage.pid):
            progress(f"starting the {storage.title} on {storage.endpoint}")
            lk.storage.pid = lake.start_storage(storage, self._secrets())
            self._save(state)
        if only in (None, "catalog") and not broker.running(server, lk.server.pid):
            progress(f"starting the {server.title} on 127.0.0.1:{server.port}")
            lk.server.pid = lake.start_catalog(server, storage, self._secrets())
            self._save(state)

    def _stop_lake(self, state: State, which: tuple[str, ...] = ("catalog", "storage"), kill: bool = False,
                   ) -> bool:
        lk = state.lake
        if lk.catalog == "sqlite":
            return False
        assert lk.storage is not None and lk.server is not None
        was = False
        for part in which:
            spec, srv = ((self._catalog_server(lk), lk.server) if part == "catalog" else
                         (self._storage(lk), lk.storage))
            progress(f"{'killing' if kill else 'stopping'} the {spec.title}")
            was = lake.stop(spec, srv.pid, kill) or was
            srv.pid = None
        self._save(state)
        return was

    def stop_part(self, part: str, kill: bool = False) -> dict[str, Any]:
        """Stop the catalog server or the storage (`cutover local stop catalog|storage`)."""
        with self._locked():
            state = self._load()
            self._check_part(state, part)
            return {"part": part, "was_running": self._stop_lake(state, (part,), kill), "killed": kill}

    def start_part(self, part: str) -> dict[str, Any]:
        with self._locked():
            state = self._load()
            self._check_part(state, part)
            self._ensure_lake(state, part)
            described: dict[str, Any] = self._describe(state)[part]
            return described

    def _check_part(self, state: State, part: str) -> None:
        if state.lake.catalog == "sqlite":
            raise UsageError(f"the sandbox in {self.dir} keeps its catalog in SQLite on local files: there is "
                             f"no {part} server to stop or start",
                             fix="create the sandbox with --catalog rest or --catalog postgres (cutover local "
                             "down --purge first) to have one")

    def _describe_lake(self, state: State) -> dict[str, Any]:
        lk = state.lake
        cat = self._catalog_section(state, reveal=False)
        if lk.catalog == "sqlite":
            return {"catalog": {"name": cat.name, "type": "sql", "kind": "sqlite", "uri": cat.uri,
                                "warehouse": cat.warehouse}}
        assert lk.storage is not None and lk.server is not None
        server, storage = self._catalog_server(lk), self._storage(lk)
        alive, stored = broker.running(server, lk.server.pid), broker.running(storage, lk.storage.pid)
        return {"catalog": {"name": cat.name, "type": cat.type, "kind": lk.catalog, "uri": cat.uri,
                            "warehouse": cat.warehouse or f"s3://{lake.BUCKET}/", "port": server.port,
                            "running": alive, "pid": lk.server.pid if alive else None, "log": str(server.log_file)},
                "storage": {"endpoint": storage.endpoint, "bucket": lake.BUCKET, "running": stored,
                            "pid": lk.storage.pid if stored else None, "log": str(storage.log_file),
                            "folder": str(storage.data_dir)}}

    def _write_plan(self, state: State) -> None:
        import yaml

        plan = sandbox_plan.document(
            self._catalog_section(state, reveal=False),
            {s: self.client_properties(s, state.clusters[s], reveal=False) for s in SIDES}, self.secrets_file.name,
            min(len(st.nodes) for st in state.clusters.values()),
            tansu.mirror_keys({side: st.platform for side, st in state.clusters.items()}, state.lake.catalog))
        plan.update(self._registry_plan(state))
        header = ("# Generated by `cutover local up` for the local sandbox; rewritten on every up.\n"
                  "# Copy it before editing. Every key is documented in samples/plan.yaml.\n")
        tmp = self.plan_file.with_suffix(".tmp")
        tmp.write_text(header + yaml.safe_dump(plan, sort_keys=False))
        tmp.replace(self.plan_file)

    def down(self, purge: bool = False, kill: bool = False) -> dict[str, Any]:
        """Stop both brokers. Data is kept unless purge; nothing outside the folder is touched. With
        kill, SIGKILL at once (a throwaway sandbox: no controlled shutdown to wait for)."""
        if not self.exists():
            if purge and self.dir.exists():
                shutil.rmtree(self.dir)
            return {"dir": str(self.dir), "stopped": [], "purged": purge}
        with self._locked():
            state = self._load()
            stopped: list[str] = [s for s in SIDES if self._stop(state, s, kill=kill)]
            stopped = (["connect"] if self._stop_connect(state, kill) else []) + stopped
            stopped += [p for p in ("catalog", "storage") if self._stop_lake(state, (p,), kill)]
            stopped += ["registry"] if self._stop_registries(state, kill) else []
        if purge:
            shutil.rmtree(self.dir)
        return {"dir": str(self.dir), "stopped": stopped, "purged": purge}

    # -- the drills' fault injector (cutover.drill.faults.FaultInjector) ---------------------

    automatic = True
    _catalog_lock: Any = None
    _storage_taken = False

    def stop_cluster(self, side: ClusterSide, kill: bool = False) -> dict[str, Any]:
        return self.stop(side, kill=kill)

    def start_cluster(self, side: ClusterSide) -> dict[str, Any]:
        return self.start(side)

    def take_catalog(self) -> dict[str, Any]:
        """SQLite: hold its write lock (readers get in, commits fail) until it is given back.
        A REST or PostgreSQL catalog: stop its server until it is given back."""
        import sqlite3

        state = self._load()
        if state.lake.catalog != "sqlite":
            self.stop_part("catalog")
            return {"catalog": state.lake.catalog, "stopped": True}
        if self._catalog_lock is None:
            conn = sqlite3.connect(self.catalog_db, timeout=5, isolation_level=None, check_same_thread=False)
            conn.execute("BEGIN IMMEDIATE")
            self._catalog_lock = conn
        return {"catalog": str(self.catalog_db)}

    def give_catalog(self) -> dict[str, Any]:
        if self._load().lake.catalog != "sqlite":
            self.start_part("catalog")
            return {"restored": True}
        held, self._catalog_lock = self._catalog_lock, None
        if held is not None:
            held.execute("ROLLBACK")
            held.close()
        return {"restored": held is not None}

    def take_storage(self, kill: bool = False) -> dict[str, Any]:
        """Stop the storage server (s3proxy); on SQLite the warehouse is local files: none to stop."""
        state = self._load()
        if state.lake.catalog == "sqlite":
            raise UsageError(f"the sandbox in {self.dir} keeps its warehouse on local files: there is no "
                             "storage server to take away",
                             fix="run this drill on a sandbox made with --catalog rest or --catalog postgres "
                             "(cutover local down --purge, then cutover local up --catalog rest)")
        self._storage_taken = True
        done = self.stop_part("storage", kill)
        return {"storage": self._storage(state.lake).endpoint, **done}

    def give_storage(self) -> dict[str, Any]:
        self._storage_taken = False
        return {"restored": True, **self.start_part("storage")}

    def release(self) -> None:
        self.give_catalog()
        if self._storage_taken:
            self.give_storage()

    def stop(self, side: ClusterSide, kill: bool = False, node: int | None = None) -> dict[str, Any]:
        """Stop a cluster, or one broker of it (`node`, 1-based)."""
        with self._locked():
            state = self._load()
            self._check_node(state, side, node)
            was = self._stop(state, side, kill, node)
            return {"cluster": side, **({"broker": node} if node else {}), "was_running": was,
                    "killed": kill and was}

    def start(self, side: ClusterSide, node: int | None = None) -> dict[str, Any]:
        with self._locked():
            state = self._load()
            self._check_node(state, side, node)
            self._ensure_running(state, side, node)
            described: dict[str, Any] = self._describe(state)[side]
            return described

    def _check_node(self, state: State, side: ClusterSide, node: int | None) -> None:
        count = len(state.clusters[side].nodes)
        if node is not None and not 1 <= node <= count:
            raise UsageError(f"the {side} cluster has no broker {node}: it has {count} (1 to {count})",
                             fix=f"use --broker 1 to {count}" if count > 1 else "leave --broker out")

    def _stop(self, state: State, side: ClusterSide, kill: bool, node: int | None = None) -> bool:
        st = state.clusters[side]
        nodes = [node] if node else list(range(1, len(st.nodes) + 1))
        which = f" broker {node}" if node else ""
        progress(f"{'killing' if kill else 'stopping'} the {side} cluster{which}")
        was = False
        for i in reversed(nodes):  # the first node last: it is the one clients know first
            was = broker.stop(self.process(side, st, i), st.nodes[i - 1].pid, kill=kill) or was
            st.nodes[i - 1].pid = None
        found = self.zookeeper_of(side, st)
        if found is not None and node is None:  # the whole cluster: its ZooKeeper too
            was = broker.stop(found[0], found[1].pid, kill=kill) or was
            found[1].pid = None
        self._save(state)
        return was

    def status(self) -> dict[str, Any]:
        return self._describe(self._load())

    def _describe(self, state: State) -> dict[str, Any]:
        out: dict[str, Any] = {"dir": str(self.dir), "plan": str(self.plan_file)}
        for side in SIDES:
            st = state.clusters[side]
            brokers = []
            for i, (spec, node) in enumerate(zip(self.processes(side, st), st.nodes, strict=True), 1):
                alive = broker.running(spec, node.pid)
                brokers.append({"broker": i, "bootstrap": f"127.0.0.1:{node.port}",
                                "controller_port": None if st.zookeeper else node.controller_port,
                                "running": alive, "pid": node.pid if alive else None, "log": str(spec.log_file)})
            out[side] = {
                "bootstrap": st.bootstrap,
                "running": all(b["running"] for b in brokers) and self._zookeeper_running(side, st),
                "pid": brokers[0]["pid"],
                "cluster_id": self._cluster_id(side, st),
                "security": broker.describe(st.mode),
                "platform": st.platform,
                "kafka_version": st.version,
                "metadata": st.metadata,
                **({"zookeeper": self._describe_zookeeper(side, st)} if st.zookeeper else {}),
                "users": [broker.ADMIN_USER, broker.READER_USER] if broker.authenticates(st.mode) else [],
                "log": brokers[0]["log"],
                "brokers": brokers,
            }
        out.update(self._describe_lake(state))
        out["connect"] = self._describe_connect(state)
        out.update({"registry": r} if (r := self._describe_registries(state)) else {})
        return out

    def _cluster_id(self, side: ClusterSide, st: ClusterState) -> str | None:
        """KRaft: the id the sandbox formatted the storage with. ZooKeeper mode: the id the
        cluster chose at its first start (in each broker's meta.properties); None before."""
        if not st.zookeeper:
            return st.cluster_id
        meta = self.spec(side, st).data_dir / "meta.properties"
        lines = meta.read_text().splitlines() if meta.is_file() else []
        return next((line.split("=", 1)[1] for line in lines if line.startswith("cluster.id=")), None)

    def _zookeeper_running(self, side: ClusterSide, st: ClusterState) -> bool:
        """True in KRaft mode (nothing to run); in ZooKeeper mode, whether its server runs."""
        found = self.zookeeper_of(side, st)
        return found is None or broker.running(found[0], found[1].pid)

    def _describe_zookeeper(self, side: ClusterSide, st: ClusterState) -> dict[str, Any]:
        found = self.zookeeper_of(side, st)
        assert found is not None
        return zookeeper.describe(*found)

STORE_PASSWORD_VAR = "CUTOVER_SANDBOX_TLS_STORE_PASSWORD"

