"""`cutover exporter`: Prometheus metrics of everything a switch depends on that the mirror and the shadow
do not serve themselves: the switch's phase, steps and freeze window (from the plan's journal), the last
verify of each table, the catalog, the object store and the registries (probed), each mirror direction's
lag, gaps and group syncs (the reverse direction's once the reverse mirror has state), and whether the reverse
mirror runs.

It reads; it changes nothing. Every `interval` it takes a fresh snapshot, and each scrape serves the
latest one: a scrape never waits on a cluster. A part it cannot read is counted in
cutover_exporter_errors{part} and left out, the others still served.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cutover.errors import CutoverError
from cutover.plan import Plan
from cutover.plan.endpoint import Endpoint

log = logging.getLogger("cutover.exporter")
#: The switch's phases, each a series (1 for the current one), so that a dashboard draws the changes.
PHASES = ("ready", "promoting", "promoted", "rolling-back", "rolled-back", "completing", "completed",
          "cancelling", "cancelled")


#: Every metric the exporter serves: name -> (meaning, labels).
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cutover_switch_phase": ("The switch's phase (1: the current one)", ("phase",)),
    "cutover_switch_cycle": ("Promote/rollback cycles begun", ()),
    "cutover_switch_running": ("1 while a promote, rollback, complete or cancel holds the journal", ()),
    "cutover_switch_step_state": ("The latest attempt's steps: 1 for the step's outcome",
                                  ("action", "step", "outcome")),
    "cutover_switch_step_duration_seconds": ("How long each step of the latest attempt took", ("action", "step")),
    "cutover_switch_freeze_window_seconds": ("The latest attempt's freeze window: producers frozen to clients "
                                             "switched", ("action",)),
    "cutover_reverse_mirror_running": ("1 while the reverse mirror (new -> old) runs in the background", ()),
    "cutover_verify_passed": ("1 when the table's last verify passed its gates", ("table",)),
    "cutover_verify_timestamp_seconds": ("When the table's last verify ran", ("table",)),
    "cutover_mirror_state_lag_records": ("Records behind, as the mirror's state and the source's end offsets say "
                                         "(the mirror's own metrics give them per partition); reverse: none until "
                                         "the reverse mirror has state", ("direction",)),
    "cutover_mirror_gaps": ("Ranges the mirror could not copy (retention deleted them first): DATA LOSS when above 0",
                            ("direction",)),
    "cutover_group_synced_timestamp_seconds": ("When the group's offsets were last translated to the target",
                                               ("direction", "group")),
    "cutover_catalog_up": ("1 when the catalog answered the exporter's probe", ()),
    "cutover_catalog_probe_seconds": ("How long the catalog probe took", ()),
    "cutover_storage_up": ("1 when the object store (or warehouse folder) answered the exporter's probe", ()),
    "cutover_storage_probe_seconds": ("How long the storage probe took", ()),
    "cutover_registry_up": ("1 when the schema registry answered the exporter's probe", ("side",)),
    "cutover_registry_probe_seconds": ("How long the registry probe took", ("side",)),
    "cutover_exporter_errors": ("Snapshots in which this part could not be read (see the exporter's log)", ("part",)),
    "cutover_exporter_snapshot_timestamp_seconds": ("When the served snapshot was taken", ()),
}


def reference() -> str:
    """Every metric the exporter serves, as a Markdown table (the docs site's metrics reference)."""
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    rows += [f"| `{name}` | gauge | {', '.join(labels)} | {doc} |" for name, (doc, labels) in METRICS.items()]
    return "\n".join(rows) + "\n"


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class _Families:
    """The families of one snapshot, built as the parts are read."""

    def __init__(self) -> None:
        self.families: dict[str, GaugeMetricFamily] = {}

    def set(self, name: str, value: float, **labels: str) -> None:
        doc, names = METRICS[name]
        assert set(labels) == set(names), (name, labels)
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = GaugeMetricFamily(name, doc, labels=list(names))
        family.add_metric([labels[k] for k in names], value)


class Exporter(Collector):
    """Serves the latest snapshot; `refresh` takes a new one."""

    def __init__(self, plan: Plan, timeout: float) -> None:
        self.plan, self.timeout = plan, timeout
        self.latest: list[Metric] = []
        self.errors: dict[str, int] = {}
        self.lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            yield from self.latest

    def refresh(self) -> None:
        out = _Families()
        for part, read in (("switch", self._switch), ("mirror", self._mirror), ("lake", self._lake),
                           ("registry", self._registry)):
            try:
                read(out)
            except CutoverError as exc:
                self.errors[part] = self.errors.get(part, 0) + 1
                log.warning("exporter: %s: %s", part, exc.message)
        for part in ("switch", "mirror", "lake", "registry"):
            out.set("cutover_exporter_errors", self.errors.get(part, 0), part=part)
        out.set("cutover_exporter_snapshot_timestamp_seconds", time.time())
        with self.lock:
            self.latest = list(out.families.values())

    def _switch(self, out: _Families) -> None:
        from cutover.switch import status

        s = status.status(self.plan, self.timeout, mirrors=False)  # _mirror reads the mirrors' state, once
        for phase in PHASES:
            out.set("cutover_switch_phase", float(s["phase"] == phase), phase=phase)
        out.set("cutover_switch_cycle", float(s.get("cycle") or 0))
        out.set("cutover_switch_running", float(bool(s.get("running"))))
        action = s.get("action") or "none"
        for step in s.get("steps") or []:
            out.set("cutover_switch_step_state", 1.0, action=action, step=step["name"], outcome=step["outcome"])
            if step.get("seconds") is not None:
                out.set("cutover_switch_step_duration_seconds", float(step["seconds"]), action=action,
                        step=step["name"])
        frozen = s.get("freeze_window") or {}
        if frozen.get("seconds") is not None:
            out.set("cutover_switch_freeze_window_seconds", float(frozen["seconds"]), action=action)
        out.set("cutover_reverse_mirror_running", float(bool((s.get("mirror") or {}).get("reverse_process"))))
        verify = s.get("verify") or {}
        if "error" in verify:
            raise CutoverError(f"the last verify results: {verify['error']}")
        for table, last in verify.items():
            if last is None:
                continue
            out.set("cutover_verify_passed", float(last["passed"]),
                    table=table)
            at = _epoch(last.get("at"))
            if at is not None:
                out.set("cutover_verify_timestamp_seconds", at, table=table)

    def _mirror(self, out: _Families) -> None:
        from cutover.mirror import status

        for direction in ("forward", "reverse"):
            s = status.status(self.plan, direction, self.timeout)
            if direction == "reverse" and not s.started:
                continue  # it starts at promote, at the new cluster's end offsets: no lag to report before
            out.set("cutover_mirror_state_lag_records", float(s.lag), direction=direction)
            out.set("cutover_mirror_gaps", float(len(s.gaps)), direction=direction)
            for g in s.groups:
                synced = _epoch(g.last_sync)
                if synced is not None:
                    out.set("cutover_group_synced_timestamp_seconds", synced, direction=direction, group=g.group)

    def _lake(self, out: _Families) -> None:
        from cutover.lake import reach

        cat = self.plan.spec.catalog
        if cat is None:
            return
        for part, probe in (("catalog", lambda: reach.probe_catalog(cat, self.timeout)),
                            ("storage", lambda: _storage(cat, self.timeout))):
            up, seconds = _timed(probe)
            out.set(f"cutover_{part}_up", float(up))
            out.set(f"cutover_{part}_probe_seconds", seconds)

    def _registry(self, out: _Families) -> None:
        if self.plan.spec.registry is None:
            return
        from cutover.registry import sync

        old, new = sync.clients(self.plan, self.timeout)
        for side, client in (("old", old), ("new", new)):
            up, seconds = _timed(client.probe)
            out.set("cutover_registry_up", float(up), side=side)
            out.set("cutover_registry_probe_seconds", seconds, side=side)


def _storage(cat: Any, timeout: float) -> str:
    from cutover.lake import reach

    location = reach.storage_location(cat)
    if location is None:
        raise CutoverError("no storage location in the plan's catalog")
    return reach.probe_storage(cat, location, timeout)


def _timed(probe: Callable[[], object]) -> tuple[bool, float]:
    began = time.monotonic()
    try:
        probe()
        return True, time.monotonic() - began
    except CutoverError as exc:
        log.warning("exporter: %s", exc.message)
        return False, time.monotonic() - began


def serve(plan: Plan, at: Endpoint, interval: float, timeout: float, stop: threading.Event) -> None:
    """Serve the exporter's metrics at `at` until `stop` is set, a snapshot every `interval` seconds."""
    from cutover.mirror.metrics import serve as http
    from cutover.output import progress

    exporter = Exporter(plan, timeout)
    registry = CollectorRegistry()
    registry.register(exporter)
    http(registry, at, "exporter")  # a port in use is named before anything is read
    progress(f"exporter: a snapshot every {interval:.0f}s")
    while True:
        exporter.refresh()
        if stop.wait(interval):
            return
