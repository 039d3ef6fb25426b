"""One Kafka broker process (KRaft, or ZooKeeper mode on 3.9): configure, format, start, wait, stop.

A broker is identified by its folder. Stopping checks that the PID still runs our
server.properties before signalling it, so a recycled PID is never killed.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from cutover import jvm
from cutover.errors import SandboxError
from cutover.interrupt import cleaning
from cutover.local.ports import free_port
from cutover.output import progress

READY_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
ADMIN_USER = "admin"
READER_USER = "reader"


#: Whether a process's log lines of this run say it is ready.
Ready = Callable[[str], bool]


class PortInUse(SandboxError):
    """The broker could not bind one of its ports (someone took it after we chose it)."""


Security = Literal["plaintext", "scram", "tls", "sasl_ssl", "mtls"]
SECURITY: tuple[Security, ...] = ("plaintext", "scram", "tls", "sasl_ssl", "mtls")
#: The client listener's protocol for each sandbox security choice.
PROTOCOL: dict[Security, str] = {"plaintext": "PLAINTEXT", "scram": "SASL_PLAINTEXT", "tls": "SSL",
                                 "sasl_ssl": "SASL_SSL", "mtls": "SSL"}


def describe(security: Security) -> str:
    """What `local status` says of a listener."""
    return {"plaintext": "PLAINTEXT", "scram": "SASL_PLAINTEXT/SCRAM-SHA-256", "tls": "SSL (server certificate)",
            "sasl_ssl": "SASL_SSL/SCRAM-SHA-256", "mtls": "SSL (client certificates required)"}[security]


def authenticates(security: Security) -> bool:
    """Whether clients prove who they are (users, ACLs enforced): SCRAM or a client certificate."""
    return security in ("scram", "sasl_ssl", "mtls")


@dataclass(frozen=True)
class BrokerSpec:
    name: str
    folder: Path
    port: int
    controller_port: int
    cluster_id: str
    security: Security = "plaintext"
    #: The sandbox's TLS folder (CA, certificates, key stores) when the listener uses TLS.
    tls: Path | None = None
    #: The Kafka release the broker runs (jvm.KAFKA_VERSIONS).
    version: str = jvm.KAFKA_VERSION
    node_id: int = 1
    #: Every node of a multi-broker cluster as (node id, controller port): a static
    #: controller quorum of combined broker+controller nodes. Empty: one standalone node.
    voters: tuple[tuple[int, int], ...] = ()
    #: The port of the cluster's ZooKeeper when it runs in ZooKeeper mode; None: KRaft.
    zookeeper: int | None = None

    @property
    def size(self) -> int:
        """How many brokers the cluster has."""
        return max(1, len(self.voters))

    @property
    def label(self) -> str:
        return self.name if self.size == 1 else f"{self.name} broker {self.node_id}"

    @property
    def title(self) -> str:
        return f"{self.name} broker" if self.size == 1 else self.label

    @property
    def secure(self) -> bool:
        """Clients authenticate and ACLs are enforced (StandardAuthorizer)."""
        return authenticates(self.security)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.folder / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.folder / "broker.log"

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"


def new_cluster_id() -> str:
    """Kafka's Uuid string form: URL-safe base64 of 16 random bytes, no padding, no leading '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def render_config(spec: BrokerSpec, admin_password: str | None, store_password: str | None = None) -> str:
    client = PROTOCOL[spec.security]
    n = spec.size
    quorum = (f"controller.quorum.voters={','.join(f'{i}@127.0.0.1:{p}' for i, p in spec.voters)}" if n > 1
              else f"controller.quorum.bootstrap.servers=127.0.0.1:{spec.controller_port}")
    isr = 2 if n >= 3 else 1  # production's usual RF 3 / min.insync.replicas 2
    if spec.zookeeper is not None:
        metadata = [f"broker.id={spec.node_id}", f"zookeeper.connect=127.0.0.1:{spec.zookeeper}",
                    f"listeners={client}://127.0.0.1:{spec.port}",
                    f"listener.security.protocol.map={client}:{client}"]
    else:
        metadata = ["process.roles=broker,controller", f"node.id={spec.node_id}", quorum,
                    f"listeners={client}://127.0.0.1:{spec.port},CONTROLLER://127.0.0.1:{spec.controller_port}",
                    "controller.listener.names=CONTROLLER",
                    f"listener.security.protocol.map={client}:{client},CONTROLLER:PLAINTEXT",
                    # The controller's no-op record every 5 s, not every 0.5 s: an idle sandbox broker used
                    # 0.74x the CPU (bench/broker_threads_bench.py), and CI keeps a dozen of them up.
                    "metadata.max.idle.interval.ms=5000"]
    lines = [
        *metadata,
        f"advertised.listeners={client}://127.0.0.1:{spec.port}",
        f"inter.broker.listener.name={client}",
        f"log.dirs={spec.data_dir}",
        "num.partitions=1",
        f"default.replication.factor={n}",
        f"min.insync.replicas={isr}",
        "auto.create.topics.enable=false",
        f"offsets.topic.replication.factor={n}",
        "offsets.topic.num.partitions=5",
        f"transaction.state.log.replication.factor={n}",
        f"transaction.state.log.min.isr={isr}",
        "transaction.state.log.num.partitions=5",
        f"share.coordinator.state.topic.replication.factor={n}",
        f"share.coordinator.state.topic.min.isr={isr}",
        "group.initial.rebalance.delay.ms=0",
        # The cleaner every second: a compacted topic settles while a test waits for it (every 5 s, a test's
        # topic went on compacting after the mirror had copied it).
        "log.cleaner.backoff.ms=1000",
        # Fewer request, network and background threads: idle, the polls of Kafka's defaults were a large part
        # of a sandbox broker's CPU (bench/broker_threads_bench.py), and CI keeps a dozen brokers up.
        "num.io.threads=2",
        "num.network.threads=1",
        "background.threads=2",
    ]
    # KRaft: ANONYMOUS only ever arrives on the loopback CONTROLLER listener (the node talking
    # to its own controller). ZooKeeper mode has no such listener, so no ANONYMOUS super user.
    super_users = [f"User:{ADMIN_USER}"] + ([] if spec.zookeeper is not None else ["User:ANONYMOUS"])
    if spec.security in ("scram", "sasl_ssl"):
        assert admin_password is not None
        lines += [
            "sasl.enabled.mechanisms=SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
            f"listener.name.{client.lower()}.scram-sha-256.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN_USER}" password="{admin_password}";',
        ]
    if spec.security in ("tls", "sasl_ssl", "mtls"):
        from cutover.local import certs

        assert spec.tls is not None and store_password is not None
        server = certs.Identity(spec.tls, f"{spec.name}-broker")
        lines += [
            f"ssl.keystore.location={server.p12}",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.password={store_password}",
            f"ssl.key.password={store_password}",
            f"ssl.truststore.location={certs.ca_file(spec.tls)}",
            "ssl.truststore.type=PEM",
            "ssl.endpoint.identification.algorithm=https",
        ]
    if spec.security == "mtls":
        # The principal is the certificate's CN (User:admin, User:reader), so ACLs read as
        # they do with SCRAM; the broker talks to itself with its own certificate.
        lines += ["ssl.client.auth=required", "ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/$1/,DEFAULT"]
        super_users.append(f"User:{spec.name}-broker")
    if spec.secure:
        lines += [
            "authorizer.class.name=" + ("kafka.security.authorizer.AclAuthorizer" if spec.zookeeper is not None
                                        else "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
            f"super.users={';'.join(super_users)}",
            "allow.everyone.if.no.acl.found=false",
        ]
    return "\n".join(lines) + "\n"


def _classpath(version: str) -> str:
    return os.pathsep.join(str(j) for j in jvm.resolve(jvm.kafka_broker(version)))


def class_archive(version: str) -> Path:
    """Where Kafka `version`'s class-data archive is (made once per machine by ensure_class_archive): a broker
    that maps its classes from it starts in about 60 % of the CPU and 2 s sooner (bench/README.md)."""
    return jvm.archive_path("kafka", jvm.resolve(jvm.kafka_broker(version)), kafka=version)


def jvm_cmd(version: str, main: str, *args: str, sharing: bool = True) -> list[str]:
    """A JVM running `main` of Kafka `version`'s jars (the broker, its tools, ZooKeeper), with the class-data
    archive when there is one (unless `sharing` is False)."""
    return [jvm.java(), "-Xms128m", "-Xmx768m", *jvm.LEAN, *(jvm.sharing(class_archive(version)) if sharing else []),
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp", _classpath(version), main, *args]


def ensure_class_archive(version: str) -> Path | None:
    """Make Kafka `version`'s class-data archive unless it exists (once per machine, Java build and jars; one
    process makes it while others wait): a scratch broker in a temporary folder on free loopback ports
    starts with -XX:ArchiveClassesAtExit, and its graceful stop writes the archive, under a temporary name
    renamed when the JVM is gone, so no broker maps half an archive. Its path, or None when the user chose
    the class sharing or it could not be made (brokers then start as before: only their speed depends on it)."""
    archive = class_archive(version)
    if archive.is_file():
        return archive
    if jvm.own_sharing():
        return None
    with jvm.locked(archive.with_suffix(".lock")):
        if archive.is_file():  # another process made it while this one waited
            return archive
        progress(f"making Kafka {version}'s class-data archive (first use only: brokers start faster after it)")
        for stale in archive.parent.glob("*.partial"):  # a maker killed in its dump: only the lock's holder writes
            stale.unlink(missing_ok=True)
        partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
        with tempfile.TemporaryDirectory(prefix="cutover-kafka-cds-") as scratch:
            spec = BrokerSpec("archive", Path(scratch), free_port(), free_port(), new_cluster_id(), version=version)
            spec.config_file.write_text(render_config(spec, None))
            proc: subprocess.Popen[bytes] | None = None
            try:
                format_storage(spec, {})
                cmd = jvm_cmd(version, "kafka.Kafka", str(spec.config_file), sharing=False)
                cmd.insert(1, f"-XX:ArchiveClassesAtExit={partial}")
                proc, offset = launch_command(spec, cmd)
                wait_ready(spec, proc, offset, started)
                proc.send_signal(signal.SIGTERM)  # the archive is written on the way out
                proc.wait(timeout=STOP_TIMEOUT * 4)
                problem = _archive_problem(version, partial, Path(scratch))
            except (SandboxError, subprocess.TimeoutExpired) as exc:
                problem = str(exc)
            finally:
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if problem:
            partial.unlink(missing_ok=True)
            progress(f"Kafka {version}'s class-data archive could not be made; brokers start without it ({problem})")
            return None
        partial.replace(archive)
    return archive


def _archive_problem(version: str, archive: Path, scratch: Path) -> str | None:
    """What is wrong with a newly written archive, or None: a JVM that must map it (-Xshare:on) prints Kafka's
    version. An archive cut short crashes every JVM that maps it, even the default -Xshare:auto, so none is
    kept that this JVM could not map."""
    if not archive.is_file():
        return "the scratch broker wrote none"
    check = jvm_cmd(version, "kafka.Kafka", "--version", sharing=False)
    check[1:1] = ["-Xshare:on", f"-XX:SharedArchiveFile={archive}", *jvm.SHARING_QUIET]
    try:
        done = subprocess.run(check, capture_output=True, text=True, cwd=scratch, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return "a JVM mapping it did not answer within 120 s"
    if done.returncode != 0 or version not in done.stdout:
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        return f"a JVM could not map it: exit {done.returncode}, {last[:200]}"
    return None


def format_storage(spec: BrokerSpec, scram_users: dict[str, str]) -> None:
    """Write the config and format the log folder (once; KRaft needs it before first start)."""
    spec.folder.mkdir(parents=True, exist_ok=True)
    cmd = jvm_cmd(spec.version, "kafka.tools.StorageTool", "format", "-t", spec.cluster_id, "-c",
                  str(spec.config_file))
    if spec.size == 1:
        cmd.append("--standalone")  # a static quorum (controller.quorum.voters) takes no flag
    for user, password in scram_users.items():
        cmd += ["--add-scram", f"SCRAM-SHA-256=[name={user},password={password}]"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = done.stdout[-800:] + done.stderr[-800:]
        raise SandboxError(f"formatting the {spec.title}'s storage failed:\n{output}",
                           fix=f"remove {spec.folder} (cutover local down --purge) and run up again")


def start(spec: BrokerSpec) -> int:
    """Start the broker in its own session; return its PID once it accepts connections."""
    return start_all([spec])[0]


def start_all(specs: list[BrokerSpec]) -> list[int]:
    """Start brokers together (a quorum forms only when most of its nodes run); return
    their PIDs once every one accepts connections."""
    return start_processes(specs, "kafka.Kafka", started)


def start_processes(specs: Sequence[Process], main: str, ready: Callable[[str], bool],
                    timeout: float = READY_TIMEOUT) -> list[int]:
    """Launch `main` for every spec, then wait until each accepts connections on its port and
    `ready` holds for its log lines of this run; their PIDs."""
    launched: list[tuple[Process, subprocess.Popen[bytes], int]] = []
    try:
        for spec in specs:
            launched.append((spec, *launch(spec, main)))
        return [wait_ready(spec, proc, offset, ready, timeout) for spec, proc, offset in launched]
    except BaseException:
        # Not ready (error, timeout, Ctrl-C): never leave a process nobody knows about.
        with cleaning():
            for _spec, proc, _offset in launched:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        raise


def launch(spec: Process, main: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start `main` on the spec's config in its own session, output to its log; returns the
    process and where this run's lines start in the log."""
    return launch_command(spec, jvm_cmd(spec.version, main, str(spec.config_file)))


def launch_command(spec: Process, cmd: list[str], env: dict[str, str] | None = None,
                   ) -> tuple[subprocess.Popen[bytes], int]:
    """Start `cmd` (which must name the spec's config file, the process's identity) in its own
    session, output to the spec's log; the process and where this run's lines start in the log."""
    with open(spec.log_file, "ab") as log:
        log.write(f"\n===== cutover: starting {spec.title} at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        log.flush()
        offset = log.tell()  # readiness is read from this run's lines only
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=spec.folder, env=env)
    return proc, offset


def start_command(spec: Process, cmd: list[str], env: dict[str, str] | None, ready: Ready,
                  timeout: float = READY_TIMEOUT) -> int:
    """Launch `cmd` and wait until it is ready (wait_ready); the PID. A start that fails is killed."""
    proc, offset = launch_command(spec, cmd, env)
    try:
        return wait_ready(spec, proc, offset, ready, timeout)
    except BaseException:
        with cleaning():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        raise


def wait_ready(spec: Process, proc: subprocess.Popen[bytes], offset: int, ready: Callable[[str], bool],
               timeout: float = READY_TIMEOUT) -> int:
    """The PID once the process accepts connections on its port and `ready` holds for this
    run's log lines; a port taken raises PortInUse, an early exit quotes the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            lines = tail(spec.log_file, offset)
            if "Address already in use" in lines or "BindException" in lines:
                raise PortInUse(f"the {spec.title}'s port is taken")
            raise SandboxError(f"the {spec.title} exited during start (code {proc.returncode}); "
                               f"last lines of {spec.log_file}:\n{lines[-1500:]}",
                               fix="fix what the log says, then run cutover local up again")
        if accepts(spec.port) and ready(tail(spec.log_file, offset)):
            return proc.pid
        time.sleep(0.2)
    raise SandboxError(f"the {spec.title} did not start within {timeout:.0f}s", fix=f"read {spec.log_file}")


#: What a broker logs once it serves: KRaft mode, and ZooKeeper mode.
_STARTED = re.compile(r"Kafka Server started|\[KafkaServer id=\d+\] started")


def started(log: str) -> bool:
    """Whether these broker log lines say it has started."""
    return _STARTED.search(log) is not None


class Process(Protocol):
    """A JVM process the sandbox runs (a broker, a ZooKeeper), known by the config file on
    its command line."""

    @property
    def title(self) -> str: ...
    @property
    def folder(self) -> Path: ...
    @property
    def config_file(self) -> Path: ...
    @property
    def log_file(self) -> Path: ...
    @property
    def version(self) -> str: ...
    @property
    def port(self) -> int: ...


def running(spec: Process, pid: int | None) -> bool:
    """True when `pid` is alive and is this process (its command line names our config, by its path or, run in
    the spec's folder, by its name)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if str(spec.config_file).encode() in cmdline:
            return True
        # A process that names its config relative to its folder, where it runs (Tansu: sqlite://tansu.db).
        return spec.config_file.name.encode() in cmdline and \
            Path(f"/proc/{pid}/cwd").resolve() == spec.folder.resolve()
    except OSError:
        return False


def stop(spec: Process, pid: int | None, kill: bool = False, graceful: int = signal.SIGTERM,
         crash: int = signal.SIGKILL) -> bool:
    """Stop the process (`graceful`, or `crash` with kill=True; SIGKILL if it outlives the
    timeout). Returns whether it was running."""
    if not running(spec, pid):
        return False
    assert pid is not None
    os.kill(pid, crash if kill else graceful)
    deadline = time.monotonic() + STOP_TIMEOUT
    while running(spec, pid):
        _reap(pid)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + STOP_TIMEOUT
        time.sleep(0.1)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if we are the parent (a zombie still has a cmdline)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def tail(file: Path, offset: int) -> str:
    with open(file, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def password_var(side: str, user: str) -> str:
    """The sandbox's secrets.env variable that holds a SCRAM user's password on one cluster."""
    return f"CUTOVER_SANDBOX_{side.upper()}_{user.upper()}_PASSWORD"


def has_started_before(spec: BrokerSpec) -> bool:
    """A broker that ran before is known to clients by its port: do not move it."""
    return spec.log_file.exists() and started(spec.log_file.read_text(errors="replace"))
