"""`cutover assess`: read the evidence from the live clusters, registries, catalog and tables (read-only),
score it (assess/score.py), and keep what the report's charts need.

Each cluster is reached once, both side by side with the catalog and Prometheus: one that is out of reach
makes everything read from it unknown with that one reason, not asked again part after part (each ask of a
host that never answers would wait out the timeout anew), and the run ends within about one timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cutover.assess import facts, score
from cutover.assess.facts import Unknown, attempt
from cutover.assess.model import Assessment
from cutover.common import iso_z
from cutover.kafka import capabilities
from cutover.kafka.clients import ClusterRef
from cutover.output import progress
from cutover.plan import ClusterSide, Plan

if TYPE_CHECKING:
    from cutover.readers.find import Finding as ReaderFinding

T = TypeVar("T")
SIDES: tuple[ClusterSide, ...] = ("old", "new")


def assess(plan: Plan, timeout: float, sample: float = 5.0, probe: float = 3.0) -> Assessment:
    """The scorecard. `sample`: seconds over which the produce rate is measured; `probe`: seconds of the
    read probe that sizes the backfill."""
    pool = ThreadPoolExecutor(max_workers=6, thread_name_prefix="cutover-assess")
    try:
        progress("assess: reaching the old and new clusters")
        reach = {s: pool.submit(attempt, lambda s=s: _metadata(plan, s, timeout)) for s in SIDES}
        sides = {s: pool.submit(_side, plan, s, reach[s], timeout) for s in SIDES}
        lake = pool.submit(_lake, plan, timeout)
        prometheus = pool.submit(_prometheus, plan, timeout)
        target = pool.submit(_target, plan, reach["new"], timeout)
        old = _old_cluster(plan, reach["old"].result(), timeout, sample, probe)
        both = next((r for r in (reach["old"].result(), reach["new"].result()) if isinstance(r, Unknown)), None)
        rights = None if plan.spec.rights is None else _given(both, lambda: _rights(plan, timeout))
        registry = None if plan.spec.registry is None else _given(old.reach, lambda: _registry(plan, timeout))
        progress("assess: reading the catalog and the tables")
        lake_found = lake.result()
        evidence = score.Evidence(plan, old.selected, old.topics, old.groups, old.writers, old.readers,
                                  {s: f.result() for s, f in sides.items()}, rights, _tables(plan, lake_found),
                                  old.throughput, drills(plan), lake_found, prometheus.result(), registry,
                                  target.result())
    finally:  # every reading was waited for; on Ctrl-C, none is (a client may be stuck on a silent host)
        pool.shutdown(wait=False, cancel_futures=True)
    return Assessment(str(plan.file), plan.name, iso_z(), score.score(evidence), _charts(old.topics))


def _given(out_of_reach: Unknown | None, read: Callable[[], T]) -> T | Unknown:
    """The reading, or the reason its cluster is out of reach (then it is not asked again)."""
    return out_of_reach if out_of_reach is not None else attempt(read)


def _metadata(plan: Plan, side: ClusterSide, timeout: float) -> Any:
    """The cluster's metadata: whether it can be reached at all, and its brokers and topics."""
    from cutover.kafka.clients import admin, metadata

    ref = ClusterRef.of(plan, side)
    return metadata(ref, admin(ref), timeout, "reading its metadata")


@dataclass
class _OldCluster:
    """What is read from the old cluster: each part its facts, or Unknown with the reason."""

    reach: Unknown | None
    selected: list[str] | Unknown
    topics: dict[str, facts.TopicFacts] | Unknown
    groups: list[facts.GroupFacts] | Unknown
    writers: Any
    readers: list[ReaderFinding] | Unknown
    throughput: float | Unknown


def _old_cluster(plan: Plan, meta: Any, timeout: float, sample: float, probe: float) -> _OldCluster:
    if isinstance(meta, Unknown):
        progress(f"assess: {meta.reason}; what is read from the old cluster is unknown")
        return _OldCluster(meta, meta, meta, meta, meta, meta, meta)
    counts = {t: len(m.partitions) for t, m in meta.topics.items()
              if plan.spec.topics.matches(t) and not t.startswith("__")}
    names = sorted(counts)
    progress(f"assess: reading {len(names)} selected topic(s) (settings, offsets, retained span; the produce rate "
             f"over {sample:g}s)")
    topics = attempt(lambda: facts.topics(plan, "old", names, timeout, sample))
    progress("assess: reading the consumer groups, producers and readers")
    groups = attempt(lambda: facts.groups(plan, "old", timeout))
    writers = attempt(lambda: _writers(plan, counts, timeout))
    readers = attempt(lambda: _readers(plan, timeout))
    progress(f"assess: the read probe ({probe:g}s)")
    throughput = attempt(lambda: facts.read_throughput(plan, "old", counts, probe))
    return _OldCluster(None, names, topics, groups, writers, readers, throughput)


def _writers(plan: Plan, counts: dict[str, int], timeout: float) -> Any:
    from cutover.kafka import producers

    if not any(counts.values()):  # no partition to write to: none of its producers matter (and no JVM starts)
        return producers.Writers((), ())
    return producers.read(ClusterRef.of(plan, "old"), [(t, p) for t, n in counts.items() for p in range(n)],
                          timeout)


def _readers(plan: Plan, timeout: float) -> list[ReaderFinding]:
    from cutover.readers.find import find

    return list(find(plan, timeout).findings)


def _side(plan: Plan, side: ClusterSide, reach: Future[Any], timeout: float) -> score.Side:
    """The cluster's security (from the plan: known even out of reach) and, once reached, its brokers and
    whether it enforces ACLs."""
    from cutover.rights import inventory

    props = ClusterRef.of(plan, side).properties
    meta = reach.result()
    brokers = meta if isinstance(meta, Unknown) else len(meta.brokers)
    acls = _given(meta if isinstance(meta, Unknown) else None,
                  lambda: inventory.read(plan, side, timeout, quotas=False).authorizer.enabled)
    return score.Side(props.get("security.protocol", "PLAINTEXT").upper(),
                      props.get("sasl.mechanism") or props.get("sasl.mechanisms"), brokers, acls)


def _target(plan: Plan, reach: Future[Any], timeout: float) -> capabilities.Report | Unknown:
    """What the new cluster can do: its API list and the real probe in a scratch topic, deleted after."""
    meta = reach.result()
    progress("assess: probing what the new cluster can do (a scratch topic, deleted after)")
    return _given(meta if isinstance(meta, Unknown) else None,
                  lambda: capabilities.probe(plan.cluster("new"), "new", timeout))


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
    """The catalog and the storage probed side by side (two servers: neither waits on the other)."""
    from cutover.lake import reach
    from cutover.plan import readiness

    cat = plan.spec.catalog
    if cat is None or not plan.spec.tables:
        return {}
    if readiness.sqlite_missing(plan) is not None:  # opening it would create an empty catalog: assess writes nothing
        return {"catalog": Unknown(f"catalog {cat.name}: the SQLite file {readiness.sqlite_path(cat.uri)} does not "
                                   "exist (assess does not create it): point catalog.uri at the catalog's file")}
    location = reach.storage_location(cat)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="cutover-assess-lake") as pool:
        found = pool.submit(attempt, lambda: reach.probe_catalog(cat, timeout))
        storage = None if location is None else pool.submit(
            attempt, lambda: reach.probe_storage(cat, location, timeout))
        catalog = found.result()
        out: dict[str, str | Unknown] = {
            "catalog": catalog if isinstance(catalog, Unknown) else f"answered at {reach.safe_address(cat)}"}
        if storage is not None:
            out["storage"] = storage.result()
    return out


def _tables(plan: Plan, lake: dict[str, str | Unknown]) -> dict[str, score.TableFacts | Unknown]:
    """Each table of the pairs; all unknown, with the reason, when the catalog cannot be used (each table
    asked of a catalog that never answers would wait anew) or the plan names none."""
    catalog = lake.get("catalog")
    if plan.spec.catalog is None:
        catalog = Unknown("the plan names no catalog (catalog: in the plan), so its tables cannot be read")
    out: dict[str, score.TableFacts | Unknown] = {}
    for pair in plan.spec.tables:
        for name in (pair.old, pair.new):
            out[name] = catalog if isinstance(catalog, Unknown) else attempt(lambda n=name: _table(plan, n))  # type: ignore[misc]
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

    return json_lines(plan.journal_dir / "drills.jsonl")


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
        out[t] = {"records": f.records, "records_exact": f.exact, "bytes": round(f.bytes), "rate": f.rate,
                  "recent_rate": f.recent_rate,
                  "average_rate": f.average_rate, "replay_window_seconds": None if seconds == float("inf")
                  else seconds, "replay_window_decided_by": why}
    return out
