"""`cutover assess`: read the evidence from the live clusters, registries, catalog and tables (read-only),
score it (assess/score.py), and keep what the report's charts need."""

from __future__ import annotations

import time
from typing import Any

from cutover.assess import facts, score
from cutover.assess.facts import Unknown, attempt
from cutover.assess.model import Assessment
from cutover.common import iso_z
from cutover.kafka.clients import ClusterRef
from cutover.output import progress
from cutover.plan import ClusterSide, Plan


def assess(plan: Plan, timeout: float, sample: float = 5.0, probe: float = 3.0) -> Assessment:
    """The scorecard. `sample`: seconds over which the produce rate is measured; `probe`: seconds of the
    read probe that sizes the backfill."""
    progress("assess: listing the old cluster's topics")
    selected = attempt(lambda: _selected(plan, timeout))
    names = [] if isinstance(selected, Unknown) else selected
    progress(f"assess: reading {len(names)} selected topic(s) (settings, offsets, retained span; the produce rate "
             f"over {sample:.0f}s)")
    topics = attempt(lambda: facts.topics(plan, "old", names, timeout, sample))
    progress("assess: reading the consumer groups, producers and readers")
    groups = attempt(lambda: facts.groups(plan, "old", timeout))
    writers = attempt(lambda: _writers(plan, names, topics, timeout))
    readers = attempt(lambda: _readers(plan, timeout))
    sides: dict[str, score.Side | Unknown] = {s: attempt(lambda s=s: _side(plan, s, timeout))  # type: ignore[misc]
                                              for s in ("old", "new")}
    rights = None if plan.spec.rights is None else attempt(lambda: _rights(plan, timeout))
    registry = None if plan.spec.registry is None else attempt(lambda: _registry(plan, timeout))
    progress("assess: reading the catalog and the tables")
    lake = _lake(plan, timeout)
    tables: dict[str, score.TableFacts | Unknown] = {}
    for pair in plan.spec.tables:
        for name in (pair.old, pair.new):
            tables[name] = attempt(lambda n=name: _table(plan, n))  # type: ignore[misc]
    progress(f"assess: the read probe ({probe:.0f}s)")
    throughput = attempt(lambda: facts.read_throughput(plan, "old", names, probe, timeout))
    evidence = score.Evidence(plan, selected, topics, groups, writers, readers, sides, rights, tables, throughput,
                              drills(plan), lake, _prometheus(plan, timeout), registry)
    return Assessment(str(plan.file), plan.name, iso_z(), score.score(evidence), _charts(topics))


def _selected(plan: Plan, timeout: float) -> list[str]:
    from cutover.kafka.inspect import partition_counts

    return sorted(t for t in partition_counts(ClusterRef.of(plan, "old"), timeout)
                  if plan.spec.topics.matches(t) and not t.startswith("__"))


def _writers(plan: Plan, names: list[str], topics: dict[str, facts.TopicFacts] | Unknown, timeout: float) -> Any:
    from cutover.kafka import producers
    from cutover.kafka.inspect import partition_counts

    ref = ClusterRef.of(plan, "old")
    counts = {t: f.partitions for t, f in topics.items()} if not isinstance(topics, Unknown) else \
        partition_counts(ref, timeout)  # the topics' reading failed: their partitions asked again
    return producers.read(ref, [(t, p) for t in names for p in range(counts.get(t, 0))], timeout)


def _readers(plan: Plan, timeout: float) -> list[dict[str, Any]]:
    from cutover.readers.find import find

    return list(find(plan, timeout)["findings"])


def _side(plan: Plan, side: ClusterSide, timeout: float) -> score.Side:
    from cutover.kafka.inspect import view
    from cutover.rights import inventory

    ref = ClusterRef.of(plan, side)
    props = ref.properties
    brokers = attempt(lambda: view(ref, timeout).brokers)
    acls = attempt(lambda: inventory.read(plan, side, timeout, quotas=False).authorizer.enabled)
    return score.Side(props.get("security.protocol", "PLAINTEXT").upper(),
                      props.get("sasl.mechanism") or props.get("sasl.mechanisms"), brokers, acls)


def _rights(plan: Plan, timeout: float) -> dict[str, Any]:
    from cutover.rights import run

    result = run.audit(plan, "forward", timeout).as_dict()
    return {"passed": result["passed"], "counts": result["counts"]}


def _registry(plan: Plan, timeout: float) -> dict[str, Any]:
    from cutover.registry.audit import audit

    result = audit(plan, "old", timeout=timeout)
    return {"passed": result.passed, "records": result.records, "schema_ids": len(result.ids),
            "failures": [f.text for f in result.failures[:5]]}


def _lake(plan: Plan, timeout: float) -> dict[str, str | Unknown]:
    from cutover.lake import reach

    cat = plan.spec.catalog
    if cat is None or not plan.spec.tables:
        return {}
    out: dict[str, str | Unknown] = {}
    found = attempt(lambda: reach.probe_catalog(cat, timeout))
    out["catalog"] = found if isinstance(found, Unknown) else f"answered at {reach.safe_address(cat)}"
    location = reach.storage_location(cat)
    if location is not None:
        out["storage"] = attempt(lambda: reach.probe_storage(cat, location, timeout))
    return out


def _table(plan: Plan, name: str) -> score.TableFacts:
    from cutover.lake import tables

    tbl = tables.load_table(plan, name)
    if tbl is None:
        return score.TableFacts(name, False)
    snaps = list(tbl.snapshots())
    day = time.time() * 1000 - 86_400_000
    current = tbl.current_snapshot()
    summary = dict(current.summary.additional_properties) if current is not None and current.summary else {}
    return score.TableFacts(name, True, tbl.metadata.format_version, str(tbl.spec()), len(snaps),
                            sum(1 for s in snaps if s.timestamp_ms >= day), int(summary.get("total-files-size", 0)),
                            dict(tbl.properties))


def drills(plan: Plan) -> list[dict[str, Any]]:
    """The drills run with this plan (drills.jsonl in its journal folder), oldest first."""
    from cutover.common import json_lines
    from cutover.switch import journal

    return json_lines(journal.directory(plan) / "drills.jsonl")


def _prometheus(plan: Plan, timeout: float) -> dict[str, Any] | Unknown | None:
    url = plan.spec.observability.prometheus if plan.spec.observability else None
    if not url:
        return None

    def ask() -> dict[str, Any]:
        from cutover.assess import prometheus

        return prometheus.cutover_targets(url, timeout)

    return attempt(ask)


def _charts(topics: dict[str, facts.TopicFacts] | Unknown) -> dict[str, dict[str, Any]]:
    if isinstance(topics, Unknown):
        return {}
    out = {}
    for t, f in sorted(topics.items()):
        seconds, why = score.replay_window(f)
        out[t] = {"records": f.records, "bytes": round(f.bytes), "rate": f.rate, "recent_rate": f.recent_rate,
                  "average_rate": f.average_rate, "replay_window_seconds": None if seconds == float("inf")
                  else seconds, "replay_window_decided_by": why}
    return out
