"""Java, Maven, and the jar sets cutover runs on the JVM, resolved from Maven Central.

A jar set is data: Maven coordinates plus pinned overrides. `resolve` writes a small
POM into the cache and lets Maven copy the runtime closure there, once; the folder
is complete only when its `classpath.txt` exists, so an interrupted download is
simply redone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cutover.errors import DependencyMissing, ResolveError
from cutover.output import progress

KAFKA_VERSION = "4.1.1"
SPARK_VERSION = "4.0.2"  # must equal the installed pyspark version
ICEBERG_VERSION = "1.11.0"

#: JVM flags for the sandbox's servers and the short tools cutover runs: short lives, light traffic, small
#: heaps. C1 alone costs far less CPU there than C2 recompiling hot code, and the serial collector less than
#: G1's concurrent threads (bench/README.md, "the sandbox's JVMs" and "the sandbox's collector"). Production
#: JVMs (your brokers, your Spark cluster) keep their own settings. C1 alone also shrinks the code cache to
#: 48 MB, which a drill's Spark driver (shadow, verify and maintenance in one JVM) fills, and then the JVM stops
#: compiling: the JVM's own 240 MB is kept, reserved address space until compiled code needs it.
LEAN: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:+UseSerialGC")


@dataclass(frozen=True)
class JarSet:
    name: str
    artifacts: tuple[str, ...]
    #: groupId:artifactId:version forced in dependencyManagement.
    pins: tuple[str, ...] = field(default=())
    #: False: only the artifacts themselves (self-contained server jars), not what they declare.
    transitive: bool = True

    def key(self) -> str:
        what = self.artifacts + self.pins + (() if self.transitive else ("direct",))
        digest = hashlib.sha256("\n".join(what).encode()).hexdigest()[:12]
        return f"{self.name}-{digest}"


#: Kafka releases the sandbox can run (KRaft with a standalone controller, KIP-853): the
#: default, and the older release an old cluster often still runs.
KAFKA_VERSIONS = (KAFKA_VERSION, "3.9.1")


def kafka_broker(version: str = KAFKA_VERSION) -> JarSet:
    """The broker of one Kafka release: its server jars. Kafka publishes no SLF4J binding;
    slf4j-simple matches the slf4j-api 1.7 it depends on, and logs to stderr (the broker log)."""
    name = "kafka-broker" if version == KAFKA_VERSION else f"kafka-broker-{version}"
    return JarSet(name, (f"org.apache.kafka:kafka_2.13:{version}", "org.slf4j:slf4j-simple:1.7.36"))


KAFKA_BROKER = kafka_broker()

#: Spark extras: Iceberg runtime, the Kafka source, and the JDBC driver of the SQL catalog.
#: spark-token-provider-kafka is pinned to 4.0.0: Maven Central serves no 4.0.1+ of it
#: here, and it only handles Kafka delegation tokens (unchanged across 4.0 patches).
SPARK_EXTRAS = JarSet(
    "spark-extras",
    (
        f"org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:{ICEBERG_VERSION}",
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}",
        f"org.apache.spark:spark-avro_2.13:{SPARK_VERSION}",  # from_avro: the registry formats' Avro decoder
        f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}",  # S3FileIO (S3-compatible storage)
        "org.xerial:sqlite-jdbc:3.50.3.0",
        "org.postgresql:postgresql:42.7.8",
    ),
    pins=("org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0",),
)

#: MirrorMaker 2, the baseline the bench compares the mirror against.
MIRROR_MAKER = JarSet(
    "mirror-maker",
    (f"org.apache.kafka:connect-mirror:{KAFKA_VERSION}", f"org.apache.kafka:connect-runtime:{KAFKA_VERSION}",
     "org.slf4j:slf4j-simple:1.7.36"),
)

#: Apache Kafka's own command-line tools, among them the system-test clients
#: VerifiableProducer and VerifiableConsumer that the tests drive a switch with.
KAFKA_TOOLS = JarSet("kafka-tools", (f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}", "org.slf4j:slf4j-simple:1.7.36"))

#: The sandbox's production-shaped lake: Apache Iceberg's REST catalog server (a runnable jar
#: of the iceberg-open-api test fixtures, JDBC catalog, S3FileIO and the SQLite driver inside)
#: and s3proxy, S3-compatible storage on a local folder. Both are self-contained jars.
REST_CATALOG_VERSION = "1.10.1"
REST_CATALOG = JarSet("iceberg-rest-catalog", (f"org.apache.iceberg:iceberg-open-api:{REST_CATALOG_VERSION}",),
                      transitive=False)
S3PROXY = JarSet("s3proxy", ("org.gaul:s3proxy:4.1.0:jar-with-dependencies",), transitive=False)

#: Kafka Connect with Apache Iceberg's sink connector: the old pipeline as the field runs it. The sink's
#: Maven artifacts leave out what its runtime distribution bundles: the Parquet and ORC writers (both
#: registered at the first write), Hadoop (the
#: shaded client: Configuration and HadoopFileIO for a local warehouse), S3FileIO's AWS bundle (object
#: storage), the catalogs' JDBC drivers.
HADOOP_VERSION = "3.4.1"
ICEBERG_CONNECT = JarSet(
    "iceberg-connect",
    (f"org.apache.kafka:connect-runtime:{KAFKA_VERSION}", f"org.apache.kafka:connect-json:{KAFKA_VERSION}",
     f"org.apache.iceberg:iceberg-kafka-connect:{ICEBERG_VERSION}",
     f"org.apache.iceberg:iceberg-kafka-connect-events:{ICEBERG_VERSION}",
     f"org.apache.iceberg:iceberg-kafka-connect-transforms:{ICEBERG_VERSION}",  # KafkaMetadataTransform
     f"org.apache.iceberg:iceberg-parquet:{ICEBERG_VERSION}", f"org.apache.iceberg:iceberg-orc:{ICEBERG_VERSION}",
     # S3FileIO (S3-compatible storage): Iceberg's class, and the AWS SDK it uses, bundled
     f"org.apache.iceberg:iceberg-aws:{ICEBERG_VERSION}", f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}",
     f"org.apache.hadoop:hadoop-client-api:{HADOOP_VERSION}",
     f"org.apache.hadoop:hadoop-client-runtime:{HADOOP_VERSION}",
     "org.xerial:sqlite-jdbc:3.50.3.0", "org.postgresql:postgresql:42.7.8", "org.slf4j:slf4j-simple:1.7.36"),
    pins=("com.fasterxml.jackson.core:jackson-core:2.19.0",),  # Iceberg's BOM asks 2.21, its databind is 2.19
)

#: Apicurio Registry's Kafka Connect converter (io.apicurio.registry.utils.converter.AvroConverter) and
#: its Avro serde, on the Connect worker's class path beside ICEBERG_CONNECT: it decodes Confluent's wire
#: format (magic byte, 4-byte schema id, Avro body) with the writer schema it fetches by id from an
#: Apicurio registry (Confluent's AvroConverter is not on Maven Central). Only Apicurio's own jars: the
#: converter's POM also pulls its JSON Schema serde, whose everit dependency Maven Central does not
#: serve, and Kafka 2.8, Avro 1.11 and Jackson 2.10, which ICEBERG_CONNECT's Kafka 4.1, Avro 1.12 and
#: Jackson 2.19 replace (the converter is compiled against the APIs those keep).
APICURIO_VERSION = "2.4.2.Final"
APICURIO_CONNECT = JarSet(
    "apicurio-connect",
    tuple(f"io.apicurio:apicurio-registry-{a}:{APICURIO_VERSION}"
          for a in ("utils-converter", "serdes-avro-serde", "serde-common", "schema-resolver", "client", "common"))
    + tuple(f"io.apicurio:apicurio-common-rest-client-{a}:0.1.15.Final" for a in ("jdk", "common")),
    transitive=False,
)

#: Kafka Streams (and RocksDB, its persistent stores): the tests' real Streams application, moved between
#: the clusters as a kafka-streams reader.
KAFKA_STREAMS = JarSet("kafka-streams", (f"org.apache.kafka:kafka-streams:{KAFKA_VERSION}",
                                         "org.slf4j:slf4j-simple:1.7.36"))

#: Flink 1.20 with its Kafka connector (3.4.0-1.20, kafka-clients 3.4.0) and the State Processor API: what
#: reads a flink reader's savepoints (java/FlinkSavepoint.java), and the tests' real Flink job runs on
#: (a local MiniCluster). The State Processor API's newest 1.20 release on Maven Central is 1.20.0, so every
#: Flink module is taken at 1.20.0.
FLINK_VERSION = "1.20.0"
FLINK = JarSet("flink", (*(f"org.apache.flink:flink-{m}:{FLINK_VERSION}" for m in (
    "streaming-java", "clients", "connector-base", "state-processor-api")),
    "org.apache.flink:flink-connector-kafka:3.4.0-1.20", "org.slf4j:slf4j-simple:1.7.36"))

JAR_SETS = {s.name: s for s in (KAFKA_BROKER, SPARK_EXTRAS, MIRROR_MAKER, KAFKA_TOOLS, REST_CATALOG, S3PROXY,
                                ICEBERG_CONNECT, APICURIO_CONNECT, KAFKA_STREAMS, FLINK)}


def properties_text(props: Mapping[str, str]) -> str:
    """A java.util.Properties file's text, each value read back by Java as written: backslashes, line breaks (PEM
    contents span lines), and leading whitespace, which Java drops unless escaped (a password may start so)."""
    def escape(value: str) -> str:
        value = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        rest = value.lstrip(" \t\f")
        lead = value[:len(value) - len(rest)]
        return lead.replace(" ", "\\ ").replace("\t", "\\t").replace("\f", "\\f") + rest

    return "".join(f"{k}={escape(v)}\n" for k, v in props.items())


def cutover_home() -> Path:
    """Where cutover keeps caches and the default sandbox (CUTOVER_HOME, else ~/.cutover)."""
    return Path(os.environ.get("CUTOVER_HOME") or Path.home() / ".cutover").expanduser()


def java() -> str:
    """The java executable: $JAVA_HOME/bin/java, else java on PATH; version 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    exe = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if not exe:
        raise DependencyMissing(
            "Java was not found (no java on PATH and no JAVA_HOME)",
            fix="install a JDK 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) "
            "or set JAVA_HOME",
        )
    out = subprocess.run([exe, "-version"], capture_output=True, text=True, check=False).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))
    if major < 17:
        raise DependencyMissing(f"{exe} is Java {major or 'of unknown version'}; cutover needs 17 or newer",
                                fix="install a JDK 17+ and put it first on PATH or in JAVA_HOME")
    return exe


#: JVM options by which the user chose the class sharing themselves: cutover adds no archive then.
OWN_SHARING = ("-XX:SharedArchiveFile", "-Xshare:", "-XX:ArchiveClassesAtExit")
#: A class-data archive's own diagnostics stay out of the process's output.
SHARING_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def java_path() -> Path:
    """The java executable as java() finds it, without running it (no Java: a path that names none)."""
    home = os.environ.get("JAVA_HOME")
    exe = Path(home) / "bin" / "java" if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    return Path(exe).resolve() if exe else Path("/no-java")


def archive_path(kind: str, jars: Sequence[Path], **also: str) -> Path:
    """Where the class-data archive (AppCDS, a dynamic archive) of a JVM running these jars is kept:
    `<cutover home>/<kind>-cds/<key>.jsa`. An archive is valid only for the Java build and the jars it was
    made with (the JVM ignores it, silently, when one changed), so the key is made of the java executable
    and every jar by path, size and time, and of `also`."""
    java_exe = java_path()

    def stamp(jar: Path) -> tuple[str, int, int]:
        try:
            st = jar.stat()
        except OSError:
            return (str(jar), -1, -1)
        return (str(jar), st.st_size, st.st_mtime_ns)

    what = {"java": str(java_exe), "java_mtime": java_exe.stat().st_mtime_ns if java_exe.is_file() else None,
            "jars": [stamp(j) for j in jars], **also}
    key = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
    return cutover_home() / f"{kind}-cds" / f"{key}.jsa"


def own_sharing(options: str = "") -> bool:
    """Whether these options, or JAVA_TOOL_OPTIONS, choose the class sharing (cutover then adds none)."""
    chosen = f"{options} {os.environ.get('JAVA_TOOL_OPTIONS', '')}"
    return any(flag in chosen for flag in OWN_SHARING)


def sharing(archive: Path) -> list[str]:
    """The options that map the archive, when it exists and the user chose no class sharing of their own."""
    if own_sharing() or not archive.is_file():
        return []
    return [f"-XX:SharedArchiveFile={archive}", *SHARING_QUIET]


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[None]:
    """An exclusive lock on the file `lock` (made if missing) while the block runs: one of several processes
    makes an archive while the others wait for it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: cutover's Java helpers, in one folder: the single-file programs run by program() and the registry's Maven build.
JAVA_SOURCES = Path(__file__).with_name("java")
#: What the programs share (the properties file, JSON quoting, the error line): compiled into each that names it.
SHARED_SOURCE = JAVA_SOURCES / "Cli.java"


def program(source: Path, classpath: list[Path]) -> list[str]:
    """The java arguments that run the single-file program `source` (its public class is its file's name) with
    `classpath`: compiled once per source, Java and class path into the cache (`classes/`), as Java's
    single-file source mode would compile it on every run (about 1.4 s of CPU each time: bench/README.md);
    in source mode where no javac sits beside java (a JRE), or where it does not compile (Java then says why).
    A program that names `Cli.` gets the helpers' shared class (SHARED_SOURCE) in its own source file."""
    path = os.pathsep.join(str(j) for j in classpath)
    text = _with_shared(source.read_text())
    exe = Path(java()).resolve()
    javac = exe.with_name("javac")
    key = hashlib.sha256(b"\0".join([text.encode(), str(exe).encode(),
                                      *(j.name.encode() for j in classpath)])).hexdigest()[:16]
    whole = source if text == source.read_text() else _source_file(source.name, key, text)
    if not javac.exists():
        return ["-cp", path, str(whole)]
    target = cutover_home() / "classes" / f"{source.stem}-{key}"
    if not (target / f"{source.stem}.class").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{source.stem}-", dir=target.parent))
        done = subprocess.run([str(javac), "-nowarn", "-J-XX:TieredStopAtLevel=1", "-d", str(building), "-cp",
                               path, str(whole)], capture_output=True, text=True, check=False)
        if done.returncode != 0:  # said by the run in source mode, as before
            shutil.rmtree(building, ignore_errors=True)
            return ["-cp", path, str(whole)]
        try:
            building.rename(target)  # whole or not at all; another process may have made it meanwhile
        except OSError:
            shutil.rmtree(building, ignore_errors=True)
    return ["-cp", os.pathsep.join([str(target), path]), source.stem]


def _with_shared(text: str) -> str:
    """A program's source with the shared class after its own, when it names it (a program is one file)."""
    if "Cli." not in text or "final class Cli" in text:
        return text
    return f"{text.rstrip()}\n\n{SHARED_SOURCE.read_text()}"


def _source_file(name: str, key: str, text: str) -> Path:
    """The program's whole source (its own and the shared class) as a file named as its class, in the cache."""
    folder = cutover_home() / "sources" / f"{Path(name).stem}-{key}"
    file = folder / name
    if not file.is_file() or file.read_text() != text:
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".{name}.{os.getpid()}"
        partial.write_text(text)
        partial.replace(file)
    return file


def maven() -> str:
    exe = shutil.which("mvn")
    if not exe:
        raise DependencyMissing(
            "Maven (mvn) was not found on PATH; it is needed once, to fetch the Kafka and Spark jars",
            fix="install Maven 3.6+ (Debian/Ubuntu: apt-get install maven), or copy a resolved "
            f"jar cache into {cutover_home() / 'jars'}",
        )
    return exe


def cached(jar_set: JarSet) -> list[Path] | None:
    """The jars of a set if already resolved, else None."""
    listing = cutover_home() / "jars" / jar_set.key() / "classpath.txt"
    if not listing.is_file():
        return None
    jars = [Path(line) for line in listing.read_text().splitlines() if line]
    return jars if all(j.is_file() for j in jars) else None


def resolve(jar_set: JarSet) -> list[Path]:
    """The jar files of a set, fetched by Maven into the cache on first use."""
    jars = cached(jar_set)
    if jars is not None:
        return jars
    target = cutover_home() / "jars" / jar_set.key()
    mvn = maven()
    java()  # Maven needs it too; fail with the clearer message first
    progress(f"resolving {jar_set.name} jars from Maven Central into {target} (first use only)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{jar_set.name}-", dir=target.parent) as work:
        work_dir = Path(work)
        (work_dir / "pom.xml").write_text(_pom(jar_set))
        (work_dir / "settings.xml").write_text(_SETTINGS.format(url=_central_url()))
        jars_dir = work_dir / "jars"
        cmd = [mvn, "-B", "-gs", "settings.xml", "dependency:copy-dependencies",
               f"-DoutputDirectory={jars_dir}", "-DincludeScope=runtime"]
        if not jar_set.transitive:
            cmd.append("-DexcludeTransitive=true")
        _run_maven(cmd, work_dir, jar_set)
        if target.exists():
            shutil.rmtree(target)
        jars_dir.rename(target)
    jars = sorted(target.glob("*.jar"))
    (target / "classpath.txt").write_text("".join(f"{j}\n" for j in jars))
    progress(f"resolved {len(jars)} jars for {jar_set.name}")
    return jars


def _run_maven(cmd: list[str], cwd: Path, jar_set: JarSet) -> None:
    tail: list[str] = []
    with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = re.sub(r"\x1b\[[0-9;]*m", "", line.rstrip())
            tail = ([*tail, line])[-15:]
            m = re.match(r"Downloaded from [^:]+: \S*/([^/]+\.jar) \((.*?)\)", line)
            if m:
                progress(f"  fetched {m.group(1)} ({m.group(2).split(' at ')[0]})")
        code = proc.wait()
    if code != 0:
        errors = [t for t in tail if t.startswith("[ERROR]")][:3] or tail[-5:]
        raise ResolveError(
            f"Maven could not resolve the {jar_set.name} jars:\n    " + "\n    ".join(errors),
            fix="check access to Maven Central (or set CUTOVER_MAVEN_URL to a mirror) and run again",
        )


def _central_url() -> str:
    return os.environ.get("CUTOVER_MAVEN_URL", "https://repo.maven.apache.org/maven2")


# Route every repository through one URL: Spark's POMs declare a Google mirror that
# is not reachable from every network. User settings (~/.m2/settings.xml) still apply.
_SETTINGS = """<settings><mirrors><mirror><id>cutover-central</id><mirrorOf>*</mirrorOf>
<url>{url}</url></mirror></mirrors></settings>
"""


def _dependency(coord: str, direct: bool = False) -> str:
    """groupId:artifactId:version, or groupId:artifactId:version:classifier; `direct`: without what it
    declares (not even resolved: a non-transitive set's artifacts may declare what Central does not serve)."""
    group, artifact, version, *classifier = coord.split(":")
    extra = f"<classifier>{classifier[0]}</classifier>" if classifier else ""
    if direct:
        extra += "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
    return (f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{extra}</dependency>")


def _pom(jar_set: JarSet) -> str:
    pins = "".join(_dependency(c) for c in jar_set.pins)
    deps = "".join(_dependency(c, direct=not jar_set.transitive) for c in jar_set.artifacts)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
<modelVersion>4.0.0</modelVersion><groupId>cutover.local</groupId>
<artifactId>{jar_set.name}</artifactId><version>1</version><packaging>pom</packaging>
<dependencyManagement><dependencies>{pins}</dependencies></dependencyManagement>
<dependencies>{deps}</dependencies></project>
"""
