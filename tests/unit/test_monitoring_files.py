"""The shipped Grafana dashboard and Prometheus files, checked against the metrics cutover serves: a panel
or a rule that names a metric no part serves would show nothing (or never fire). promtool and a real
Prometheus check them further in tests/integration/test_monitoring.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from cutover.mirror.metrics import Metrics
from cutover.shadow.metrics import ShadowMetrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
#: Prometheus' own series the files may use besides cutover's.
PROMETHEUS = {"up", "ALERTS"}
_NAME = re.compile(r"\b(cutover_[a-z_]+|up|ALERTS)\b")


def served() -> set[str]:
    """Every sample name the mirror and the shadow serve (a counter's _total, a histogram's _bucket ...)."""
    from cutover.observe.exporter import METRICS

    names = set(METRICS)
    for part in (Metrics(None), ShadowMetrics(None)):
        for family in part.registry.collect():
            kind = family.type
            names |= {f"{family.name}_total"} if kind == "counter" else {
                f"{family.name}{s}" for s in ("_bucket", "_sum", "_count")} if kind == "histogram" else {family.name}
    return names


def dashboard() -> dict:  # type: ignore[type-arg]
    return json.loads((DEPLOY / "grafana" / "cutover-dashboard.json").read_text())  # type: ignore[no-any-return]


def exprs() -> list[str]:
    d = dashboard()
    return [t["expr"] for p in d["panels"] for t in p["targets"]] + [a["expr"] for a in d["annotations"]["list"]
                                                                      if "expr" in a]


def test_every_metric_the_dashboard_and_the_rules_name_is_served() -> None:
    known = served() | PROMETHEUS
    rules = yaml.safe_load((DEPLOY / "prometheus" / "cutover-rules.yml").read_text())
    named = {n for e in exprs() + [r["expr"] for g in rules["groups"] for r in g["rules"]] for n in _NAME.findall(e)}
    assert named - known == set(), named - known
    # every metric of the shadow and the mirror's lag is on the dashboard
    shown = {n for e in exprs() for n in _NAME.findall(e)}
    shadow = {n for n in served() if n.startswith("cutover_shadow_")} - {
        "cutover_shadow_batch_duration_seconds_sum", "cutover_shadow_batch_duration_seconds_count"}
    assert shadow - shown == set() and "cutover_mirror_lag_records" in shown
    assert {"cutover_switch_phase", "cutover_catalog_up", "cutover_storage_up", "cutover_verify_passed",
            "cutover_mirror_gaps"} <= shown


def test_the_dashboard_is_a_grafana_dashboard_on_one_timeline() -> None:
    d = dashboard()
    assert d["uid"] == "cutover-migration" and d["schemaVersion"] >= 36
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for p in d["panels"]:
        assert p["type"] == "timeseries" and p["datasource"]["uid"] == "${datasource}", p["title"]
        assert set(p["gridPos"]) == {"x", "y", "w", "h"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        assert p["targets"] and all(t["refId"] and t["expr"] for t in p["targets"])
    assert [v["name"] for v in d["templating"]["list"]] == ["datasource"]
    # no two panels overlap
    cells = [(x, y) for p in d["panels"] for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
             for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])]
    assert len(cells) == len(set(cells))


def test_the_scrape_config_names_jobs_as_the_rules_and_assess_expect() -> None:
    from cutover.assess.prometheus import PREFIX

    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["cutover-rules.yml"]
    assert all(j["job_name"].startswith(PREFIX) for j in config["scrape_configs"])
    rules = yaml.safe_load((DEPLOY / "prometheus" / "cutover-rules.yml").read_text())
    assert [g["name"] for g in rules["groups"]] == [PREFIX]


def test_the_scrape_config_scrapes_every_port_of_the_sample_plan() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = {int(t.rsplit(":", 1)[1]) for j in config["scrape_configs"] for c in j["static_configs"]
               for t in c["targets"]}
    sample = yaml.safe_load((DEPLOY.parent / "samples" / "plan.yaml").read_text())
    ports = sample["observability"]["ports"]
    assert set(ports) == {"mirror", "reverse_mirror", "shadow", "exporter"}
    assert set(ports.values()) <= targets, (ports, targets)


def test_the_readme_names_every_metric_every_part_serves_and_every_alert() -> None:
    from cutover.mirror import metrics
    from cutover.observe import exporter
    from cutover.shadow.metrics import ShadowMetrics

    readme = (DEPLOY.parent / "README.md").read_text()
    served = re.findall(r"^\| `(cutover_[a-z_]+)`", metrics.reference() + metrics.reference(ShadowMetrics(None))
                        + exporter.reference(), re.M)
    assert len(served) > 30 and [m for m in served if f"`{m}`" not in readme] == []
    rules = yaml.safe_load((DEPLOY / "prometheus" / "cutover-rules.yml").read_text())
    alerts = [r["alert"] for g in rules["groups"] for r in g["rules"]]
    assert [a for a in alerts if f"`{a}`" not in readme] == []
