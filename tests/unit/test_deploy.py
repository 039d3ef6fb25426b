"""The service files in deploy/ run real cutover commands: every flag they pass exists and parses, and the
sharded mirror's shard count matches its number of instances."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import click
import yaml

from cutover.cli import cli
from cutover.errors import ExitCode
from cutover.mirror.shard import Shard

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _parses(argv: list[str]) -> click.Context:
    """Parse `cutover ARGV` (a command that runs itself, as mirror and shadow do) as the CLI would, without
    running it: an unknown flag or a bad value fails here."""
    command = cli.commands[argv[0]]
    ctx = command.make_context(argv[0], argv[1:], parent=click.Context(cli, info_name="cutover"))
    assert not ctx.args, f"cutover {argv[0]} would not run itself with {argv}"
    return ctx


def _unit(name: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY / "systemd" / name)
    return unit


def test_the_systemd_units_run_cutover_commands_that_parse() -> None:
    mirror = _unit("cutover-mirror@.service")
    argv = shlex.split(mirror["Service"]["ExecStart"].replace("%i", "0"))
    assert argv[0].endswith("/cutover")
    ctx = _parses(argv[1:])
    assert ctx.params["shard"] == "0/3" and Shard.parse(ctx.params["shard"]).count == 3
    assert "shard %i of 3" in mirror["Unit"]["Description"]
    assert ctx.params["ready_file"] in mirror["Service"]["ExecStartPost"].replace("%i", "0")
    assert mirror["Service"]["KillSignal"] == "SIGTERM" and ctx.params["metrics_port"] == 9400
    assert ctx.params["metrics_host"] is None  # 127.0.0.1: the shipped prometheus.yml scrapes this host
    closed = str(int(ExitCode.CLOSED_BY_SWITCH))  # promote closed the mirror: done, and not restarted
    assert mirror["Service"]["SuccessExitStatus"] == closed and mirror["Service"]["RestartPreventExitStatus"] == closed
    shadow = _unit("cutover-shadow.service")
    sctx = _parses(shlex.split(shadow["Service"]["ExecStart"])[1:])
    assert sctx.params["follow"] is True and shadow["Service"]["KillSignal"] == "SIGTERM"
    assert sctx.params["metrics_port"] == 9410
    # a table handed to the other cluster's writer ends the shadow: done, and not restarted
    assert shadow["Service"]["SuccessExitStatus"] == closed and shadow["Service"]["RestartPreventExitStatus"] == closed


def test_the_kubernetes_mirror_runs_one_shard_per_replica() -> None:
    sts = yaml.safe_load((DEPLOY / "kubernetes" / "mirror.yaml").read_text())
    pod = sts["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["cutover"]
    for index in range(sts["spec"]["replicas"]):
        argv = [a.replace("$(POD_INDEX)", str(index)) for a in container["args"]]
        ctx = _parses(argv)
        shard = Shard.parse(ctx.params["shard"])
        assert (shard.index, shard.count) == (index, sts["spec"]["replicas"])
    assert container["readinessProbe"]["exec"]["command"] == ["test", "-e", ctx.params["ready_file"]]
    assert ctx.params["idle_when_closed"]  # a StatefulSet restarts every exit: no crash loop after promote
    assert container["ports"][0]["containerPort"] == ctx.params["metrics_port"]
    # Prometheus scrapes the pod's address (the annotations): served on it, not on the pod's loopback
    assert ctx.params["metrics_host"] == "0.0.0.0"
    assert sts["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(ctx.params["metrics_port"])
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.labels['apps.kubernetes.io/pod-index']"
    assert pod["terminationGracePeriodSeconds"] >= 30  # time for the transaction in flight after SIGTERM
