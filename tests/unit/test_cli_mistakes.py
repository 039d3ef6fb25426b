"""More mistakes, tried as a newcomer would (issue 53's round), kept where the answer was poor: each row failed
before its fix (a bug reported for a binary file, flags that contradict each other taken silently, ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.errors import ExitCode
from tests.unit.test_cli_bad_input import PLAN, busy_port, check_case

__all__ = ["busy_port"]  # the fixture, used by name

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
}


@pytest.mark.parametrize("case", list(CASES))
def test_more_mistakes_are_named_with_their_fix(case: str, tmp_path: Path, busy_port: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    check_case(CASES[case], tmp_path, busy_port, capsys)
