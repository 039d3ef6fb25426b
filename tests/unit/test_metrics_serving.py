"""Where the mirror, the shadow and the exporter serve their metrics: 127.0.0.1 unless --metrics-host or the
plan's observability.host say otherwise, and every way that cannot be served named with the option the command
really has (or the plan key the port or host came from) and its fix. The clusters are out of reach: each
command binds its metrics before it asks a cluster anything, so none is needed here (tests/integration/
test_loopback.py checks the sockets of running commands)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode, UsageError
from cutover.plan import load_plan

PLAN = ("clusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
        "tables:\n  - {topic: orders, old: db.orders_old, new: db.orders}\n"
        "catalog: {uri: 'sqlite:////nonexistent/catalog.db'}\n")


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """stderr of a command that must end as a usage error, with nothing on stdout and no traceback."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (ExitCode.USAGE, ""), err
    assert "a bug in cutover" not in err and "Traceback" not in err
    return err


#: command -> (its argv after --plan FILE, its port option, the plan key of its port)
COMMANDS = {"mirror": (["mirror"], "--metrics-port", "mirror"),
            "reverse-mirror": (["mirror", "--reverse"], "--metrics-port", "reverse_mirror"),
            "shadow": (["shadow"], "--metrics-port", "shadow"),
            "exporter": (["exporter"], "--port", "exporter")}


def _argv(command: str, plan: Path, *more: str) -> list[str]:
    head, _option, _key = COMMANDS[command]
    return [head[0], "--plan", str(plan), *head[1:], *more]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_port_in_use_names_the_option_the_command_has(command: str, tmp_path: Path, busy_port: int,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (plan := tmp_path / "p.yaml").write_text(PLAN)
    _head, option, _key = COMMANDS[command]
    err = _fails(_argv(command, plan, option, str(busy_port)), capsys)
    assert f"{option} {busy_port}: cannot serve metrics on 127.0.0.1:{busy_port}: Address already in use" in err
    assert f"fix: give {option} a free port; or stop what holds it" in err
    if option != "--metrics-port":
        assert "--metrics-port" not in err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_port_in_use_from_the_plan_names_its_key_and_the_commands_option(
        command: str, tmp_path: Path, busy_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    _head, option, key = COMMANDS[command]
    (plan := tmp_path / "p.yaml").write_text(PLAN + f"observability:\n  ports: {{{key}: {busy_port}}}\n")
    err = _fails(_argv(command, plan), capsys)
    assert (f"observability.ports.{key}: {busy_port} (in {plan}): cannot serve metrics on 127.0.0.1:{busy_port}: "
            "Address already in use") in err
    assert f"fix: give {option} a free port, or change observability.ports.{key} in {plan}; or stop" in err
    if option != "--metrics-port":
        assert "--metrics-port" not in err


def test_a_host_that_does_not_resolve_or_is_not_this_hosts_is_named(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (plan := tmp_path / "p.yaml").write_text(PLAN)
    err = _fails(["mirror", "--plan", str(plan), "--metrics-port", "9", "--metrics-host", "no-such-host.invalid"],
                 capsys)
    assert "--metrics-host no-such-host.invalid: cannot serve metrics there: the name does not resolve" in err
    assert ("fix: give --metrics-host an address of this host: 127.0.0.1 (this host only) or 0.0.0.0 (every "
            "interface)") in err
    err = _fails(["exporter", "--plan", str(plan), "--port", "9", "--metrics-host", "192.0.2.1"], capsys)
    assert "--metrics-host 192.0.2.1: cannot serve metrics on 192.0.2.1:9: it is not an address of this host" in err
    assert "ip -brief address" in err
    (plan := tmp_path / "q.yaml").write_text(PLAN + "observability:\n  host: 192.0.2.1\n  ports: {shadow: 9}\n")
    err = _fails(["shadow", "--plan", str(plan)], capsys)
    assert f"observability.host: 192.0.2.1 (in {plan}): cannot serve metrics on 192.0.2.1:9" in err
    assert f"fix: give --metrics-host an address of this host: 127.0.0.1 (this host only) or 0.0.0.0 (every " \
           f"interface), or change observability.host in {plan}" in err


def test_a_host_with_nothing_to_serve_or_that_is_not_a_host_is_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (plan := tmp_path / "p.yaml").write_text(PLAN)
    err = _fails(["mirror", "--plan", str(plan), "--metrics-host", "0.0.0.0"], capsys)
    assert "--metrics-host 0.0.0.0 says where to serve the metrics, but no port is given: none would be" in err
    assert f"fix: give --metrics-port N too, or set observability.ports.mirror in {plan}" in err
    err = _fails(["exporter", "--plan", str(plan), "--port", "9420", "--metrics-host", "http://0.0.0.0:9420"], capsys)
    assert "--metrics-host 'http://0.0.0.0:9420' is a URL: give the address alone\n" in err
    assert "fix: --metrics-host 0.0.0.0\n" in err
    err = _fails(["shadow", "--plan", str(plan), "--metrics-port", "9410", "--metrics-host", "0.0.0.0:9410"], capsys)
    assert "--metrics-host '0.0.0.0:9410' holds a port: give the address alone" in err
    assert "fix: --metrics-host 0.0.0.0\n" in err


def test_the_plans_host_is_checked_and_the_commands_own_wins(tmp_path: Path) -> None:
    from cutover.errors import PlanError

    (bad := tmp_path / "bad.yaml").write_text(PLAN + "observability:\n  host: '[::1]'\n")
    with pytest.raises(PlanError) as info:
        load_plan(bad, environ={})
    assert any("observability.host: '[::1]'" in p and "give it without them (fix: ::1)" in p
               for p in info.value.problems), info.value.problems
    (good := tmp_path / "p.yaml").write_text(PLAN + "observability:\n  host: 10.1.2.3\n  ports: {mirror: 9400}\n")
    plan = load_plan(good, environ={})
    at = plan.metrics_endpoint("mirror")
    assert at is not None and (at.host, at.port) == ("10.1.2.3", 9400)
    at = plan.metrics_endpoint("mirror", 9999, "127.0.0.2")
    assert at is not None and (at.host, at.port) == ("127.0.0.2", 9999)
    assert plan.metrics_endpoint("shadow") is None  # no port: nothing served
    (bare := tmp_path / "plain.yaml").write_text(PLAN)
    plain = load_plan(bare, environ={})
    at = plain.metrics_endpoint("exporter", 9420, options=("--port", "--metrics-host"))
    assert at is not None and (at.host, at.port) == ("127.0.0.1", 9420)  # the default: this host only
    with pytest.raises(UsageError):
        plain.metrics_endpoint("shadow", host="0.0.0.0")

