"""The one operational view against a real Prometheus (Debian's prometheus package: scripts/lake-deps
installs it; CI runs these in its lake-rest lane): promtool checks the shipped config and rules and runs
the rules' unit tests; a Prometheus scrapes a running mirror and a shadow, and every series the Grafana
dashboard uses exists there, every panel's query evaluates, the rules are loaded, and `cutover assess`
reads the targets and the rules from it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import derive
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce
from tests.integration.mirror_util import commit, scoped_plan, start_mirror, stop
from tests.integration.shadow_util import json_values, shadow, shadow_plan
from tests.unit.test_observe_files import exprs

pytestmark = [pytest.mark.observe, pytest.mark.usefixtures("spark")]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SCHEMA = [{"name": "id", "type": "long", "nullable": False}, {"name": "name", "type": "string"},
          {"name": "amount", "type": "decimal(10,2)"}]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: scripts/lake-deps installs Debian's prometheus package (with promtool)")
    return found


def test_promtool_checks_the_config_and_the_rules_and_runs_their_unit_tests() -> None:
    promtool = _tool("promtool")
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "cutover-rules.yml"],
                 ["test", "rules", "cutover-rules.test.yml"]):
        done = subprocess.run([promtool, *args], cwd=DEPLOY / "prometheus", capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0 and "SUCCESS" in done.stdout + done.stderr, (args, done.stdout, done.stderr)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Prometheus on loopback with cutover's rules; its scrape config is written by the test (then reloaded)."""
    port = free_port()
    folder = tmp_path / "prometheus"
    folder.mkdir()
    shutil.copy(DEPLOY / "prometheus" / "cutover-rules.yml", folder)
    config = folder / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                                      "rule_files": ["cutover-rules.yml"], "scrape_configs": []}))
    with (folder / "log").open("w") as log:
        proc = subprocess.Popen([_tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={folder}/data",
                                 f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"],
                                stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(url), 60, "Prometheus to answer")
        yield url, config
    finally:
        proc.terminate()
        proc.wait(30)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _api(url: str, path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}/api/v1/{path}{query}", timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]


def _scrape(url: str, config: Path, jobs: dict[str, int]) -> None:
    doc = yaml.safe_load(config.read_text())
    doc["scrape_configs"] = [{"job_name": j, "static_configs": [{"targets": [f"127.0.0.1:{p}"]}]}
                             for j, p in jobs.items()]
    config.write_text(yaml.safe_dump(doc))
    urllib.request.urlopen(urllib.request.Request(f"{url}/-/reload", method="POST"), timeout=10).close()


def test_prometheus_scrapes_the_mirror_and_the_shadow_and_has_every_series_of_the_dashboard(
        sandbox: Sandbox, prometheus: tuple[str, Path], ns: str, tmp_path: Path) -> None:
    url, config = prometheus
    topic = f"{ns}.orders"
    mirror_plan = scoped_plan(sandbox.plan_file, ns, tmp_path)
    plan = shadow_plan(mirror_plan, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": f"{ns}.orders",
                                                    "schema": SCHEMA}])
    old = plan.cluster("old")
    create_topic(old, topic, 2)
    produce(old, topic, [*json_values(20), {"value": b"not json", "partition": 0}])
    commit(old, f"{ns}.billing", {(topic, 0): 3})  # a group for the mirror to translate
    mirror_port, shadow_port, exporter_port = free_port(), free_port(), free_port()
    _scrape(url, config, {"cutover-mirror": mirror_port, "cutover-shadow": shadow_port,
                          "cutover-exporter": exporter_port})
    mirror = start_mirror(mirror_plan, "--metrics-port", str(mirror_port))
    exporter = subprocess.Popen([sys.executable, "-m", "cutover", "exporter", "--plan", str(plan.file), "--port",
                                 str(exporter_port), "--interval", "2"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
    try:
        lag = 'sum(cutover_mirror_lag_records{job="cutover-mirror"})'
        wait_for(lambda: [r["value"][1] for r in _api(url, "query", query=lag)["result"]] == ["0"], 120,
                 "Prometheus to see the mirror caught up")
        legacy = shadow_plan(mirror_plan, ns, tmp_path / "legacy", [{"topic": topic, "old": f"{ns}.x",
                                                                      "new": f"{ns}.o", "schema": SCHEMA}])
        shadow(legacy)  # the old pipeline's table, for verify to compare with
        shadow(plan, metrics_port=shadow_port)  # its metrics stay served by this process after the run
        assert cutover("verify", "--plan", str(plan.file)).code == 0  # recorded on the table: the exporter reads it
        # every series but the freeze window's, which the journal holds from the first promote on (this test
        # does not promote; tests/integration/test_switch.py checks the window the journal records)
        names = sorted({n for e in exprs() for n in re.findall(r"\b(cutover_[a-z_]+|up)\b", e)}
                       - {"cutover_switch_freeze_window_seconds"})

        def missing() -> list[str]:
            return [n for n in names if not _api(url, "series", **{"match[]": n})]

        try:
            wait_for(lambda: not missing(), 60, "Prometheus to hold every series the dashboard uses")
        except AssertionError:
            raise AssertionError(f"not in Prometheus: {missing()}") from None
        for expr in exprs():  # each panel's query evaluates in a real Prometheus
            _api(url, "query", query=expr)
        up = {r["metric"]["job"]: r["value"][1] for r in _api(url, "query", query='up{job=~"cutover.*"}')["result"]}
        assert up == {"cutover-mirror": "1", "cutover-shadow": "1", "cutover-exporter": "1"}
        phase = _api(url, "query", query="cutover_switch_phase == 1")["result"]
        assert [r["metric"]["phase"] for r in phase] == ["ready"]
        passed = _api(url, "query", query=f'cutover_verify_passed{{table="{ns}.orders"}}')["result"]
        assert [r["value"][1] for r in passed] == ["1"]
        rows = _api(url, "query", query=f'cutover_shadow_rows_total{{table="{ns}.orders"}}')["result"]
        assert [r["value"][1] for r in rows] == ["20"]
        groups = _api(url, "rules")["groups"]
        assert [(g["name"], len(g["rules"])) for g in groups] == [("cutover", 11)]
        assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups

        # assess reads the same Prometheus: the targets up and the rules loaded make observability ready
        watched = derive(plan.file, tmp_path / "watched.yaml", merge=True, observability={"prometheus": url}).file
        run = cutover("assess", "--plan", str(watched), "--sample", "0", "--probe", "0", "-o", "json")
        assert run.code in (0, 3), run.err
        row = next(r for r in run.json()["rows"] if r["key"] == "observability" and r["kind"] == "question")
        assert row["verdict"] == "ready", row
        assert sorted(t["job"] for t in row["evidence"]["targets"]) == ["cutover-exporter", "cutover-mirror",
                                                                         "cutover-shadow"]
        assert row["evidence"]["rules"] == 11
    finally:
        exporter.terminate()
        _out, err = exporter.communicate(timeout=60)
        assert exporter.returncode == 0, err
        code, _out, err = stop(mirror)
        assert code == 0, err
