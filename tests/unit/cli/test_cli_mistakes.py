"""More mistakes, tried as a newcomer would (issue 53's round), kept where the answer was poor: each row failed
before its fix (a bug reported for a binary file, flags that contradict each other taken silently, ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode
from tests.unit.cli.test_cli_bad_input import PLAN, check_case

TABLES = PLAN + "tables:\n  - {topic: orders, old: legacy.orders, new: cutover.orders}\n"
RUNBOOK_BINARY = b"\x00\x01name: r\n"

#: (files to write under tmp, argv with {tmp} and {port}, exit code, words in stderr)
CASES = {
    "plan-file-with-nul-bytes": ({"p.yaml": b"\x00\x01\x02" + PLAN.encode()}, ["plan", "check", "--plan",
                                                                               "{tmp}/p.yaml", "--offline"],
                                 ExitCode.USAGE, ["{tmp}/p.yaml", "not a YAML text", "fix:"]),
    "runbook-with-nul-bytes": ({"r.yaml": RUNBOOK_BINARY}, ["drill", "show", "{tmp}/r.yaml"], ExitCode.USAGE,
                               ["{tmp}/r.yaml", "not a YAML text", "fix:"]),
    "start-offsets-file-not-there": ({"p.yaml": TABLES.encode()}, ["shadow", "--plan", "{tmp}/p.yaml",
                                                                  "--start-offsets", "{tmp}/offsets.json"],
                                     ExitCode.USAGE, ["--start-offsets {tmp}/offsets.json: no such file",
                                                      "fix:"]),
    "shadow-follow-and-until-caught-up": ({"p.yaml": TABLES.encode()}, ["shadow", "--plan", "{tmp}/p.yaml",
                                                                       "--until-caught-up", "--follow"],
                                          ExitCode.USAGE, ["--follow and --until-caught-up contradict each other",
                                                           "fix: give one of them"]),
    "local-down-of-a-mistyped-dir": ({}, ["local", "down", "--dir", "{tmp}/no-such-dir"], ExitCode.USAGE,
                                     ["no sandbox in {tmp}/no-such-dir", "fix:"]),
    "spark-reader-whose-offsets-are-not-kafka-positions": (
        {"p.yaml": (PLAN + "topics: {include: [orders]}\nreaders:\n  - {name: q, kind: spark-checkpoint, "
                    "checkpoint: cp}\n").encode(),
         "cp/offsets/0": b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n{"orders":{"0":"x"}}\n',
         "cp/commits/0": b'v1\n{"nextBatchWatermarkMs":0}\n'},
        ["readers", "translate", "--plan", "{tmp}/p.yaml", "--reader", "q", "--dry-run"], ExitCode.REFUSED,
        ["reader q: batch 0 of {tmp}/cp holds no Kafka source position", '{{"orders":{{"0":"x"}}}}', "fix:"]),
    "drill-with-a-mistyped-sandbox-dir": ({"p.yaml": PLAN.encode()}, ["drill", "run", "full-migration", "--plan",
                                                                     "{tmp}/p.yaml", "--dir", "{tmp}/no-such-dir",
                                                                     "--auto", "--report", "{tmp}/report"],
                                          ExitCode.USAGE, ["--dir {tmp}/no-such-dir: no sandbox there", "fix:"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_more_mistakes_are_named_with_their_fix(case: str, tmp_path: Path, busy_port: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    check_case(CASES[case], tmp_path, busy_port, capsys)


def test_plan_check_names_a_spark_reader_without_kafka_positions_as_a_finding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, _argv, _code, _words = CASES["spark-reader-whose-offsets-are-not-kafka-positions"]
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    with pytest.raises(SystemExit) as done:
        main(["plan", "check", "--plan", str(tmp_path / "p.yaml"), "--offline"])
    out, err = capsys.readouterr()
    assert done.value.code == ExitCode.REFUSED, err
    assert f"reader q: batch 0 of {tmp_path / 'cp'} holds no Kafka source position" in out



def test_a_kafka_client_error_no_command_named_is_a_clusters_answer_not_a_bug(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's boundary: a confluent-kafka error that escaped every command's own naming (the classes this round
    fixed: assess's metadata, the copier's new partitions, a deletion's wait) is the cluster's answer, said as such
    with exit 1; only anything else is called a bug in cutover."""
    import click
    from confluent_kafka import KafkaError, KafkaException

    from cutover.cli import cli

    @click.command("raises-kafka")
    def raises() -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))

    @click.command("raises-other")
    def other() -> None:
        raise ZeroDivisionError("division by zero")

    cli.add_command(raises)
    cli.add_command(other)
    try:
        with pytest.raises(SystemExit) as done:
            main(["raises-kafka"])
        err = capsys.readouterr().err
        assert done.value.code == ExitCode.ERROR
        assert "error: a Kafka cluster answered: " in err and "Broker transport failure" in err
        assert "fix: check the plan's clusters" in err and "a bug in cutover" not in err
        with pytest.raises(SystemExit) as done:
            main(["raises-other"])
        assert done.value.code == ExitCode.ERROR and "a bug in cutover" in capsys.readouterr().err
    finally:
        cli.commands.pop("raises-kafka")
        cli.commands.pop("raises-other")
