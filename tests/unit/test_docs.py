"""The docs site builds with `mkdocs build --strict` (a broken link or a missing page fails), and
its generated reference names every command and every plan key, as a reader would look them up."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cutover.cli import cli
from cutover.plan import reference

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(out)], capture_output=True, text=True, check=False,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _commands(group: click.Group, prefix: str) -> list[str]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        if cmd.hidden:
            continue
        out.append(f"{prefix} {name}")
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{prefix} {name}")
    return out


def test_the_cli_reference_names_every_command(site: Path) -> None:
    text = _text(site / "reference" / "cli" / "index.html")
    commands = _commands(cli, "cutover")
    assert len(commands) > 30
    assert [c for c in commands if c not in text] == []


def test_the_plan_reference_names_every_plan_key_with_its_meaning(site: Path) -> None:
    text = _text(site / "reference" / "plan" / "index.html")
    keys = reference.keys()
    assert len(keys) > 90 and all(k.doc for k in keys), [k.path for k in keys if not k.doc]
    assert [k.path for k in keys if k.path not in text] == []


def test_the_runbook_reference_names_every_step_and_argument(site: Path) -> None:
    from cutover.drill import reference as steps
    from cutover.drill.ops import OPS

    text = _text(site / "reference" / "runbook-steps" / "index.html")
    assert len(OPS) > 30
    assert [f"{k}: {n}" for k, n in OPS if f"{k}: {n}" not in text] == []
    assert [(n, a[0]) for (_k, n), o in OPS.items() for a in steps.arguments(o) if a[0] not in text] == []
    assert "complete" in {n for _k, n in OPS}


def test_the_metrics_reference_names_every_metric(site: Path) -> None:
    from cutover.mirror.metrics import Metrics

    text = _text(site / "reference" / "metrics" / "index.html")
    from cutover.shadow.metrics import ShadowMetrics

    names = [f.name for f in Metrics(None).registry.collect()]
    assert len(names) >= 7 and [n for n in names if n not in text] == []
    shadow = [f.name for f in ShadowMetrics(None).registry.collect()]
    assert len(shadow) >= 9 and [n for n in shadow if n not in text] == []
    from cutover.observe.exporter import METRICS

    assert [n for n in METRICS if n not in text] == []


def test_the_readme_is_short_and_links_the_site() -> None:
    readme = (REPO / "README.md").read_text().splitlines()
    assert len(readme) <= 150, len(readme)
    assert any("docs/" in line for line in readme)


def test_the_runbook_in_the_how_to_is_a_valid_runbook(tmp_path: Path) -> None:
    from cutover.drill import model

    text = (REPO / "docs" / "how-to" / "runbooks.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None
    (tmp_path / "staging-switch.yaml").write_text(block.group(1))
    rb = model.load(tmp_path / "staging-switch.yaml", {})
    assert [s.name for s in rb.steps][-1] == "switch again" and any(s.kind == "manual" for s in rb.steps)


def test_the_commands_page_has_a_row_for_every_command(site: Path) -> None:
    from cutover.cli import reference as commands

    text = _text(site / "reference" / "commands" / "index.html")
    runnable = [c for c in _commands(cli, "cutover") if not isinstance(_command(c), click.Group)
                or _command(c).invoke_without_command]  # type: ignore[union-attr]
    rows = [r.path for r in commands.rows()]
    assert sorted(rows) == sorted(runnable)
    # Rows the hand-written page once lacked, each with its options.
    for row in ("cutover assess --plan FILE", "cutover registry sync --plan FILE", "cutover registry audit --plan FILE",
                "cutover rights plan --plan FILE", "cutover rights apply --plan FILE",
                "cutover rights audit --plan FILE", "cutover exporter --plan FILE [--port N]", "cutover plan schema",
                "cutover local fetch [--output text|json]"):
        assert row in text, row
    assert [r for r in rows if f"{r} " not in text and not text.count(r)] == []


def _command(path: str) -> click.Command:
    command: click.Command = cli
    for name in path.split()[1:]:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def test_the_switch_guide_lists_every_precondition_the_checks_define(site: Path) -> None:
    import ast

    from cutover.switch import checks
    from cutover.switch import reference as preconditions

    source = ast.parse(Path(checks.__file__).read_text())
    defined = {node.args[0].value if isinstance(node.args[0], ast.Constant) else node.args[0].values[0].value
               for node in ast.walk(source)
               if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Check"}
    defined = {str(d).removesuffix("-on-") for d in defined}
    sample = Path(__file__).resolve().parents[2] / "samples" / "plan.yaml"  # an installed package has none
    listed = {p.name for p in preconditions.catalogue(preconditions.sample_plan(sample))}
    assert {d for d in defined if not any(n.startswith(d) for n in listed)} == set()
    assert {"rights-match", "routing-file", "registry-ids-match", "groups-idle-on-old"} <= listed
    text = _text(site / "guide" / "switch" / "index.html")
    assert [n for n in listed if n not in text] == []
    assert "promote (with tables)" in text and "rollback (after clients switched, with registry)" in text


def test_the_platforms_guide_lists_every_capability_cutover_asks_about(site: Path) -> None:
    from cutover.kafka import capabilities

    text = _text(site / "guide" / "platforms" / "index.html")
    assert [c.name for c in capabilities.CAPABILITIES if c.name not in text] == []
    assert "EndTxn" in text and "DescribeProducers" in text  # the APIs that tell
