"""Every option of every command that takes a duration takes it the same way: one type (cli/options.py
Seconds), the same forms (30, 30s, 5m, 1h, 500ms, 2d), the same error naming the option, the value and
the accepted forms (exit 2). Walking the commands means a new option cannot drift."""

from __future__ import annotations

import re

import click
import pytest

from cutover.cli.options import Seconds
from tests.unit.cli.test_cli import _every_command

#: Words in an option's name that say it is a length of time.
_TIME_NAMES = ("timeout", "interval", "wait", "period", "delay", "grace", "deadline", "every", "window", "sample",
               "probe", "age", "since", "ttl")
#: Words in its metavar or help that do.
_TIME_HELP = re.compile(r"\bseconds\b|\bhow long\b|\bhow often\b|\bduration\b|^SECONDS$|^DURATION$", re.I)


def _duration_options() -> list[tuple[str, click.Option]]:
    """Every option that takes a length of time, by its type (a float, Seconds), its name or its words; not a
    flag, a path or a choice."""
    out = []
    for name, command, _ctx in _every_command():
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or isinstance(
                    param.type, click.Path | click.Choice | click.types.BoolParamType):
                continue
            named = any(w in _TIME_NAMES for part in param.opts for w in part.lstrip("-").split("-"))
            said = any(_TIME_HELP.search(text) for text in (param.metavar or "", param.help or ""))
            if isinstance(param.type, click.types.FloatParamType | Seconds) or named or said:
                out.append((f"{name} {param.opts[0]}", param))
    return out


def test_every_duration_option_of_every_command_is_one_type() -> None:
    options = _duration_options()
    assert {o.split()[-1] for o, _p in options} >= {"--timeout", "--interval", "--sample", "--probe"}
    other = [o for o, p in options if not isinstance(p.type, Seconds)]
    assert other == []


@pytest.mark.parametrize("given, seconds", [("30", 30.0), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0),
                                            ("500ms", 0.5), ("1.5m", 90.0)])
def test_each_duration_option_takes_every_form(given: str, seconds: float) -> None:
    for name, param in _duration_options():
        assert isinstance(param.type, Seconds)
        if seconds < param.type.least or (param.type.most is not None and seconds > param.type.most):
            continue
        assert param.type.convert(given, param, None) == seconds, name


@pytest.mark.parametrize("argv, words", [
    (["assess", "--sample", "abc"], ["Invalid value for '--sample': 'abc' is not a duration",
                                     "fix: write it as seconds or with a unit: 30, 30s, 5m, 1h"]),
    (["assess", "--probe", "-1"], ["Invalid value for '--probe': '-1' is not a duration", "30, 30s, 5m, 1h"]),
    (["assess", "--sample", "11m"], ["Invalid value for '--sample': '11m' is more than the most, 10m"]),
    (["status", "--timeout", "5x"], ["Invalid value for '--timeout': '5x' is not a duration", "30, 30s, 5m, 1h"]),
    (["status", "--timeout", "0"], ["Invalid value for '--timeout': '0' is less than the least, 100ms"]),
    (["exporter", "--interval", "1 week"], ["Invalid value for '--interval': '1 week' is not a duration"]),
])
def test_a_bad_duration_names_the_option_the_value_and_the_forms(
        argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from cutover.cli import main
    from cutover.errors import ExitCode

    with pytest.raises(SystemExit) as done:
        main([*argv, "--plan", "/nonexistent/plan.yaml"])
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (ExitCode.USAGE, ""), err
    for word in words:
        assert word in err, err
    assert "Traceback" not in err and "a bug in cutover" not in err
