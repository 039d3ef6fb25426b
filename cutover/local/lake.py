"""The sandbox's lake when it is production-shaped: S3-compatible storage (s3proxy on a local
folder) under an Iceberg REST catalog server or a PostgreSQL catalog.

The default sandbox keeps a SQLite catalog on local files and starts none of this. Each
server here is one process, known like a broker by the config file on its command line,
with its log in the sandbox folder:

- storage: s3proxy (Maven Central, filesystem backend), one bucket `warehouse`;
- catalog "rest": Apache Iceberg's REST catalog server (Maven Central, iceberg-open-api),
  backed by its JDBC catalog on a SQLite file, writing through S3FileIO, run by
  RestCatalogServer.java beside this module so that it listens on 127.0.0.1 only (Iceberg's
  own main listens on every interface);
- catalog "postgres": PostgreSQL from the system's packages (initdb, postgres) on a free
  port, TCP on 127.0.0.1 only. PostgreSQL refuses to run as root, so as root it runs as
  the user `nobody`, who must be able to reach the sandbox folder.

Secrets (the storage's keys, the database password) live only in the sandbox's
secrets.env; the generated plan names them as ${VAR}. The REST server gets the storage
keys through the AWS SDK's environment variables, never as catalog properties, because it
logs its catalog properties.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cutover import jvm
from cutover.errors import DependencyMissing, SandboxError
from cutover.lake.catalog import S3_COMPAT_ENV
from cutover.local import broker
from cutover.plan.model import Catalog

CatalogKind = Literal["sqlite", "rest", "postgres"]
CATALOG_KINDS: tuple[CatalogKind, ...] = ("sqlite", "rest", "postgres")
BUCKET = "warehouse"
REGION = "us-east-1"
ACCESS_KEY_VAR = "CUTOVER_SANDBOX_S3_ACCESS_KEY"
SECRET_KEY_VAR = "CUTOVER_SANDBOX_S3_SECRET_KEY"
DB_PASSWORD_VAR = "CUTOVER_SANDBOX_CATALOG_PASSWORD"
DB_USER = "cutover"
DB_NAME = "postgres"
READY_TIMEOUT = 90.0
#: Where every lake server listens: this host only.
LOOPBACK = "127.0.0.1"
_REST_PROGRAM = jvm.JAVA_SOURCES / "RestCatalogServer.java"


@dataclass
class Server:
    port: int
    pid: int | None = None


@dataclass(frozen=True)
class StorageSpec:
    """s3proxy serving the folder `data/` (one subfolder per bucket)."""

    folder: Path
    port: int
    version: str = ""
    title: str = "storage (s3proxy)"

    @property
    def config_file(self) -> Path:
        return self.folder / "s3proxy.properties"

    @property
    def log_file(self) -> Path:
        return self.folder / "s3proxy.log"

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@dataclass(frozen=True)
class CatalogSpec:
    """The catalog server: Iceberg's REST catalog, or PostgreSQL."""

    kind: CatalogKind
    folder: Path
    port: int
    version: str = ""

    @property
    def title(self) -> str:
        return "catalog (Iceberg REST server)" if self.kind == "rest" else "catalog (PostgreSQL)"

    @property
    def config_file(self) -> Path:
        return self.folder / ("rest-catalog.properties" if self.kind == "rest" else "pgdata/postgresql.conf")

    @property
    def log_file(self) -> Path:
        return self.folder / ("rest-catalog.log" if self.kind == "rest" else "postgres.log")

    @property
    def data_dir(self) -> Path:
        return self.folder / ("rest-catalog.db" if self.kind == "rest" else "pgdata")

    @property
    def uri(self) -> str:
        if self.kind == "rest":
            return f"http://{LOOPBACK}:{self.port}"
        return f"postgresql+psycopg2://{DB_USER}:${{{DB_PASSWORD_VAR}}}@{LOOPBACK}:{self.port}/{DB_NAME}"


def storage_properties(storage: StorageSpec) -> dict[str, str]:
    """The plan's catalog.properties for the storage, secrets as ${VAR} (pyiceberg's names;
    cutover.lake.catalog renders them for Spark's S3FileIO)."""
    return {"s3.endpoint": storage.endpoint, "s3.access-key-id": f"${{{ACCESS_KEY_VAR}}}",
            "s3.secret-access-key": f"${{{SECRET_KEY_VAR}}}", "s3.path-style-access": "true",
            "s3.region": REGION}


def catalog_section(name: str, cat: CatalogSpec, storage: StorageSpec) -> Catalog:
    """The plan's catalog section for this lake (secrets as ${VAR})."""
    return Catalog(name=name, type="rest" if cat.kind == "rest" else "sql", uri=cat.uri,
                   warehouse=None if cat.kind == "rest" else f"s3://{BUCKET}/",
                   # REST: the server holds the warehouse; name its location for the storage probe
                   storage=f"s3://{BUCKET}/" if cat.kind == "rest" else None,
                   properties=storage_properties(storage))


def fill(text: str, secrets: dict[str, str]) -> str:
    """A plan value with its ${VAR} secrets filled in (what cutover itself connects with)."""
    for name, value in secrets.items():
        text = text.replace(f"${{{name}}}", value)
    return text


# ----- storage ------------------------------------------------------------------------------

def start_storage(spec: StorageSpec, secrets: dict[str, str]) -> int:
    spec.folder.mkdir(parents=True, exist_ok=True)
    (spec.data_dir / BUCKET).mkdir(parents=True, exist_ok=True)
    fd = os.open(spec.config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join([
            f"s3proxy.endpoint={spec.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={secrets[ACCESS_KEY_VAR]}",
            f"s3proxy.credential={secrets[SECRET_KEY_VAR]}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={spec.data_dir}",
        ]) + "\n")
    jar = jvm.resolve(jvm.S3PROXY)[0]
    cmd = [jvm.java(), "-Xms64m", "-Xmx256m", *jvm.LEAN, "-jar", str(jar), "--properties", str(spec.config_file)]
    return _start(spec, cmd, None, lambda _log: True)


# ----- catalog ------------------------------------------------------------------------------

def start_catalog(spec: CatalogSpec, storage: StorageSpec, secrets: dict[str, str]) -> int:
    spec.folder.mkdir(parents=True, exist_ok=True)
    if spec.kind == "rest":
        return _start_rest(spec, storage, secrets)
    return _start_postgres(spec, secrets)


def _start_rest(spec: CatalogSpec, storage: StorageSpec, secrets: dict[str, str]) -> int:
    settings = {
        # Its JDBC catalog on SQLite: concurrent requests (a shadow, a drill's old pipeline, verify)
        # wait for the write lock instead of failing with SQLITE_BUSY, which the server answers
        # with a 500 (a commit's outcome unknown); WAL lets readers in while one writes.
        "CATALOG_URI": f"jdbc:sqlite:{spec.data_dir}?journal_mode=WAL&busy_timeout=30000",
        "CATALOG_JDBC_USER": "iceberg",  # SQLite ignores them; the JDBC catalog asks for them
        "CATALOG_JDBC_PASSWORD": "iceberg",
        # One connection to SQLite. Started over a catalog it kept, Iceberg's JdbcCatalog (up to
        # 1.10) leaves the read it checked its tables with open on a pooled connection
        # (apache/iceberg#15462); once another connection writes, every write on that one fails
        # with SQLITE_BUSY_SNAPSHOT for good, a 500 to each client. SQLite takes one writer at a
        # time anyway; with a single connection no read of it can go stale.
        "CATALOG_CLIENTS": "1",
        "CATALOG_WAREHOUSE": f"s3://{BUCKET}/",
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": storage.endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_CLIENT_REGION": REGION,
        "CATALOG_REST_PORT": str(spec.port),
    }
    # The settings, without secrets, for whoever reads the folder; its path on the command
    # line is how `running` knows the process.
    spec.config_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    env = {**os.environ, **S3_COMPAT_ENV, **settings, "AWS_ACCESS_KEY_ID": secrets[ACCESS_KEY_VAR],
           "AWS_SECRET_ACCESS_KEY": secrets[SECRET_KEY_VAR], "AWS_REGION": REGION}
    jar = jvm.resolve(jvm.REST_CATALOG)[0]
    # Iceberg's own main listens on every interface, with no setting to choose one: a program beside this
    # module runs the same server on 127.0.0.1 only (RestCatalogServer.java).
    cmd = [jvm.java(), "-Xms64m", "-Xmx512m", *jvm.LEAN, f"-Dcutover.sandbox.config={spec.config_file}",
           *jvm.program(_REST_PROGRAM, [jar]), LOOPBACK]
    return _start(spec, cmd, env, lambda _log: True)  # Jetty opens the port once the catalog is loaded


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if candidates:
        return candidates[-1]
    raise DependencyMissing(f"PostgreSQL's {name} was not found (not on PATH, not in /usr/lib/postgresql/*/bin)",
                            fix="install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql), "
                            "or use --catalog rest or sqlite")


def _as_postgres_user() -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as `nobody` (setpriv)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


def _check_reachable(folder: Path) -> None:
    """As root: `nobody` must be able to enter every folder above the database's."""
    if os.geteuid() != 0:
        return
    for parent in [folder, *folder.parents]:
        if parent.exists() and not parent.stat().st_mode & 0o001:
            raise SandboxError(f"PostgreSQL does not run as root, so cutover runs it as 'nobody', who cannot "
                               f"enter {parent} (mode {oct(parent.stat().st_mode & 0o777)})",
                               fix="run cutover as a user other than root, or give the sandbox a --dir "
                               "that every user can enter (for example under /var/tmp)")


def _initdb(spec: CatalogSpec, password: str) -> None:
    """Create the database cluster once (user `cutover`, password authentication over TCP)."""
    if (spec.data_dir / "PG_VERSION").is_file():
        return
    _check_reachable(spec.folder)
    shutil.rmtree(spec.data_dir, ignore_errors=True)  # a half-made one from an interrupted up
    pwfile = spec.folder / ".pwfile"
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    root = os.geteuid() == 0
    if root:
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(spec.folder, nobody.pw_uid, nobody.pw_gid)
        os.chown(pwfile, nobody.pw_uid, nobody.pw_gid)
    try:
        done = subprocess.run([*_as_postgres_user(), postgres_bin("initdb"), "-D", str(spec.data_dir), "-U",
                               DB_USER, f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8",
                               "--locale=C.UTF-8", "--no-sync"], capture_output=True, text=True, check=False)
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode != 0:
        raise SandboxError(f"initdb for the sandbox's PostgreSQL catalog failed:\n"
                           f"{(done.stdout + done.stderr)[-1200:]}",
                           fix="cutover local down --purge, then up again")


def _start_postgres(spec: CatalogSpec, secrets: dict[str, str]) -> int:
    _initdb(spec, secrets[DB_PASSWORD_VAR])
    cmd = [*_as_postgres_user(), postgres_bin("postgres"), "-D", str(spec.data_dir),
           "-c", f"config_file={spec.config_file}", "-p", str(spec.port), "-c", f"listen_addresses={LOOPBACK}",
           "-c", "unix_socket_directories=", "-c", "logging_collector=off"]
    return _start(spec, cmd, None, lambda log: "database system is ready to accept connections" in log)


def _start(spec: StorageSpec | CatalogSpec, cmd: list[str], env: dict[str, str] | None, ready: broker.Ready) -> int:
    return broker.start_command(spec, cmd, env, ready, READY_TIMEOUT)


def stop(spec: StorageSpec | CatalogSpec, pid: int | None, kill: bool = False) -> bool:
    """Stop a lake server; kill=True crashes it (PostgreSQL: an immediate shutdown, SIGQUIT,
    which recovers from its log at the next start, as after a crash)."""
    if isinstance(spec, CatalogSpec) and spec.kind == "postgres":
        return broker.stop(spec, pid, kill, graceful=signal.SIGINT, crash=signal.SIGQUIT)
    return broker.stop(spec, pid, kill)
