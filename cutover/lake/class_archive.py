"""The Spark driver's class-data archive: a session that starts in about half the CPU.

A Spark driver loads and verifies some 20,000 classes before its first query: most of a
session's start, and every `cutover shadow`, `cutover verify` and drill pays it. The JVM can
map those classes from an archive instead (AppCDS, a dynamic archive: Java 13 and newer).
The archive is only valid for the Java build, Spark and the jars it was made with, so it is
kept under a name derived from them (`<cutover home>/spark-cds/<key>.jsa`) and made once per
combination. A session uses it when it exists; otherwise it starts as before.

`ensure` makes it in a child process: a session with `-XX:ArchiveClassesAtExit`, a small
Iceberg write and read in a scratch warehouse (the classes every job loads), then the JVM's
exit, which writes the archive. It is written under a temporary name and renamed when the JVM
is gone, so no session ever maps half an archive; a lock lets one of several concurrent
callers make it while the others wait for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from cutover import jvm
from cutover.output import progress

#: What a session in the child process runs while its classes are recorded.
_WARM = """
import json, sys
from pyspark.sql import SparkSession
conf, warehouse = json.loads(sys.argv[1]), sys.argv[2]
builder = SparkSession.builder
for key, value in conf.items():
    builder = builder.config(key, value)
builder = (builder.config("spark.sql.catalog.cutover_warm", "org.apache.iceberg.spark.SparkCatalog")
           .config("spark.sql.catalog.cutover_warm.type", "hadoop")
           .config("spark.sql.catalog.cutover_warm.warehouse", warehouse))
spark = builder.getOrCreate()
spark.sql("CREATE TABLE cutover_warm.w.t (k STRING, v BIGINT, ts TIMESTAMP) USING iceberg")
spark.sql("INSERT INTO cutover_warm.w.t VALUES ('a', 1, current_timestamp())")
spark.sql("SELECT k, sum(v), max(ts) FROM cutover_warm.w.t GROUP BY k").collect()
proc = spark.sparkContext._gateway.proc
spark.stop()
proc.stdin.close()  # the JVM exits when its stdin closes, and writes the archive on the way out
sys.exit(proc.wait(timeout=300))
"""


def path(conf: Mapping[str, str]) -> Path:
    """Where the archive of a session of `conf` is: keyed by the Java build, Spark's version and every jar of the
    driver's class path (Spark's own and the session's: the JVM refuses an archive, silently, when one of them
    changed, as a reinstalled pyspark does)."""
    import pyspark

    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    extra = [Path(j) for part in ("spark.jars", "spark.driver.extraClassPath")
             for j in conf.get(part, "").replace(":", ",").split(",") if j]
    return jvm.archive_path("spark", [*spark_jars, *extra], spark=pyspark.__version__)


def options(conf: Mapping[str, str]) -> str | None:
    """The driver's Java options with the archive added, when it exists and the user set no class
    sharing of their own; None to leave the options as they are."""
    own = conf.get("spark.driver.extraJavaOptions", "")
    if jvm.own_sharing(own):
        return None
    archive = path(conf)
    if not archive.is_file():
        return None
    return " ".join([own, f"-XX:SharedArchiveFile={archive}", *jvm.SHARING_QUIET]).strip()


def ensure(conf: Mapping[str, str]) -> Path | None:
    """Make the archive for a session of `conf` unless it exists; its path, or None when it could
    not be made (sessions then start without it: nothing depends on it but their speed)."""
    archive = path(conf)
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with jvm.locked(archive.with_suffix(".lock")):
        if archive.is_file():  # another process made it while this one waited
            return archive
        progress("making the Spark driver's class-data archive (first use only: later sessions start faster)")
        with tempfile.TemporaryDirectory(prefix="cutover-cds-") as scratch:
            partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
            own = dict(conf)
            java_options = conf.get("spark.driver.extraJavaOptions", "")
            recording = [java_options, f"-XX:ArchiveClassesAtExit={partial}", *jvm.SHARING_QUIET]
            own["spark.driver.extraJavaOptions"] = " ".join(recording).strip()
            own["spark.master"] = "local[1]"
            done = subprocess.run([sys.executable, "-c", _WARM, json.dumps(own), str(Path(scratch) / "warehouse")],
                                  capture_output=True, text=True, check=False, timeout=600)
            if done.returncode != 0 or not partial.is_file():
                partial.unlink(missing_ok=True)
                progress("the class-data archive could not be made; Spark sessions start without it "
                         f"({(done.stderr.strip().splitlines() or ['no output'])[-1][:200]})")
                return None
            partial.replace(archive)
    progress(f"class-data archive ready: {archive}")
    return archive
