"""A drill's one timeline: the series of the Grafana dashboard (deploy/grafana), sampled in the drill's
process every few seconds for its report. The switch's, the mirrors', the lake's and the registries'
come from the exporter's snapshot (cutover/observe/exporter.py), the shadow's from the metrics its shadow runs
count into (shadow/metrics.py), so the report and the dashboard tell the same story from the same code.
Each table's freshness is read from its last commit, whoever wrote it (the old pipeline's table too)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cutover.report import charts

if TYPE_CHECKING:
    from prometheus_client import Metric

    from cutover.drill.context import Drill
    from cutover.observe.exporter import Exporter

log = logging.getLogger("cutover.drill")

#: The series sampled, each summed by the one label kept ("" for none): the dashboard's, as the report draws them.
KEPT = {"cutover_mirror_state_lag_records": "direction", "cutover_switch_phase": "phase",
        "cutover_catalog_up": "", "cutover_storage_up": "", "cutover_registry_up": "side",
        "cutover_verify_passed": "table", "cutover_shadow_lag_records": "table", "cutover_shadow_rows_total": "table",
        "cutover_shadow_commit_failures_total": "table", "cutover_shadow_dead_letters_total": "table"}


def flatten(families: Iterable[Metric]) -> dict[str, dict[str, float]]:
    """The kept series of `families`: name -> kept label's value -> the sum over the other labels."""
    out: dict[str, dict[str, float]] = {}
    for family in families:
        for s in family.samples:
            if s.name in KEPT:
                key = s.labels.get(KEPT[s.name], "")
                by = out.setdefault(s.name, {})
                by[key] = by.get(key, 0.0) + s.value
    return out


class Sampler:
    """Samples the view every few seconds while a drill runs. A failed reading is a gap in the charts, never a
    failed drill: what a fault takes away (the catalog, a broker) is what the charts are there to show."""

    def __init__(self, drill: Drill, every: float = 3.0) -> None:
        self.drill, self.every = drill, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-sampler", daemon=True)
        self._exporter: Exporter | None = None

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.drill.samples.append(self.sample())
            except Exception as exc:  # a gap in the charts, logged; the drill goes on
                log.warning("drill sampler: %s", exc)

    def sample(self) -> dict[str, Any]:
        from cutover.observe.exporter import Exporter

        d = self.drill
        timeout = min(5.0, d.timeout)
        if self._exporter is None:  # the switch plan: on the sandbox, the drill's own journal
            self._exporter = Exporter(d.switch_plan(), timeout)
        self._exporter.refresh()
        families = list(self._exporter.collect())
        if d.shadow_metrics is not None:
            families += list(d.shadow_metrics.registry.collect())
        series = flatten(families)
        lag = series.get("cutover_mirror_state_lag_records", {}).get("forward")
        return {"t": time.time(), "lag": lag, "series": series, "freshness": _freshness(d)}


def _freshness(d: Drill) -> dict[str, float | None]:
    from cutover.lake import tables

    fresh: dict[str, float | None] = {}
    for pair in d.plan.spec.tables:
        for name in (pair.old, pair.new):
            try:
                held = tables.table_offsets(d.plan, name)
                fresh[name] = round(time.time() - held.committed_at_ms / 1000, 1) if held.committed_at_ms else None
            except Exception:  # the catalog may be what a fault took away
                fresh[name] = None
    return fresh


def lines(samples: list[dict[str, Any]], name: str, label: str = "{}") -> dict[str, list[tuple[float, float]]]:
    """One line per value of the kept label of series `name`, named by `label`."""
    out: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for key, value in (s.get("series") or {}).get(name, {}).items():
            out.setdefault(label.format(key), []).append((s["t"], value))
    return out


def sections(r: dict[str, Any], t0: float, t1: float, events: list[charts.Event],
             spans: list[charts.Span]) -> list[str]:
    """The report's timeline: the dashboard's rows, each on the drill's time axis with the switches, the
    freeze windows and the faults marked."""
    switched = [s for s in spans if s.kind != "expected"]
    samples = r["samples"]
    fresh: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for name, age in (s.get("freshness") or {}).items():
            if age is not None:
                fresh.setdefault(name, []).append((s["t"], age))
    health = {**lines(samples, "cutover_shadow_commit_failures_total", "{} commit failures"),
              **lines(samples, "cutover_shadow_dead_letters_total", "{} dead letters")}
    up = {**lines(samples, "cutover_catalog_up", "catalog"), **lines(samples, "cutover_storage_up", "storage"),
          **lines(samples, "cutover_registry_up", "{} registry")}
    return [
        "<h2>Mirror lag, both ways</h2>",
        "<p class='note'>Records one cluster holds that its mirror has not copied to the other yet, from the "
        "mirrors' own state (the exporter's <code>cutover_mirror_state_lag_records</code>). Lines mark the "
        "switches and the faults (dashed, with their step number); grey is a freeze window. From promote on, "
        "the forward mirror is stopped by design: the old cluster takes the reverse mirror's copies, and after a "
        "rollback the clients' writes, so its lag rises without anything being lost.</p>",
        charts.time_series("mirror lag", "records", lines(samples, "cutover_mirror_state_lag_records"), t0, t1,
                           events, spans),
        "<h2>The shadow: lag and rows committed</h2>",
        "<p class='note'>Per table the shadow writes: records on the cluster its table does not hold yet "
        "(at its last commit), and the rows it committed during the drill.</p>",
        charts.time_series("shadow lag", "records", lines(samples, "cutover_shadow_lag_records"), t0, t1,
                           events, switched),
        charts.time_series("rows committed", "rows", lines(samples, "cutover_shadow_rows_total"), t0, t1, events,
                           switched),
        "<h2>Commit health and dead letters</h2>",
        "<p class='note'>Commit attempts that failed (each retried until the plan's commit timeout) and records "
        "set aside in the dead-letter table, counted from the drill's start.</p>",
        charts.time_series("commit failures and dead letters", "count", health, t0, t1, events, switched),
        "<h2>Table freshness</h2>",
        "<p class='note'>Seconds since each table's last commit. It rises whenever no writer commits to the "
        "table, also by design: the shadow's table after promote, the old pipeline between its runs.</p>",
        charts.time_series("table freshness", "seconds since the last commit", fresh, t0, t1, events, switched),
        "<h2>Catalog, storage and registries</h2>",
        "<p class='note'>Each probed every few seconds: 1 answered, 0 did not (a catalog or storage outage "
        "shows here as it does on the dashboard).</p>",
        charts.time_series("up", "1 = up", up, t0, t1, events, switched),
    ]
