"""`cutover local ...`: the two-cluster sandbox on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cutover.cli.options import catalog_option, output_option, per_cluster, platform_option
from cutover.errors import UsageError
from cutover.jvm import KAFKA_VERSIONS
from cutover.local.broker import SECURITY
from cutover.output import Format, emit

_dir_option = click.option(
    "--dir", "folder", type=click.Path(file_okay=False, path_type=Path), envvar="CUTOVER_SANDBOX",
    help="Sandbox folder. Env: CUTOVER_SANDBOX; default ~/.cutover/sandbox.",
)
_side = click.argument("cluster", type=click.Choice(["old", "new", "catalog", "storage", "connect", "registry"]))
_broker_option = click.option("--broker", "node", type=click.IntRange(1), default=None,
                              help="Only this broker (1-based) of a multi-broker cluster.")


def _sandbox(folder: Path | None) -> Any:
    from cutover.local.sandbox import Sandbox

    return Sandbox(folder)


def _render_status(s: dict[str, Any]) -> str:
    lines = [f"sandbox {s['dir']}"]
    for side in ("old", "new"):
        c = s[side]
        brokers = c["brokers"]
        kafka = ("Tansu " if c.get("platform") == "tansu" else "Kafka ") + c["kafka_version"] + (
            " on ZooKeeper" if c["metadata"] == "zookeeper" else "")
        if len(brokers) == 1:
            state = f"running (pid {c['pid']})" if c["running"] else "stopped"
            lines.append(f"  {side:4} {c['bootstrap']:22} {state:20} {kafka:12} {c['security']}")
        else:
            up = sum(b["running"] for b in brokers)
            lines.append(f"  {side:4} {len(brokers)} brokers, {up} running, {kafka}, {c['security']}")
            for b in brokers:
                state = f"running (pid {b['pid']})" if b["running"] else "stopped"
                lines.append(f"       broker {b['broker']} {b['bootstrap']:22} {state}")
        if "zookeeper" in c:
            zk = c["zookeeper"]
            state = f"running (pid {zk['pid']})" if zk["running"] else "stopped"
            lines.append(f"       zookeeper {zk['connect']:19} {state}")
    cat = s["catalog"]
    if "running" in cat:
        state = f"running (pid {cat['pid']})" if cat["running"] else "stopped"
        lines.append(f"  catalog {cat['name']} ({cat['kind']}): {cat['uri']}  {state}")
        st = s["storage"]
        state = f"running (pid {st['pid']})" if st["running"] else "stopped"
        lines.append(f"  storage {st['endpoint']} bucket {st['bucket']}  {state}")
    else:
        lines.append(f"  catalog {cat['name']}: {cat['uri']}")
    for side, reg in (s.get("registry") or {}).items():
        state = f"running (pid {reg['pid']})" if reg["running"] else "stopped"
        lines.append(f"  registry {side}: {reg['url']}  {state}")
    cn = s.get("connect")
    if cn:
        state = f"running (pid {cn['pid']})" if cn["running"] else "stopped"
        lines.append(f"  connect {cn['url']} on {cn['cluster']}  {state}  (log: {cn['log']})")
    lines.append(f"  plan    {s['plan']}")
    return "\n".join(lines)


@click.group("local")
def local_group() -> None:
    """Run a local sandbox: two real Kafka clusters ("old", "new") and an Iceberg catalog."""


@local_group.command("up")
@_dir_option
@output_option
@click.option("--secure", "secure", multiple=True, type=click.Choice(["old", "new"]),
              help="Start this cluster with SASL/SCRAM and ACLs (users 'admin' and read-only 'reader'); "
              "the same as --security CLUSTER=scram. Only when the sandbox is first created.")
@click.option("--security", "security", multiple=True, metavar="CLUSTER=MODE",
              callback=per_cluster("MODE", SECURITY, "--security old=mtls"),
              help="The client listener of a cluster: plaintext (default), scram (SASL/SCRAM), tls (server "
              "certificate), sasl_ssl (SCRAM over TLS) or mtls (client certificates, CN = user). Certificates "
              "come from a CA made for the sandbox (folder tls/). Repeat for each cluster. Only when the "
              "sandbox is first created.")
@click.option("--kafka-version", "versions", multiple=True, metavar="CLUSTER=VERSION",
              callback=per_cluster("VERSION", KAFKA_VERSIONS, "--kafka-version old=3.9.1"),
              help="The Kafka release a cluster runs: 4.1.1 (default) or 3.9.1, resolved from Maven Central "
              "(for example --kafka-version old=3.9.1). Only when the sandbox is first created.")
@click.option("--brokers", "sizes", multiple=True, metavar="CLUSTER=N", callback=per_cluster("N", ("1", "3"),
              "--brokers old=3"), help="Brokers in a cluster: 1 (default) or 3 (combined broker+controller "
              "nodes in one quorum; topics default to replication factor 3 and min.insync.replicas 2). Only when "
              "the sandbox is first created.")
@click.option("--metadata", "metadata", multiple=True, metavar="CLUSTER=MODE",
              callback=per_cluster("MODE", ("kraft", "zookeeper"), "--metadata old=zookeeper"),
              help="How a cluster keeps its metadata: kraft (default) or zookeeper (a ZooKeeper server beside "
              "the brokers; Kafka 3.9.1, the last release with it, which it then defaults to). Only when the "
              "sandbox is first created.")
@platform_option("Which Kafka implementation runs a cluster: kafka (Apache Kafka, default) or tansu (Tansu 0.6.0, "
                 "one plaintext broker keeping its log in a SQLite file; built once per machine by scripts/tansu). "
                 "Only when the sandbox is first created.")
@catalog_option
@click.option("--registry", is_flag=True, help="Also run a schema registry with the Confluent API per cluster "
              "(Apicurio Registry, built from Maven Central on first use), on 127.0.0.1; the plan gets a registry "
              "section. Once given, later ups start them too.")
def up_cmd(folder: Path | None, fmt: Format, secure: tuple[str, ...], security: dict[str, str],
           versions: dict[str, str], sizes: dict[str, str], metadata: dict[str, str], platforms: dict[str, str],
           catalog: str | None, registry: bool) -> None:
    """Create the sandbox if needed and start whatever is not running. Safe to repeat."""
    chosen = {**{side: "scram" for side in secure}, **security}
    emit(_sandbox(folder).up(chosen, versions, {side: int(n) for side, n in sizes.items()}, metadata, catalog,
                             registry, platforms),
         fmt, _render_status)


_fetch_options = [
    output_option,
    click.option("--with-mirror-maker", is_flag=True, help="Also fetch MirrorMaker 2 (used by bench/)."),
    click.option("--with-lake", is_flag=True, help="Also fetch the sandbox's REST catalog server and S3 storage "
                 "(s3proxy), for local up --catalog rest|postgres."),
    click.option("--with-connect", is_flag=True, help="Also fetch Kafka Connect with Apache Iceberg's sink "
                 "connector, for local start connect."),
    click.option("--with-registry", is_flag=True, help="Also build the sandbox's schema registry (Apicurio, from "
                 "Maven Central), for local up --registry."),
]


def _fetch(fmt: Format, broker: bool, with_mirror_maker: bool, with_lake: bool, with_connect: bool,
           with_registry: bool = False) -> None:
    from cutover import jvm

    if with_registry:
        from cutover.local.registry import ensure_built

        ensure_built()
    sets = ([jvm.KAFKA_BROKER] if broker else []) + [jvm.SPARK_EXTRAS] \
        + ([jvm.MIRROR_MAKER] if with_mirror_maker else []) + ([jvm.REST_CATALOG, jvm.S3PROXY] if with_lake else []) \
        + ([jvm.ICEBERG_CONNECT, jvm.APICURIO_CONNECT] if with_connect else [])
    result = {s.name: len(jvm.resolve(s)) for s in sets}
    emit({"cache": str(jvm.cutover_home() / "jars"), "jars": result}, fmt,
         lambda r: "\n".join(f"{name}: {n} jars" for name, n in r["jars"].items()) + f"\ncache: {r['cache']}")


@click.group("jars")
def jars_group() -> None:
    """The JVM jars cutover runs Spark (and the sandbox's servers) with, cached under $CUTOVER_HOME/jars."""


@jars_group.command("fetch")
@click.option("--with-sandbox", "sandbox", is_flag=True,
              help="Also the Kafka broker the local sandbox runs (cutover local up).")
def jars_fetch_cmd(fmt: Format, sandbox: bool, with_mirror_maker: bool, with_lake: bool, with_connect: bool,
                   with_registry: bool) -> None:
    """Resolve the jars from Maven Central into the cache (with mvn, once): the
    Spark extras the shadow, verify and promote need (Kafka source, Iceberg runtime, JDBC and S3 clients).
    Run it once where those commands run, e.g. when building their image; CUTOVER_HOME moves the cache."""
    _fetch(fmt, sandbox, with_mirror_maker, with_lake, with_connect, with_registry)


@local_group.command("fetch")
def fetch_cmd(fmt: Format, with_mirror_maker: bool, with_lake: bool, with_connect: bool, with_registry: bool) -> None:
    """The same as cutover jars fetch --with-sandbox: the Kafka broker and the Spark extras."""
    _fetch(fmt, True, with_mirror_maker, with_lake, with_connect, with_registry)


for _option in _fetch_options:
    _option(jars_fetch_cmd)
    _option(fetch_cmd)


@local_group.command("status")
@_dir_option
@output_option
def status_cmd(folder: Path | None, fmt: Format) -> None:
    """Where the clusters listen, whether they run, the catalog, and the generated plan."""
    emit(_sandbox(folder).status(), fmt, _render_status)


@local_group.command("down")
@_dir_option
@output_option
@click.option("--purge", is_flag=True, help="Also delete the sandbox folder: data, logs, catalog and plan.")
def down_cmd(folder: Path | None, fmt: Format, purge: bool) -> None:
    """Stop both clusters (data kept unless --purge). Touches nothing the sandbox did not start."""
    sandbox = _sandbox(folder)
    if not sandbox.dir.exists():  # a mistyped --dir: "nothing was running" would hide the sandbox that runs
        raise UsageError(f"no sandbox in {sandbox.dir}: the folder does not exist",
                         fix="check --dir (or CUTOVER_SANDBOX); cutover local status --dir DIR shows a sandbox")
    emit(sandbox.down(purge), fmt,
         lambda r: f"stopped: {', '.join(r['stopped']) or 'nothing was running'}"
         + (f"; removed {r['dir']}" if r["purged"] else ""))


@local_group.command("stop")
@_side
@_dir_option
@output_option
@click.option("--kill", is_flag=True, help="SIGKILL instead of a clean shutdown (a crash, for drills).")
@_broker_option
@click.option("--cluster", "on", type=click.Choice(["old", "new"]), default=None,
              help="registry: only the registry of this cluster (default: both).")
def stop_cmd(cluster: str, folder: Path | None, fmt: Format, kill: bool, node: int | None, on: str | None) -> None:
    """Stop one cluster (or one broker of it), the catalog server or storage, keeping its data, the
    Kafka Connect worker, or the schema registries (--cluster: one of them)."""
    if on is not None and cluster != "registry":
        raise click.UsageError(f"--cluster is for the registry, not the {cluster}; leave it out")
    if cluster in ("catalog", "storage", "connect", "registry"):
        _no_broker(cluster, node)
        sandbox = _sandbox(folder)
        done = sandbox.stop_connect(kill) if cluster == "connect" else sandbox.stop_registry(kill, on) \
            if cluster == "registry" else sandbox.stop_part(cluster, kill)
        word = "killed" if done["killed"] and done["was_running"] else "stopped" if done["was_running"] \
            else "was not running"
        emit(done, fmt, lambda r: f"{cluster}: {word}")
        return
    result = _sandbox(folder).stop(cluster, kill, node)
    word = "killed" if result["killed"] else "stopped" if result["was_running"] else "was not running"
    emit(result, fmt, lambda r: f"{r['cluster']}{f' broker {node}' if node else ''}: {word}")


@local_group.command("start")
@_side
@_dir_option
@output_option
@_broker_option
@click.option("--cluster", "on", type=click.Choice(["old", "new"]), default=None,
              help="connect: the cluster the Kafka Connect worker runs on (default: where it ran last, else "
              "old). Running on the other one, it is stopped and moved; create its connectors there again.")
def start_cmd(cluster: str, folder: Path | None, fmt: Format, node: int | None, on: str | None) -> None:
    """Start one stopped cluster (or one broker of it), or the catalog server or storage, on its
    old ports, with its data; or the Kafka Connect worker (Apache Kafka's Connect with Apache
    Iceberg's sink connector) on a cluster, its REST API on 127.0.0.1."""
    if on is not None and cluster != "connect":
        raise click.UsageError(f"--cluster is for the Connect worker, not the {cluster}; leave it out")
    if cluster == "connect":
        _no_broker(cluster, node)
        emit(_sandbox(folder).start_connect(on), fmt,
             lambda c: f"connect: running on {c['cluster']} at {c['url']} (log: {c['log']})")
        return
    if cluster in ("catalog", "storage"):
        _no_broker(cluster, node)
        emit(_sandbox(folder).start_part(cluster), fmt, lambda c: f"{cluster}: running")
        return
    if cluster == "registry":
        _no_broker(cluster, node)
        emit(_sandbox(folder).start_registry(), fmt,
             lambda c: "registry: running at " + ", ".join(f"{s} {r['url']}" for s, r in c.items()))
        return
    emit(_sandbox(folder).start(cluster, node), fmt, lambda c: f"{cluster}: running at {c['bootstrap']}")


def _no_broker(part: str, node: int | None) -> None:
    if node is not None:
        raise click.UsageError(f"--broker is for a Kafka cluster, not the {part}; leave it out")
