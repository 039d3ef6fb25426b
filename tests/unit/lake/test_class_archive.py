"""Which sessions get the class-data archive, and for which jars it is valid (no JVM started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.lake import class_archive

CONF = {"spark.jars": "/jars/iceberg.jar,/jars/kafka.jar", "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path))
    return tmp_path


def test_no_archive_leaves_the_options_as_they_are() -> None:
    assert class_archive.options(CONF) is None


def test_an_archive_is_added_to_the_users_options_quietly() -> None:
    archive = class_archive.path(CONF)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    got = class_archive.options(CONF)
    assert got is not None and got.startswith("-XX:TieredStopAtLevel=1 ")
    assert f"-XX:SharedArchiveFile={archive}" in got and "-Xlog:cds=off" in got


@pytest.mark.parametrize("own", ["-XX:SharedArchiveFile=/mine.jsa", "-Xshare:off", "-XX:ArchiveClassesAtExit=/x"])
def test_class_sharing_the_user_chose_is_left_alone(own: str) -> None:
    conf = {**CONF, "spark.driver.extraJavaOptions": own}
    archive = class_archive.path(conf)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    assert class_archive.options(conf) is None


def test_other_jars_or_class_path_need_another_archive() -> None:
    base = class_archive.path(CONF)
    assert class_archive.path({**CONF, "spark.jars": "/jars/iceberg.jar"}) != base
    assert class_archive.path({**CONF, "spark.driver.extraClassPath": "/x.jar"}) != base
    assert class_archive.path({**CONF, "spark.driver.memory": "8g", "spark.app.name": "other"}) == base


def test_a_jar_that_changed_needs_another_archive(tmp_path: Path) -> None:
    """The JVM checks each class-path jar's size and time against the archive and silently starts without it
    on a mismatch (a reinstalled pyspark): the archive's name changes with them, so local up makes a new one."""
    import os

    jar = tmp_path / "iceberg.jar"
    jar.write_bytes(b"1")
    conf = {**CONF, "spark.jars": str(jar)}
    before = class_archive.path(conf)
    os.utime(jar, ns=(1, 1))
    assert class_archive.path(conf) != before
