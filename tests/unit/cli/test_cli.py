"""The CLI error boundary: exit codes, messages on stderr, results on stdout, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import click
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
                               "readers": [], "reachable": None, "unchecked": []}


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


def test_the_exporter_without_a_port_names_both_places_to_give_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    code, out, err = run(["exporter", "--plan", str(plan)], capsys)
    assert (code, out) == (ExitCode.USAGE, "")
    assert err == (f"error: cutover exporter needs a port to serve on\n  fix: give --port N, or set "
                   f"observability.ports.exporter in {plan}\n"), err


def test_debug_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--debug", "plan", "check", "--plan", str(tmp_path / "nope.yaml")], capsys)
    assert code == ExitCode.USAGE and "Traceback" in err


def test_help_lists_only_working_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.startswith("  ")]
    # in the order a migration uses them
    assert listed == ["demo", "local", "init", "plan", "assess", "registry", "rights", "mirror", "offsets", "readers",
                      "shadow",
                      "verify", "drill", "promote", "status", "exporter", "rollback", "complete", "cancel", "jars"]


def test_local_status_without_a_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sb").mkdir()  # a folder without a sandbox (a folder that does not exist: test_cli_bad_input)
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


def _every_command() -> list[tuple[str, click.Command, click.Context]]:
    from cutover.cli import cli

    out = []

    def walk(group: click.Group, path: str, ctx: click.Context) -> None:
        for name in group.list_commands(ctx):
            command = group.commands[name]
            if command.hidden:
                continue
            sub = click.Context(command, info_name=name, parent=ctx)
            out.append((f"{path} {name}", command, sub))
            if isinstance(command, click.Group):
                walk(command, f"{path} {name}", sub)

    walk(cli, "cutover", click.Context(cli, info_name="cutover", max_content_width=cli.context_settings[
        "max_content_width"]))
    return out


def _examples(help_text: str) -> list[list[str]]:
    """The example command lines of a help text (continued lines joined, comments dropped)."""
    import shlex

    block = help_text.split("Example:", 1)[1].split("\n\n", 1)[0]
    lines, joined = [], ""
    for raw in block.splitlines():
        text = raw.split("  #", 1)[0].strip()
        if not text:
            continue
        joined += " " + text.rstrip("\\").strip()
        if not text.endswith("\\"):
            lines.append(shlex.split(joined.split(">", 1)[0]))
            joined = ""
    return lines


def test_every_command_has_an_example_that_parses_and_help_fits_80_columns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cutover.cli import cli

    monkeypatch.setenv("COLUMNS", "80")
    commands = _every_command()
    assert len(commands) > 30
    without = [name for name, command, _ in commands if "Example:" not in (command.help or "")]
    assert without == []
    for name, command, ctx in commands:
        wide = [line for line in command.get_help(ctx).splitlines() if len(line) > 79]
        assert wide == [], (name, wide)
        for argv in _examples(command.help or ""):
            assert argv[0] == "cutover", (name, argv)
            target: click.Command = cli
            rest = argv[1:]
            while isinstance(target, click.Group) and rest and rest[0] in target.commands:
                target, rest = target.commands[rest[0]], rest[1:]
            if isinstance(target, click.Group) and rest and target.name == "drill":
                target, rest = target.commands["run"], rest  # `cutover drill RUNBOOK` runs it
            target.make_context(target.name or "", list(rest), resilient_parsing=False)  # an unknown flag fails


def test_a_required_plan_is_marked_in_every_commands_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for name, command, ctx in _every_command():
        plan = next((p for p in command.params if "--plan" in getattr(p, "opts", [])), None)
        if plan is None or name == "cutover init":
            continue
        assert "[required]" in command.get_help(ctx), name
