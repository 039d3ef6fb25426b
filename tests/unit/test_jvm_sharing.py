"""Which JVMs get a class-data archive, and for which Java build and jars it is valid (no JVM started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cutover import jvm


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
    return tmp_path / "home"


def jars(tmp_path: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        jar = tmp_path / name
        jar.write_bytes(b"jar " + name.encode())
        made.append(jar)
    return made


def test_an_archive_is_kept_by_kind_under_the_cutover_home(tmp_path: Path, home: Path) -> None:
    archive = jvm.archive_path("kafka", jars(tmp_path, "a.jar"), kafka="4.1.1")
    assert archive.parent == home / "kafka-cds" and archive.suffix == ".jsa"


def test_other_jars_another_release_or_a_changed_jar_need_another_archive(tmp_path: Path) -> None:
    a, b = jars(tmp_path, "a.jar", "b.jar")
    base = jvm.archive_path("kafka", [a, b], kafka="4.1.1")
    assert jvm.archive_path("kafka", [a, b], kafka="4.1.1") == base
    assert jvm.archive_path("kafka", [a], kafka="4.1.1") != base
    assert jvm.archive_path("kafka", [b, a], kafka="4.1.1") != base  # the class path's order is part of it
    assert jvm.archive_path("kafka", [a, b], kafka="3.9.1") != base
    b.write_bytes(b"a jar rebuilt, of another size")
    assert jvm.archive_path("kafka", [a, b], kafka="4.1.1") != base
    os.utime(a, ns=(1, 1))
    assert jvm.archive_path("kafka", [a, b], kafka="4.1.1") != jvm.archive_path("kafka", [b, a], kafka="4.1.1")


def test_no_archive_no_options(tmp_path: Path) -> None:
    assert jvm.sharing(tmp_path / "none.jsa") == []


def test_an_archive_is_mapped_quietly(tmp_path: Path) -> None:
    archive = tmp_path / "k.jsa"
    archive.write_bytes(b"x")
    assert jvm.sharing(archive) == [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


@pytest.mark.parametrize("own", ["-XX:SharedArchiveFile=/mine.jsa", "-Xshare:off", "-XX:ArchiveClassesAtExit=/x"])
def test_class_sharing_the_user_chose_in_java_tool_options_is_left_alone(
        tmp_path: Path, own: str, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "k.jsa"
    archive.write_bytes(b"x")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-XX:TieredStopAtLevel=1 {own}")
    assert jvm.own_sharing() and jvm.sharing(archive) == []


def test_options_of_a_process_that_choose_class_sharing_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    assert jvm.own_sharing("-Xmx1g -Xshare:off")
    assert not jvm.own_sharing("-Xmx1g -XX:+UseSerialGC")
