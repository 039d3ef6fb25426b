"""The one operational view against a real Prometheus (Debian's prometheus package: scripts/lake-deps
installs it; CI runs these in its lake-rest lane): promtool checks the shipped config and rules and runs
the rules' unit tests; a Prometheus scrapes every part while a drill switches and back (the mirror both
ways, the drill's shadow, the exporter, each on the plan's observability.ports), and every series the
Grafana dashboard uses exists there, every panel's query evaluates, the rules are loaded, the drill's
report holds the same timeline, and `cutover assess` reads the targets and the rules from it."""

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
from tests.integration.mirror_util import commit
from tests.integration.test_drill import drill_plan
from tests.unit.test_monitoring_files import exprs

pytestmark = [pytest.mark.observe, pytest.mark.usefixtures("spark")]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

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


#: A switch and back, as a drill runs it: every part of the view runs (the mirror both ways, the shadow, the old
#: pipeline, verify, promote's freeze window, rollback), each scraped where the plan's observability.ports say.
RUNBOOK = [
    {"name": "sample traffic", "action": "traffic.start", "with": {"rate": 100}},
    {"name": "start the mirror", "action": "mirror.start"},
    {"name": "traffic on the old cluster", "action": "traffic.wait", "with": {"records": 150}},
    {"name": "the old pipeline", "action": "legacy.run"},
    {"name": "the mirror keeps up", "expect": "lag-below", "with": {"records": 500, "within": "120s"}},
    {"name": "the shadow", "action": "shadow.run"},
    {"name": "the tables agree", "expect": "verify-passed"},
    {"name": "promote", "action": "promote"},
    # 5 s or more of the reverse mirror copying: it reports (and so serves its lag) every 5 s
    {"name": "traffic on the new cluster", "action": "traffic.wait", "with": {"records": 500}},
    {"name": "the canonical table's writer goes on from the new cluster", "action": "legacy.run",
     "with": {"cluster": "new"}},
    {"name": "rollback", "action": "rollback"},
    {"name": "stop the traffic", "action": "traffic.stop"},
]


def test_prometheus_scrapes_every_part_during_a_drill_and_has_every_series_of_the_dashboard(
        sandbox: Sandbox, prometheus: tuple[str, Path], ns: str, tmp_path: Path) -> None:
    url, config = prometheus
    ports = {"mirror": free_port(), "reverse_mirror": free_port(), "shadow": free_port(), "exporter": free_port()}
    plan = derive(drill_plan(sandbox, ns, tmp_path).file, tmp_path / "observed.yaml", merge=True,
                  observability={"prometheus": url, "ports": ports})
    topic = f"{ns}.orders"
    old = plan.cluster("old")
    create_topic(old, topic, 3)
    produce(old, topic, [{"value": b"not json", "partition": 0}])  # a dead letter, on both tables
    commit(old, f"{ns}.billing", {(topic, 0): 1})  # a group for the mirror to translate
    jobs = {f"cutover-{part.replace('_', '-')}": port for part, port in ports.items()}
    _scrape(url, config, jobs)
    report = tmp_path / "report"
    rb = tmp_path / "observed.yaml.runbook"
    rb.write_text(yaml.safe_dump({"name": "observed-switch", "purpose": "a switch and back, watched",
                                  "steps": RUNBOOK}))
    drill = subprocess.Popen([sys.executable, "-m", "cutover", "drill", str(rb), "--plan", str(plan.file), "--auto",
                              "--report", str(report), "--dir", str(sandbox.dir), "-o", "json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    exporter = None
    try:
        # the rehearsal's switch journal is the drill's own (its switch-plan.yaml): the exporter reads that
        switch_plan = report / "switch-plan.yaml"
        wait_for(lambda: switch_plan.exists() or drill.poll() is not None, 120, "the drill to write its switch plan")
        exporter = subprocess.Popen([sys.executable, "-m", "cutover", "exporter", "--plan", str(switch_plan),
                                     "--interval", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        out, err = drill.communicate(timeout=900)
        assert drill.returncode == 0, err[-3000:]
        result = json.loads(out)

        # every series the dashboard uses was scraped during the drill: the freeze window of its promote and
        # the reverse mirror's lag included
        names = sorted({n for e in exprs() for n in re.findall(r"\b(cutover_[a-z_]+|up)\b", e)})

        def missing() -> list[str]:
            return [n for n in names if not _api(url, "series", **{"match[]": n})]

        try:
            wait_for(lambda: not missing(), 60, "Prometheus to hold every series the dashboard uses")
        except AssertionError:
            raise AssertionError(f"not in Prometheus: {missing()}") from None
        for expr in exprs():  # each panel's query evaluates in a real Prometheus
            _api(url, "query", query=expr)
        was_up = {r["metric"]["job"]: r["value"][1] for r in
                  _api(url, "query", query='max_over_time(up{job=~"cutover.*"}[15m])')["result"]}
        assert was_up == {job: "1" for job in jobs}, was_up
        reverse = _api(url, "query", query='max_over_time(cutover_mirror_lag_records{direction="reverse"}[15m])')
        assert {r["metric"]["job"] for r in reverse["result"]} == {"cutover-reverse-mirror"}, reverse
        freeze = _api(url, "query", query="cutover_switch_freeze_window_seconds")["result"]
        promoted = next(s for s in result["steps"] if s["name"] == "promote")["detail"]
        assert {r["metric"]["action"] for r in freeze} == {"rollback"}, freeze  # the last switch's window
        assert promoted, result["steps"]
        written = sum(sum(s["detail"]["tables"].values()) for s in result["steps"] if s["op"] == "shadow.run")
        rows = _api(url, "query", query=f'max_over_time(cutover_shadow_rows_total{{table="{ns}.orders"}}[15m])')
        assert [r["value"][1] for r in rows["result"]] == [str(written)] and written > 150, (rows, written)
        letters = _api(url, "query", query=f'max_over_time(cutover_shadow_dead_letters_total{{table="{ns}.orders"}}'
                                           "[15m])")["result"]
        assert [r["value"][1] for r in letters] == ["1"], letters
        passed = _api(url, "query", query=f'max_over_time(cutover_verify_passed{{table="{ns}.orders"}}[15m])')
        assert [r["value"][1] for r in passed["result"]] == ["1"], passed
        groups = _api(url, "rules")["groups"]
        assert [(g["name"], len(g["rules"])) for g in groups] == [("cutover", 11)]
        assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups

        # the drill's report tells the same story: both mirror directions, the shadow's commits and dead
        # letters, the catalog and the storage up, sampled from the same code
        series = [s["series"] for s in result["samples"] if s.get("series")]
        lags = [s.get("cutover_mirror_state_lag_records", {}) for s in series]
        assert any("forward" in x for x in lags) and any("reverse" in x for x in lags), lags
        assert series[-1]["cutover_shadow_rows_total"] == {f"{ns}.orders": float(written)}
        assert series[-1]["cutover_shadow_dead_letters_total"] == {f"{ns}.orders": 1.0}
        assert all(s.get("cutover_catalog_up") == {"": 1.0} and s.get("cutover_storage_up") == {"": 1.0}
                   for s in series), series
        assert {p for s in series for p, v in s["cutover_switch_phase"].items() if v} >= {"ready", "promoted"}
        page = (report / "report.html").read_text()
        for title in ("Mirror lag, both ways", "The shadow: lag and rows committed", "Commit health and dead letters",
                      "Table freshness", "Catalog, storage and registries"):
            assert f"<h2>{title}</h2>" in page, title

        # assess reads the same Prometheus: every port of the plan is a target and the rules are loaded; the
        # parts the drill ran are down now that it has ended, and assess says so
        run = cutover("assess", "--plan", str(switch_plan), "--sample", "0", "--probe", "0", "-o", "json")
        assert run.code in (0, 3), run.err
        row = next(r for r in run.json()["rows"] if r["key"] == "observability" and r["kind"] == "question")
        assert sorted(t["job"] for t in row["evidence"]["targets"]) == sorted(jobs)
        assert row["evidence"]["rules"] == 11 and row["evidence"]["unscraped_ports"] == {}
        down = next(f["reason"] for f in row["findings"])
        assert row["verdict"] == "risk" and down.startswith("3 cutover target(s) down"), row
        assert str(ports["exporter"]) not in down
    finally:
        if drill.poll() is None:
            drill.terminate()
            drill.communicate(timeout=120)
        if exporter is not None:
            exporter.terminate()
            _out, err = exporter.communicate(timeout=60)
            assert exporter.returncode == 0, err
