"""Secrets scrubbing, missing Java/Maven messages, jar-set POMs, catalog rendering."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover import jvm, secrets
from cutover.errors import DependencyMissing, UsageError
from cutover.lake.catalog import pyiceberg_properties, spark_conf
from cutover.plan.model import Catalog


def test_secret_values_are_scrubbed_and_configs_redacted() -> None:
    config = {"bootstrap.servers": "b:1", "sasl.password": "hunter2-xyz", "ssl.key.password": "k3y-pass"}
    secrets.register_config(config)
    assert secrets.scrub("auth failed for hunter2-xyz at b:1") == "auth failed for ***** at b:1"
    assert secrets.redact(config) == {"bootstrap.servers": "b:1", "sasl.password": "*****",
                                      "ssl.key.password": "*****"}


def test_java_missing_names_java_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(DependencyMissing) as info:
        jvm.java()
    assert "Java was not found" in info.value.message
    assert info.value.fix and "JDK 17" in info.value.fix


def test_old_java_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(DependencyMissing, match="Java 11; cutover needs 17"):
        jvm.java()


def test_maven_missing_names_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DependencyMissing, match=r"Maven \(mvn\) was not found"):
        jvm.maven()


def test_pom_pins_and_dependencies() -> None:
    pom = jvm._pom(jvm.SPARK_EXTRAS)
    assert "<dependencyManagement><dependencies><dependency><groupId>org.apache.spark</groupId>" \
           "<artifactId>spark-token-provider-kafka-0-10_2.13</artifactId><version>4.0.0</version>" in pom
    assert f"<artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>{jvm.SPARK_VERSION}</version>" in pom
    assert jvm.SPARK_EXTRAS.key() != jvm.KAFKA_BROKER.key()


def test_sqlite_catalog_renders_for_both_sides() -> None:
    cat = Catalog(uri="sqlite:////data/cat.db", name="lake", warehouse="file:///data/wh")
    assert pyiceberg_properties(cat) == {"type": "sql", "uri": "sqlite:////data/cat.db", "warehouse": "file:///data/wh",
                                         "schema_version": "v1", "init_catalog_tables": "true"}
    conf = spark_conf(cat)
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.uri"] == "jdbc:sqlite:/data/cat.db"
    assert conf["spark.sql.catalog.lake.jdbc.schema-version"] == "V1"
    assert conf["spark.sql.catalog.lake.warehouse"] == "file:///data/wh"


def test_postgres_catalog_moves_credentials_to_jdbc_properties() -> None:
    conf = spark_conf(Catalog(uri="postgresql+psycopg2://ice:pw@db:5433/iceberg", name="c"))
    assert conf["spark.sql.catalog.c.uri"] == "jdbc:postgresql://db:5433/iceberg"
    assert conf["spark.sql.catalog.c.jdbc.user"] == "ice"
    assert conf["spark.sql.catalog.c.jdbc.password"] == "pw"


def test_relative_sqlite_path_is_refused_for_spark() -> None:
    with pytest.raises(UsageError, match="absolute SQLite path"):
        spark_conf(Catalog(uri="sqlite:///cat.db"))


def test_a_postgres_catalog_without_its_python_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyiceberg reports a missing SQL driver as NotInstalledError ("SQLAlchemy support not
    installed"); cutover said the catalog could not be reached and to check its URI. The driver
    is hidden here whether or not it is installed, so this runs the same everywhere."""
    import sys

    from cutover.lake.catalog import load

    monkeypatch.setitem(sys.modules, "psycopg2", None)  # `import psycopg2` now fails
    with pytest.raises(DependencyMissing) as info:
        load(Catalog(uri="postgresql+psycopg2://ice:s3cr3t-pw@127.0.0.1:1/iceberg", name="lake"))
    assert "catalog lake" in info.value.message and "psycopg2" in info.value.message
    assert info.value.fix and "pip install 'cutover[postgres]'" in info.value.fix
    assert "s3cr3t-pw" not in info.value.message + info.value.fix
