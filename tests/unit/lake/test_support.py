"""Secrets scrubbing, missing Java/Maven messages, jar-set POMs, catalog rendering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cutover import jvm, secrets
from cutover.errors import DependencyMissing, UsageError
from cutover.lake.catalog import S3_COMPAT_ENV, pyiceberg_properties, spark_conf
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
                                         "schema_version": "v1", "init_catalog_tables": "true",
                                         "pool_pre_ping": "true"}
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
    assert conf["spark.sql.catalog.c.retryable_status_codes"] == "57P01,57P02,57P03"


def test_s3_storage_renders_for_spark_s3fileio_and_asks_checksums_only_when_required(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key in S3_COMPAT_ENV:  # unset here, and unset again after the test (what cutover set goes too)
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    props = {"s3.endpoint": "http://127.0.0.1:9000", "s3.access-key-id": "AK", "s3.secret-access-key": "SK",
             "s3.path-style-access": "true", "s3.region": "eu-west-1"}
    cat = Catalog(uri="http://127.0.0.1:8181", name="c", type="rest", properties=props)
    conf = spark_conf(cat)
    assert conf["spark.sql.catalog.c.type"] == "rest" and conf["spark.sql.catalog.c.uri"] == "http://127.0.0.1:8181"
    assert conf["spark.sql.catalog.c.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert conf["spark.sql.catalog.c.client.region"] == "eu-west-1" and "spark.sql.catalog.c.s3.region" not in conf
    for key in ("s3.endpoint", "s3.access-key-id", "s3.secret-access-key", "s3.path-style-access"):
        assert conf[f"spark.sql.catalog.c.{key}"] == props[key]
    # S3-compatible storage (an endpoint of its own): the driver (this process's environment,
    # which its JVM inherits) and the executors ask for checksums only when required.
    assert {k: os.environ[k] for k in S3_COMPAT_ENV} == S3_COMPAT_ENV
    assert {k: conf[f"spark.executorEnv.{k}"] for k in S3_COMPAT_ENV} == S3_COMPAT_ENV
    assert pyiceberg_properties(cat) == {"type": "rest", "uri": "http://127.0.0.1:8181", **props}


def test_an_operators_own_checksum_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    conf = spark_conf(Catalog(uri="http://h:1", type="rest", properties={"s3.endpoint": "http://127.0.0.1:9000"}))
    assert conf["spark.executorEnv.AWS_REQUEST_CHECKSUM_CALCULATION"] == "when_supported"


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
