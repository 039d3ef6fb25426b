"""The one place a SparkSession is built: Iceberg, the Kafka source and the shared catalog.

Jars come from Maven Central through `cutover.jvm` (cached), and are passed as
`spark.jars`, so a remote master ships them to its executors. Jars pyspark already
bundles are left out, so no two versions of a library share the classpath.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cutover import jvm
from cutover.errors import DependencyMissing
from cutover.lake import catalog as catalog_mod
from cutover.lake import class_archive
from cutover.plan import Plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Option names whose values hold secrets or key material (the Kafka source's JAAS line,
#: PEM key store and passwords): Spark redacts them wherever it prints a plan or options.
REDACTED_OPTIONS = r"(?i)url|jaas|password|ssl\.keystore\.(key|certificate)|ssl\.truststore\.certificates"
#: Setting names whose values Spark masks in its event log, UI and plans: Spark's default
#: (secret|password|token|access[.]key) and the catalog's S3 key id and REST credential.
REDACTED_CONF = r"(?i)secret|password|token|access[.-]key|credential"
#: How long the catalog and the storage get to answer before a session is built.
PREFLIGHT_TIMEOUT = 30.0
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


def _artifact(jar: Path) -> str:
    m = _VERSIONED.match(jar.name)
    return m.group("artifact") if m else jar.stem


def extra_jars() -> list[Path]:
    """Iceberg + Kafka source + JDBC driver jars not already shipped inside pyspark."""
    import pyspark

    if pyspark.__version__ != jvm.SPARK_VERSION:
        raise DependencyMissing(
            f"pyspark {pyspark.__version__} is installed, but cutover's Spark jars are for {jvm.SPARK_VERSION}",
            fix=f"pip install pyspark=={jvm.SPARK_VERSION}",
        )
    bundled = {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [j for j in jvm.resolve(jvm.SPARK_EXTRAS) if _artifact(j) not in bundled]


LOOPBACK = "127.0.0.1"


def session_conf(plan: Plan, app_name: str) -> dict[str, str]:
    """Every setting the session gets; the plan's own spark.conf wins over defaults."""
    cat = plan.require_catalog("a Spark job")
    conf = {
        "spark.app.name": app_name,
        "spark.master": plan.spec.spark.master,
        "spark.jars": ",".join(str(j) for j in extra_jars()),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.sql.redaction.options.regex": REDACTED_OPTIONS,
        "spark.redaction.regex": REDACTED_CONF,
    }
    if plan.spec.spark.master.startswith("local"):
        # The driver's servers on loopback: Spark's default is the host name's address or, when that is
        # loopback, the first interface's, which puts a local job's driver on the machine's network.
        conf.update({"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK})
    conf.update(catalog_mod.spark_conf(cat))
    conf.update(plan.spec.spark.conf)
    if plan.spec.spark.class_archive and (java_options := class_archive.options(conf)) is not None:
        conf["spark.driver.extraJavaOptions"] = java_options
    return conf


def session(plan: Plan, app_name: str = "cutover") -> SparkSession:
    """A SparkSession for the plan (reused if one is already running in this process)."""
    jvm.java()
    from pyspark.sql import SparkSession

    if plan.spec.spark.master.startswith("local"):
        # Python workers run this interpreter (pandas and pyarrow for vectorized UDFs), not
        # whatever python3 is first on PATH. Remote masters: set PYSPARK_PYTHON for them.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)  # what Spark's launcher resolves before any conf

    cat = plan.spec.catalog
    if cat is not None and SparkSession.getActiveSession() is None:
        # A wrong key or a catalog that is down is one named line now, not a JVM's stack trace later.
        from cutover.lake import reach

        reach.preflight(cat, PREFLIGHT_TIMEOUT)
    builder = SparkSession.builder
    for key, value in session_conf(plan, app_name).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # Spark logs a failed query's whole Python traceback; cutover reports failures itself
    # (named, with the fix), so the JVM's log stays quiet unless --debug.
    debug = logging.getLogger("cutover").isEnabledFor(logging.DEBUG)
    spark.sparkContext.setLogLevel("WARN" if debug else "FATAL")
    return spark
