"""The shipped samples: every sample plan is valid, its hooks exist and run, as a reader would
copy them. The hooks run against a stand-in systemctl (a script that records its arguments)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from cutover.plan import load_plan, readiness

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("*.yaml"))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_every_sample_plan_is_valid_and_its_hooks_are_there(sample: Path, tmp_path: Path) -> None:
    text = sample.read_text()
    env = {name: "x" for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text)}
    copy = sample.parent / f".{sample.stem}.check.yaml"  # beside it: hooks are relative to the plan
    copy.write_text(text.replace("env_file: secrets.env", ""))
    try:
        plan = load_plan(copy, environ=env)
        problems = [f.problem for f in readiness.offline(plan) if f.check == "hooks"]
    finally:
        copy.unlink()
    assert problems == []
    assert len(SAMPLES) >= 6


def _run(hook: str, tmp_path: Path, **env: str) -> list[str]:
    calls = tmp_path / "calls"
    stub = tmp_path / "systemctl"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    stub.chmod(0o755)
    done = subprocess.run([str(REPO / "samples" / "hooks" / hook)], capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"], "SYSTEMCTL": str(stub),
                               "CLIENT_ENV_FILE": str(tmp_path / "clients" / "bootstrap.env"),
                               "OLD_WRITER_OFFSETS_DIR": str(tmp_path / "offsets"), **env})
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def test_the_sample_hooks_stop_switch_and_resume_the_clients(tmp_path: Path) -> None:
    assert _run("freeze-producers.sh", tmp_path) == ["stop orders-producer.service payments-producer.service"]
    assert _run("stop-consumers.sh", tmp_path)[-1] == "stop billing-consumer.service"
    _run("switch-clients.sh", tmp_path, CUTOVER_ACTIVE="new", CUTOVER_OLD_BOOTSTRAP="old:9092",
         CUTOVER_NEW_BOOTSTRAP="new-1:9092,new-2:9092")
    assert (tmp_path / "clients" / "bootstrap.env").read_text() == "KAFKA_BOOTSTRAP_SERVERS=new-1:9092,new-2:9092\n"
    assert list((tmp_path / "clients").iterdir()) == [tmp_path / "clients" / "bootstrap.env"]  # no temporary left
    assert _run("resume.sh", tmp_path)[-1] == \
        "start orders-producer.service payments-producer.service billing-consumer.service"
    _run("start-old-writer.sh", tmp_path, CUTOVER_TABLE="legacy.orders", CUTOVER_OFFSETS='{"orders": {"0": 42}}')
    assert (tmp_path / "offsets" / "legacy.orders.offsets.json").read_text() == '{"orders": {"0": 42}}\n'
    assert _run("stop-old-writer.sh", tmp_path, CUTOVER_TABLE="legacy.orders")[-1] == \
        "stop old-writer@legacy.orders.service"


def test_switch_clients_refuses_an_unknown_side(tmp_path: Path) -> None:
    done = subprocess.run([str(REPO / "samples" / "hooks" / "switch-clients.sh")], capture_output=True, text=True,
                          check=False, env={"PATH": os.environ["PATH"], "CUTOVER_ACTIVE": "both",
                                            "CUTOVER_OLD_BOOTSTRAP": "a", "CUTOVER_NEW_BOOTSTRAP": "b",
                                            "CLIENT_ENV_FILE": str(tmp_path / "b.env")})
    assert done.returncode == 2 and "unknown CUTOVER_ACTIVE 'both'" in done.stderr
    assert not (tmp_path / "b.env").exists()


def test_the_plan_schema_takes_every_sample_and_refuses_a_wrong_key_or_choice() -> None:
    import json

    import jsonschema
    import yaml

    from tests.conftest import cutover

    run = cutover("plan", "schema")
    assert run.code == 0, run.err
    schema = json.loads(run.out)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for sample in SAMPLES:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(sample.read_text()))]
        assert errors == [], (sample.name, errors)
    wrong = yaml.safe_load((REPO / "samples" / "minimal.yaml").read_text())
    wrong["mirorr"] = {}
    wrong["tables"] = [{"topic": "t", "old": "a.b", "new": "c.d", "format": "xml"}]
    messages = [e.message for e in validator.iter_errors(wrong)]
    assert any("'mirorr' was unexpected" in m for m in messages), messages
    assert any("'xml' is not one of" in m for m in messages), messages
    owned = schema["properties"]["rights"]["anyOf"][0]["properties"]["owned"]
    assert owned["description"].startswith("Whether cutover")
