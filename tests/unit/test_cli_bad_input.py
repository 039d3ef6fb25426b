"""Bad input, as a table: what the user gave, the exit code, the words the message must hold.

Every row is an expected user error: none may be reported as a bug in cutover, none may print
a traceback, and none may write anything. Rows that need a live cluster are in
tests/integration (test_sandbox.py, test_secure_sandbox.py).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode

PLAN = "clusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
RUNBOOK = "name: r\npurpose: p\nsteps:\n  - name: sample traffic\n    action: traffic.start\n  - name: nothing\n"

#: (files to write under tmp, argv with {tmp} and {port}, exit code, words in stderr)
CASES = {
    "plan-not-utf8": ({"p.yaml": b"name: caf\xe9\n" + PLAN.encode()}, ["plan", "check", "--plan", "{tmp}/p.yaml"],
                      ExitCode.USAGE, ["{tmp}/p.yaml:1:10: the plan file is not UTF-8 text (byte offset 9",
                                       "fix: save it as UTF-8"]),
    "env-file-not-utf8": ({"p.yaml": b"env_file: s.env\n" + PLAN.encode(), "s.env": b"A=1\nB=p\xe4ss\n"},
                          ["plan", "check", "--plan", "{tmp}/p.yaml", "--offline"], ExitCode.USAGE,
                          ["{tmp}/s.env:2:4: the env file is not UTF-8 text (byte offset 7"]),
    "plan-name-with-a-slash": ({"p.yaml": ("name: team/orders\n" + PLAN).encode()},
                               ["plan", "check", "--plan", "{tmp}/p.yaml", "--offline"], ExitCode.USAGE,
                               ["{tmp}/p.yaml:1: name: 'team/orders' cannot name a plan: use 1 to 64 letters"]),
    "plan-name-too-long": ({"p.yaml": ("name: " + "x" * 65 + "\n" + PLAN).encode()},
                           ["plan", "check", "--plan", "{tmp}/p.yaml", "--offline"], ExitCode.USAGE,
                           ["cannot name a plan", "becomes part of Kafka transactional and group ids"]),
    "runbook-step-without-a-body": ({"r.yaml": RUNBOOK.encode()}, ["drill", "show", "{tmp}/r.yaml"], ExitCode.USAGE,
                                    ["{tmp}/r.yaml:6: step 2 (nothing): steps[1]: a step has exactly one of action, "
                                     "fault, manual, expect; found none"]),
    "drill-show-of-a-missing-runbook": ({}, ["drill", "show", "no-such-runbook"], ExitCode.USAGE,
                                        ["no-such-runbook: runbook not found", "or the name of one in",
                                         "full-migration"]),
    "metrics-port-in-use": ({"p.yaml": PLAN.encode()}, ["mirror", "--plan", "{tmp}/p.yaml", "--metrics-port",
                                                         "{port}"], ExitCode.USAGE,
                            ["--metrics-port {port}: cannot serve metrics on port {port} of this host: Address "
                             "already in use", "fix: choose a free port"]),
    "quiet-with-debug": ({"p.yaml": PLAN.encode()}, ["plan", "check", "--plan", "{tmp}/p.yaml", "-q", "--debug"],
                         ExitCode.USAGE, ["--quiet cannot be used with --debug or --verbose"]),
}


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        yield int(held.getsockname()[1])


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_named_with_its_fix(case: str, tmp_path: Path, busy_port: int,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    files, argv, code, words = CASES[case]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    before = sorted(p.name for p in tmp_path.iterdir())
    fill = {"tmp": str(tmp_path), "port": str(busy_port)}
    with pytest.raises(SystemExit) as done:
        main([a.format(**fill) for a in argv])
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (code, ""), err
    for word in words:
        assert word.format(**fill) in err, err
    assert "a bug in cutover" not in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_version_and_the_verbosity_flags_work_before_and_after_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("-V", "--version"):
        with pytest.raises(SystemExit) as done:
            main([flag])
        assert done.value.code == 0 and capsys.readouterr().out.startswith("cutover, version ")
    missing = str(tmp_path / "nope.yaml")
    for argv in (["--debug", "plan", "check", "--plan", missing], ["plan", "check", "--plan", missing, "--debug"],
                 ["plan", "--debug", "check", "--plan", missing]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == ExitCode.USAGE and "Traceback" in capsys.readouterr().err, argv
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    # -v shows informational logs, -q none, wherever they are written; results stay on stdout
    for argv, logged in ((["plan", "check", "--plan", str(plan), "--offline", "-v"], True),
                         (["-v", "plan", "check", "--plan", str(plan), "--offline"], True),
                         (["plan", "check", "--plan", str(plan), "--offline"], False)):
        with pytest.raises(SystemExit) as done:
            main(argv)
        out, err = capsys.readouterr()
        assert done.value.code == 0 and out.startswith("plan migration"), (out, err)
        assert ("INFO cutover.plan: plan migration read from" in err) is logged, (argv, err)
    # -q: no progress line reaches stderr (the reporter is muted), and the next command without it speaks again
    from cutover.output import progress

    for argv, shown in ((["plan", "check", "--plan", str(plan), "--offline", "-q"], False),
                        (["plan", "check", "--plan", str(plan), "--offline"], True)):
        with pytest.raises(SystemExit):
            main(argv)
        capsys.readouterr()
        progress("a progress line")
        assert ("a progress line" in capsys.readouterr().err) is shown
