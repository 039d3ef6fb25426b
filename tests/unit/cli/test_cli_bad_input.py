"""Bad input, as a table: what the user gave, the exit code, the words the message must hold.

Every row is an expected user error: none may be reported as a bug in cutover, none may print
a traceback, and none may write anything. Rows that need a live cluster are in
tests/integration (test_sandbox.py, test_secure_sandbox.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode

PLAN = "clusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
OFFLINE = ["plan", "check", "--plan", "{tmp}/p.yaml", "--offline"]
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
    "demo-onto-tansu-with-the-sink": ({}, ["demo", "--dir", "{tmp}/sb", "--platform", "new=tansu", "--old-pipeline",
                                           "sink"], ExitCode.USAGE,
                                      ["--old-pipeline sink with --platform new=tansu", "commits through transactions "
                                       "Tansu lacks", "fix: leave --old-pipeline out"]),
    "demo-onto-tansu-in-avro": ({}, ["demo", "--dir", "{tmp}/sb", "--platform", "new=tansu", "--format", "avro"],
                                ExitCode.USAGE, ["--format avro with --platform new=tansu"]),
    "demo-onto-tansu-on-postgres": ({}, ["demo", "--dir", "{tmp}/sb", "--platform", "new=tansu", "--catalog",
                                         "postgres"], ExitCode.USAGE,
                                    ["--catalog postgres with --platform new=tansu: Tansu writes its tables through "
                                     "a REST catalog only"]),
    "demo-from-tansu": ({}, ["demo", "--dir", "{tmp}/sb", "--platform", "old=tansu"], ExitCode.USAGE,
                        ["--platform old=tansu: the demo migrates from Apache Kafka", "fix: use --platform new=tansu"]),
    "drill-show-of-a-missing-runbook": ({}, ["drill", "show", "no-such-runbook"], ExitCode.USAGE,
                                        ["no-such-runbook: runbook not found", "or the name of one in",
                                         "full-migration"]),
    "metrics-port-in-use": ({"p.yaml": PLAN.encode()}, ["mirror", "--plan", "{tmp}/p.yaml", "--metrics-port",
                                                         "{port}"], ExitCode.USAGE,
                            ["--metrics-port {port}: cannot serve metrics on 127.0.0.1:{port}: Address "
                             "already in use", "fix: give --metrics-port a free port"]),
    "ready-file-in-a-missing-folder": ({"p.yaml": PLAN.encode()}, ["mirror", "--plan", "{tmp}/p.yaml", "--ready-file",
                                                                    "{tmp}/no/such/ready", "--timeout", "1"],
                                       ExitCode.USAGE, ["--ready-file {tmp}/no/such/ready: the folder {tmp}/no/such "
                                                        "does not exist", "fix: create it"]),
    **{f"{' '.join(args)}-after-cancel": (
        {"p.yaml": ("name: done\n" + PLAN).encode(),
         ".cutover/done/completion.json": b'{"action": "cancel", "at": "2026-11-23T05:00:00.000Z", "record": "R"}'},
        [*args, "--plan", "{tmp}/p.yaml", "--timeout", "1"], code,
        [f"error: cutover {' '.join(args)}: the migration ended: cutover cancel finished at 2026-11-23T05:00:00.000Z "
         "(record {tmp}/.cutover/done/completion.json): neither of its mirrors runs again", "fix: nothing to do"])
       for args, code in ((["mirror"], ExitCode.CLOSED_BY_SWITCH),
                          (["mirror", "--reverse"], ExitCode.CLOSED_BY_SWITCH), (["offsets", "sync"], ExitCode.REFUSED),
                          (["offsets", "sync", "--reverse"], ExitCode.REFUSED))},
    "quiet-with-debug": ({"p.yaml": PLAN.encode()}, ["plan", "check", "--plan", "{tmp}/p.yaml", "-q", "--debug"],
                         ExitCode.USAGE, ["--quiet cannot be used with --debug or --verbose"]),
    # Mistakes tried as a newcomer would (the issue's own and 125 of ours), kept where the answer was poor.
    "bootstrap-as-a-url": ({"p.yaml": PLAN.replace("'127.0.0.1:1'", "'http://127.0.0.1:1/'").encode()},
                           OFFLINE, ExitCode.USAGE, ["{tmp}/p.yaml:2: clusters.old['bootstrap.servers']: "
                                                     "'http://127.0.0.1:1/' is a URL", "(fix: 127.0.0.1:1)"]),
    "bootstrap-with-semicolons": ({"p.yaml": PLAN.replace("'127.0.0.1:1'", "'a:1;b:2'").encode()}, OFFLINE,
                                  ExitCode.USAGE, ["'a:1;b:2' is not host:port", "separate brokers with commas"]),
    "bootstrap-without-a-port": ({"p.yaml": PLAN.replace("'127.0.0.1:1'", "broker-1").encode()}, OFFLINE,
                                 ExitCode.USAGE, ["'broker-1' is not host:port", "broker-1:9092"]),
    "bootstrap-port-out-of-range": ({"p.yaml": PLAN.replace("'127.0.0.1:1'", "'127.0.0.1:99999'").encode()},
                                    OFFLINE, ExitCode.USAGE,
                                    ["clusters.old['bootstrap.servers']: '127.0.0.1:99999': port 99999 is not a TCP "
                                     "port (fix: 1 to 65535, the brokers' listener port)"]),
    "sasl-mechanism-misspelt": ({"p.yaml": PLAN.replace("{bootstrap.servers: '127.0.0.1:1'}", "{bootstrap.servers: "
                                                        "'127.0.0.1:1', security.protocol: SASL_PLAINTEXT, "
                                                        "sasl.mechanism: SCRAM-SHA256, sasl.username: u, "
                                                        "sasl.password: p}").encode()}, OFFLINE, ExitCode.USAGE,
                                ["clusters.old: librdkafka refuses these client properties: Unsupported SASL "
                                 "mechanism: SCRAM-SHA256", "fix: sasl.mechanism is one of PLAIN, SCRAM-SHA-256, "
                                 "SCRAM-SHA-512, GSSAPI, OAUTHBEARER"]),
    "sasl-password-empty": ({"p.yaml": PLAN.replace("{bootstrap.servers: '127.0.0.1:1'}", "{bootstrap.servers: "
                                                    "'127.0.0.1:1', security.protocol: SASL_PLAINTEXT, "
                                                    "sasl.mechanism: PLAIN, sasl.username: u, sasl.password: ''}"
                                                    ).encode()}, OFFLINE, ExitCode.USAGE,
                            ["clusters.old: SASL mechanism PLAIN needs sasl.username and sasl.password: sasl.password "
                             "is empty", "the variable it comes from is set to nothing"]),
    "credentials-of-no-principal": ({"p.yaml": (PLAN + "rights: {credentials: {reader: {sasl.username: reader, "
                                                       "sasl.password: x}}}\n").encode()}, OFFLINE, ExitCode.USAGE,
                                    ["rights.credentials: 'reader' is not a principal of the form Type:name",
                                     "fix: User:reader"]),
    "client-property-misspelt": ({"p.yaml": PLAN.replace("{bootstrap.servers: '127.0.0.1:1'}", "{bootstrap.servers: "
                                                         "'127.0.0.1:1', security.protocl: SSL}").encode()},
                                 OFFLINE, ExitCode.USAGE, ['No such configuration property: "security.protocl"; '
                                                           "did you mean security.protocol?"]),
    "security-protocol-misspelt": ({"p.yaml": PLAN.replace("{bootstrap.servers: '127.0.0.1:1'}",
                                                           "{bootstrap.servers: '127.0.0.1:1', security.protocol: "
                                                           "SASL-SSL}").encode()}, OFFLINE, ExitCode.USAGE,
                                   ['Invalid value "SASL-SSL"', "one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"]),
    "catalog-scheme-sqlite3": ({"p.yaml": (PLAN + "catalog: {uri: 'sqlite3:///c.db'}\n").encode()}, OFFLINE,
                               ExitCode.USAGE, ["catalog.uri: scheme 'sqlite3' is not a SQL catalog's",
                                                "sqlite:////absolute/path/catalog.db"]),
    "catalog-rest-uri-on-sql": ({"p.yaml": (PLAN + "catalog: {uri: 'http://rest:8181'}\n").encode()}, OFFLINE,
                                ExitCode.USAGE, ["an http(s) uri is a REST catalog's (fix: set catalog.type: rest)"]),
    "yaml-tab-indent": ({"p.yaml": PLAN.replace("  new:", "\tnew:").encode()}, OFFLINE, ExitCode.USAGE,
                        ["{tmp}/p.yaml:3:1: YAML syntax error", "YAML indents with spaces only"]),
    "plan-file-empty": ({"p.yaml": b""}, OFFLINE, ExitCode.USAGE,
                        ["{tmp}/p.yaml: the plan file is empty", "cutover init --plan"]),
    "negative-lag-gate": ({"p.yaml": (PLAN + "gates: {max_mirror_lag: -1}\n").encode()}, OFFLINE, ExitCode.USAGE,
                          ["gates.max_mirror_lag: must be 0 or more"]),
    "plan-flag-before-the-command": ({"p.yaml": PLAN.encode()}, ["--plan", "{tmp}/p.yaml", "plan", "check"],
                                     ExitCode.USAGE, ["No such option '--plan'", "options go after the command's "
                                                      "name: cutover COMMAND --plan"]),
    "timeout-that-is-not-a-duration": ({"p.yaml": PLAN.encode()}, ["status", "--plan", "{tmp}/p.yaml", "--timeout",
                                                                   "5x"], ExitCode.USAGE,
                                       ["'5x' is not a duration",
                                        "fix: write it as seconds or with a unit: 30, 30s, 5m, 1h"]),
    "init-names-the-flag": ({}, ["init", "--plan", "{tmp}/n.yaml", "--old-bootstrap", "a:1", "--new-bootstrap", "b:2",
                                 "--topics", "*", "--no-check"], ExitCode.USAGE,
                            ["--topics (plan key topics.include[0]): '*' is not a valid regular expression",
                             "not shell globs: write .*",
                             "(nothing was written)"]),
    "local-status-of-a-mistyped-dir": ({}, ["local", "status", "--dir", "{tmp}/no-such-dir"], ExitCode.USAGE,
                                       ["no sandbox in {tmp}/no-such-dir: the folder does not exist",
                                        "fix: check --dir (or CUTOVER_SANDBOX)"]),
    # Mistakes around assess (issue 53): a report folder under a file was "a bug in cutover" after the whole run,
    # in every command with --report; Prometheus without a scheme was "unknown url type" in a row.
    **{f"{command[0]}-report-under-a-file": ({"p.yaml": PLAN.encode(), "f": b"x"},
                                             [*command, "--plan", "{tmp}/p.yaml", "--report", "{tmp}/f/out"],
                                             ExitCode.USAGE, ["'{tmp}/f/out': {tmp}/f is a file, not a folder",
                                                              "fix: give a folder (it is created if missing)"])
       for command in (["assess"], ["verify"], ["drill", "run", "full-migration"])},
    "prometheus-without-a-scheme": ({"p.yaml": (PLAN + "observability: {prometheus: '127.0.0.1:9090'}\n").encode()},
                                    OFFLINE, ExitCode.USAGE,
                                    ["observability.prometheus: '127.0.0.1:9090' is not an http:// or https:// URL "
                                     "(fix: http://127.0.0.1:9090)"]),
    "plan-with-a-bare-variable": ({"p.yaml": (PLAN + "catalog: {type: rest, uri: $CATALOG_URI}\n").encode()},
                                  OFFLINE, ExitCode.USAGE,
                                  ["'$CATALOG_URI' is a variable reference without braces",
                                   "fix: ${{CATALOG_URI}}; $$ for a literal $"]),
    # issue 53: a plan's mistakes named with their key path and fix, before any command reaches them
    "tables-without-a-catalog": ({"p.yaml": (PLAN + "tables: [{topic: o, old: legacy.o, new: cutover.o}]\n").encode()},
                                 ["status", "--plan", "{tmp}/p.yaml", "--timeout", "1"], ExitCode.USAGE,
                                 ["{tmp}/p.yaml:4: tables: 1 table pair(s) and no catalog section",
                                  "(fix: add catalog: {{uri: ...}}"]),
    "two-bad-regexes": ({"p.yaml": (PLAN + "topics: {include: ['(', 'a[']}\n").encode()}, OFFLINE, ExitCode.USAGE,
                        ["2 problems in the plan", r"topics.include[0]: '(' is not a valid regular expression",
                         r"(fix: to match it literally, escape it: \(;",
                         r"topics.include[1]: 'a[' is not a valid regular expression", r"escape it: a\[;"]),
    "table-name-with-a-space": ({"p.yaml": (PLAN + "catalog: {uri: 'sqlite:////tmp/c.db'}\ntables: [{topic: o, "
                                            "old: legacy.o, new: 'cutover.my orders'}]\n").encode()}, OFFLINE,
                                ExitCode.USAGE, ["tables[0].new: 'cutover.my orders' is not a table name cutover can "
                                                 "use", "(fix: e.g. cutover.my_orders)"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_named_with_its_fix(case: str, tmp_path: Path, busy_port: int,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    check_case(CASES[case], tmp_path, busy_port, capsys)


def check_case(row: tuple[dict[str, bytes], list[str], ExitCode, list[str]], tmp_path: Path, busy_port: int,
               capsys: pytest.CaptureFixture[str]) -> None:
    """Run one row: its exit code, its words on stderr, nothing on stdout, no bug, no traceback, nothing written."""
    files, argv, code, words = row
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    fill = {"tmp": str(tmp_path), "port": str(busy_port)}
    with pytest.raises(SystemExit) as done:
        main([a.format(**fill) for a in argv])
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (code, ""), err
    for word in words:
        assert word.format(**fill) in err, err
    assert "a bug in cutover" not in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_a_plan_path_from_cutover_plan_that_is_not_there_is_named_as_the_variables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTOVER_PLAN", str(tmp_path / "gone.yaml"))
    with pytest.raises(SystemExit) as done:
        main(["status"])
    assert done.value.code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path / 'gone.yaml'}: plan file not found (fix: the path is CUTOVER_PLAN's, from the "
        "environment: correct it, or unset it and give --plan)")


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


def test_a_routing_file_not_as_cutover_wrote_it_is_a_refusal_not_a_bug(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.yaml").write_text(PLAN + "routing: {file: r.json}\n")
    for content, found in ((b'{"Active": "old"}', "found None"), (b'["new"]', "found a JSON list"),
                           (b'{"active": "neww"}', "found 'neww'")):
        (tmp_path / "r.json").write_bytes(content)
        said = f'routing file {tmp_path}/r.json: "active" must be "old" or "new"; {found}'
        with pytest.raises(SystemExit) as done:
            main(["status", "--plan", str(tmp_path / "p.yaml"), "--timeout", "1"])
        out, err = capsys.readouterr()
        assert done.value.code == ExitCode.ERROR and f"routing: {said}" in out, out
        assert "a bug in cutover" not in err + out and "Traceback" not in err
    with pytest.raises(SystemExit) as done:  # promote refuses before it freezes anything
        main(["promote", "--plan", str(tmp_path / "p.yaml"), "--dry-run", "--timeout", "1"])
    out, err = capsys.readouterr()
    assert done.value.code == ExitCode.REFUSED, err
    assert f"REFUSED routing-file: could not check: {said}" in out
