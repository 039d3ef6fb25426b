"""The CLI error boundary: exit codes, messages on stderr, results on stdout, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode

PLAN = "clusters:\n  old: {bootstrap.servers: 'o:1'}\n  new: {bootstrap.servers: 'n:1'}\n"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_valid_plan_offline_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    code, out, err = run(["plan", "check", "--plan", str(plan), "--offline"], capsys)
    assert (code, err) == (0, "")
    assert out == f"plan migration ({plan}): valid\n"
    code, out, _ = run(["plan", "check", "--plan", str(plan), "--offline", "-o", "json"], capsys)
    assert json.loads(out) == {"name": "migration", "plan": str(plan), "valid": True, "offline": True, "findings": [],
                               "ok": True, "old": None, "new": None, "catalog": None, "storage": None, "registry": None,
                               "reachable": None}


def test_invalid_plan_exits_2_with_every_problem_and_no_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN + "topcis: {}\ngates: {max_mirror_lag: x}\n")
    code, out, err = run(["plan", "check", "--plan", str(plan)], capsys)
    assert code == ExitCode.USAGE
    assert out == ""
    assert err.startswith("error: 2 problems in the plan:\n")
    assert "topcis: unknown key (fix: did you mean 'topics'?)" in err
    assert "Traceback" not in err


def test_missing_plan_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan", "check", "--plan", str(tmp_path / "nope.yaml")], capsys)
    assert code == ExitCode.USAGE
    assert "plan file not found" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["no-such-command"], capsys)
    assert code == ExitCode.USAGE and "No such command" in err
    code, _, err = run(["plan", "check"], capsys)
    assert code == ExitCode.USAGE and "--plan" in err


def test_debug_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--debug", "plan", "check", "--plan", str(tmp_path / "nope.yaml")], capsys)
    assert code == ExitCode.USAGE and "Traceback" in err


def test_help_lists_only_working_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.startswith("  ")]
    assert listed == ["demo", "drill", "init", "jars", "local", "mirror", "offsets", "plan", "promote", "registry",
                      "rights", "rollback", "shadow", "status", "verify"]


def test_local_status_without_a_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["local", "status", "--dir", str(tmp_path / "sb")], capsys)
    assert code == ExitCode.ERROR
    assert f"error: no sandbox in {tmp_path / 'sb'}\n  fix: run: cutover local up" in err


def test_up_without_java_fails_cleanly_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    code, out, err = run(["local", "up", "--dir", str(tmp_path / "sb")], capsys)
    assert code == ExitCode.ERROR and out == ""
    assert err.startswith("error: Java was not found (no java on PATH and no JAVA_HOME)\n  fix: install a JDK 17")
    assert not (tmp_path / "sb").exists()


def test_zookeeper_needs_kafka_3_9_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["local", "up", "--metadata", "old=zookeeper", "--kafka-version", "old=4.1.1",
                          "--dir", str(tmp_path / "sb")], capsys)
    assert code == ExitCode.USAGE and out == ""
    assert "error: Kafka 4.1.1 for the old cluster cannot run on ZooKeeper (Kafka 4.0 removed it)" in err
    assert "fix: use --kafka-version old=3.9.1 with --metadata old=zookeeper" in err
    assert not (tmp_path / "sb").exists()
    code, _, err = run(["local", "up", "--metadata", "old=etcd", "--dir", str(tmp_path / "sb")], capsys)
    assert code == ExitCode.USAGE and "expected CLUSTER=MODE with CLUSTER old or new and MODE one of kraft, zookeeper" \
        in err
