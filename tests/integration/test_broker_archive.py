"""Kafka's class-data archive: made once from a scratch broker, checked before it is kept, mapped by every
broker and tool cutover starts, and never half-written where a JVM could map it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cutover import jvm
from cutover.local import broker


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An archive path of this test's own (the machine's, in ~/.cutover, is left as it is)."""
    path = tmp_path / "kafka-cds" / "kafka.jsa"
    monkeypatch.setattr(broker, "class_archive", lambda version: path)
    return path


def maps(version: str, cmd_archive: Path) -> subprocess.CompletedProcess[str]:
    """Kafka's version printed by a JVM that must map the archive (-Xshare:on refuses to start otherwise)."""
    cmd = broker.jvm_cmd(version, "kafka.Kafka", "--version", sharing=False)
    cmd[1:1] = ["-Xshare:on", f"-XX:SharedArchiveFile={cmd_archive}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, cwd=cmd_archive.parent)


def test_the_archive_is_made_once_checked_and_mapped_by_brokers_and_tools(archive: Path) -> None:
    version = jvm.KAFKA_VERSION
    archive.parent.mkdir(parents=True)
    stale = archive.parent / "kafka.12345.partial"  # left by a maker killed in its dump
    stale.write_bytes(b"half an archive")
    assert broker.ensure_class_archive(version) == archive
    assert sorted(p.name for p in archive.parent.iterdir()) == ["kafka.jsa", "kafka.lock"]
    made = archive.stat().st_mtime_ns
    done = maps(version, archive)
    assert done.returncode == 0 and version in done.stdout, done.stderr[-2000:]
    assert broker.ensure_class_archive(version) == archive and archive.stat().st_mtime_ns == made  # not made again
    cmd = broker.jvm_cmd(version, "kafka.tools.StorageTool", "random-uuid")
    assert f"-XX:SharedArchiveFile={archive}" in cmd and "-Xlog:cds=off" in cmd
    tool = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert tool.returncode == 0 and len(tool.stdout.strip()) == 22, tool.stderr[-2000:]


def test_an_archive_cut_short_is_refused_by_the_check(archive: Path, tmp_path: Path) -> None:
    """Why the check exists: a JVM that maps an archive cut short crashes (even with the default
    -Xshare:auto), so ensure_class_archive keeps none that a JVM could not map."""
    version = jvm.KAFKA_VERSION
    assert broker.ensure_class_archive(version) == archive
    cut = tmp_path / "cut" / "kafka.jsa"
    cut.parent.mkdir()
    cut.write_bytes(archive.read_bytes()[:1_000_000])
    assert broker._archive_problem(version, cut, cut.parent) is not None
    assert broker._archive_problem(version, archive, tmp_path) is None
    assert maps(version, cut).returncode != 0


def test_class_sharing_chosen_by_the_user_is_left_alone(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} -Xshare:off")
    assert broker.ensure_class_archive(jvm.KAFKA_VERSION) is None
    assert not archive.parent.exists()
    assert not any("SharedArchiveFile" in part for part in broker.jvm_cmd(jvm.KAFKA_VERSION, "kafka.Kafka", "x"))
