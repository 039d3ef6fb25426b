"""`cutover plan check`: connect to what a plan names and report what is there.

Read-only. Every cluster and the catalog are asked within a deadline; a failure of one
is reported next to what the others answered, so one run shows everything wrong.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from cutover import interrupt
from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import ClusterView, view
from cutover.plan import ClusterSide, Plan, readiness


def offline(plan: Plan) -> dict[str, Any]:
    """The report of `plan check --offline`: the keys of `check`, with what was not asked as null."""
    from cutover.readers.translate import positions

    readers, problems = positions(plan, reach=False)
    findings = [f.as_dict() for f in readiness.offline(plan, problems)]
    return {"plan": str(plan.file), "name": plan.name, "valid": True, "offline": True, "old": None, "new": None,
            "catalog": None, "storage": None, "registry": None, "readers": readers, "reachable": None,
            "unchecked": [], "findings": findings, "ok": not findings}


def check(plan: Plan, timeout: float) -> dict[str, Any]:
    """The report; `ok` is False when any cluster, the catalog or the storage could not be used
    (`reachable`), or when a later command would refuse the plan (`findings`)."""
    sides: tuple[ClusterSide, ...] = ("old", "new")
    deadline = interrupt.report_by(timeout)  # what is asked after the first answers gets what is left
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {s: pool.submit(_viewed, plan, s, timeout) for s in sides}
        # the catalog, then the storage: each within the timeout (two servers: one that does not answer costs its
        # own wait, and its error names it), beside the clusters
        # (their clients' imports are not counted, unless the backstop needs those seconds for the report)
        lake = pool.submit(_lake_reports, plan, timeout, interrupt.last_wait_end(timeout + interrupt.SAY_WHY))
        report: dict[str, Any] = {"plan": str(plan.file), "name": plan.name, "valid": True, "offline": False}
        for side in sides:
            report[side] = _cluster_report(plan, side, futures[side].result())
        report["catalog"], report["storage"] = lake.result()
    unchecked: list[str] = []
    report["registry"] = (_registry_report(plan, _left(deadline)) if plan.spec.registry is None
                          or _in_time(deadline, unchecked, "the registries") else None)
    from cutover.readers.translate import positions

    report["readers"], problems = positions(plan)  # read once, for both
    old = report["old"]
    findings = readiness.offline(plan, problems, tables=not old["reachable"]) + readiness.online(
        plan, list(old["topics_all"]) if old["reachable"] else None, old["groups_all"] if old["reachable"] else None)
    findings += readiness.absent_tables(plan, report["catalog"].get("tables", []))
    for side, reg in (report["registry"] or {}).items():
        if reg.get("problem"):
            findings.append(readiness.Finding("registry", reg["problem"],
                                              f"grant the registry.{side} principal what cutover registry sync needs "
                                              "(README, 'Schemas and registries': Rights), or use a registry that "
                                              "takes IMPORT mode"))
    if old["reachable"] and report["new"]["reachable"] and old["cluster_id"] == report["new"]["cluster_id"]:
        findings.append(readiness.Finding("clusters", f"clusters.old and clusters.new are the same cluster (id "
                                          f"{old['cluster_id']}): the mirror would copy each topic onto itself",
                                          "give clusters.new the brokers of the cluster you are moving to"))
    for side in sides:
        if report[side]["reachable"]:
            for what, step in _cluster_steps(plan, side, report[side]):
                if _in_time(deadline, unchecked, f"the {side} cluster's {what}"):
                    findings += step(_left(deadline))
        report[side].pop("topics_all", None)
        report[side].pop("groups_all", None)
    report["unchecked"] = unchecked
    report["findings"] = [f.as_dict() for f in findings]
    report["reachable"] = (all(report[s]["reachable"] for s in sides) and report["catalog"]["reachable"] is not False
                           and report["storage"]["usable"] is not False
                           and all(r["reachable"] for r in (report["registry"] or {}).values()))
    report["ok"] = report["reachable"] and not findings and not unchecked
    return report


Step = Callable[[float], list[readiness.Finding]]


def _cluster_steps(plan: Plan, side: ClusterSide, into: dict[str, Any]) -> list[tuple[str, Step]]:
    """What is asked of a cluster once it answered its view, in order, each given what is left of the deadline."""
    steps: list[tuple[str, Step]] = [
        ("capabilities", lambda left: _capabilities(plan, side, into, left)),
        ("rights on its topics", lambda left: _rights(plan, side, list(into["topics"]), left))]
    if plan.spec.rights is not None:
        steps.append(("rights for cutover rights", lambda left: _rights_rights(plan, side, left)))
    return steps


#: Below this much time left, a step is not started: it is named as not checked instead.
STEP_MIN = 0.5


def _in_time(deadline: float, unchecked: list[str], what: str) -> bool:
    """Whether there is time left for `what`; if not, it is added to `unchecked` (said, not waited for)."""
    if deadline - time.monotonic() >= STEP_MIN:
        return True
    unchecked.append(what)
    return False


def _capabilities(plan: Plan, side: ClusterSide, into: dict[str, Any], timeout: float) -> list[readiness.Finding]:
    """What the cluster's ApiVersions answer says it can do (`capabilities` in its report); a finding for
    each capability the mirror needs of the new cluster, its target, that it lacks."""
    from cutover.kafka import capabilities

    found = capabilities.listed(plan.cluster(side), side, max(timeout, 1.0))
    into["capabilities"] = found.as_dict()
    if side != "new":
        return []
    return [readiness.Finding("capabilities", f"the new cluster lacks {f.capability.name} ({f.evidence}): "
                              f"{f.capability.without}", f"{f.capability.cutover_does}; choose a target that has "
                              f"{f.capability.name}, or see docs/limitations.md")
            for f in found.missing() if f.capability.name in capabilities.mirror_needs(plan.spec.mirror.mode)]


def _rights(plan: Plan, side: ClusterSide, topics: list[str], timeout: float) -> list[readiness.Finding]:
    """What the side's principal lacks on the selected topics that exist there."""
    from cutover.kafka.inspect import rights

    props = plan.cluster(side)
    principal = (f"User:{props['sasl.username']}" if props.get("sasl.username") else
                 "the client certificate's principal" if props.get("ssl.certificate.location") else
                 "the plan's principal")
    try:
        found = rights(ClusterRef.of(plan, side), topics, timeout)
    except CutoverError:
        return []  # the cluster answered the view a moment ago; a failure here is reported by the commands
    return readiness.rights(plan, side, principal, found.topics)


#: What `cutover rights` needs on the CLUSTER resource of each side: reading ACLs and SCRAM users
#: (DESCRIBE), quotas and broker settings (DESCRIBE_CONFIGS); on the target also creating ACLs and SCRAM
#: users (ALTER) and setting quotas (ALTER_CONFIGS).
RIGHTS_NEEDED: dict[str, dict[str, str]] = {
    "old": {"DESCRIBE": "read its ACLs and SCRAM users", "DESCRIBE_CONFIGS": "read its client quotas"},
    "new": {"DESCRIBE": "read its ACLs and SCRAM users", "DESCRIBE_CONFIGS": "read its client quotas",
            "ALTER": "create ACLs and SCRAM users", "ALTER_CONFIGS": "set client quotas"},
}


def _rights_rights(plan: Plan, side: ClusterSide, timeout: float) -> list[readiness.Finding]:
    """What cutover's principal lacks on the cluster for `cutover rights` (KIP-430: the cluster says)."""
    from cutover.kafka.clients import admin

    ref = ClusterRef.of(plan, side)
    client = admin(ref)
    try:
        described = client.describe_cluster(include_authorized_operations=True, request_timeout=timeout).result(
            timeout=timeout + 1)
    except (KafkaException, concurrent.futures.TimeoutError):  # it answered a moment ago: the commands name it
        return []
    allowed = {getattr(op, "name", str(op)) for op in (described.authorized_operations or [])}
    if "ALL" in allowed:
        return []  # no list at all: the broker lists them only to a principal with DESCRIBE
    return [readiness.Finding("rights", f"cutover's principal on the {side} cluster lacks {op} on the CLUSTER "
                              f"resource, which cutover rights needs to {why}",
                              f"grant it: kafka-acls --add --allow-principal <cutover's principal> --operation {op} "
                              "--cluster")
            for op, why in RIGHTS_NEEDED[side].items() if op not in allowed]


def exit_code(report: dict[str, Any]) -> int:
    """0 ready; 1 something did not answer (in time) or could not be used; 3 not ready (findings)."""
    if report["ok"]:
        return 0
    return 1 if report["reachable"] is False or report.get("unchecked") else 3


def _viewed(plan: Plan, side: ClusterSide, timeout: float) -> ClusterView | CutoverError:
    try:
        return view(ClusterRef.of(plan, side), timeout)
    except CutoverError as exc:
        return exc


def _cluster_report(plan: Plan, side: ClusterSide, v: ClusterView | CutoverError | interrupt.Late) -> dict[str, Any]:
    base = {"bootstrap": plan.cluster(side).get("bootstrap.servers")}
    if isinstance(v, interrupt.Late):
        return {**base, "reachable": False, "error": f"the {side} cluster {v.message}",
                "fix": "check that its brokers answer, or give a longer --timeout"}
    if isinstance(v, CutoverError):
        return {**base, "reachable": False, "error": v.message, "fix": v.fix}
    topics = plan.spec.topics.select(list(v.topics))
    return {
        **base,
        "reachable": True,
        "cluster_id": v.cluster_id,
        "brokers": v.brokers,
        "topics": {t: v.topics[t] for t in topics},
        "topics_total": len(v.topics),
        "groups": plan.spec.groups.select(v.groups),
        "groups_total": len(v.groups),
        "topics_all": list(v.topics),
        "groups_all": list(v.groups),
    }


def _registry_report(plan: Plan, timeout: float) -> dict[str, Any] | None:
    """Each registry: does it answer the Confluent API, and can cutover's principal do what the sync needs there
    (read everywhere; on the target, IMPORT mode, or Apicurio's admin API)."""
    if plan.spec.registry is None:
        return None
    from cutover.registry import strategies
    from cutover.registry.client import RegistryClient

    out: dict[str, Any] = {}
    for side in ("old", "new"):
        client = RegistryClient(side, getattr(plan.spec.registry, side), timeout)
        try:
            subjects = client.subjects()
            found: dict[str, Any] = {"reachable": True, "url": client.base, "subjects": len(subjects),
                                     "mode": client.mode()}
            strategy = strategies.choose(client)
            found["ids_kept_by"] = strategy.name if strategy else None
            if strategy is None:
                found["problem"] = strategies.unknown_problem(client)
            else:
                ready = strategy.readiness(client, timeout)
                found.update(ready.facts)
                if ready.problem:
                    found["problem"] = ready.problem
        except CutoverError as exc:
            found = {"reachable": False, "url": client.base, "error": exc.message, "fix": exc.fix}
        out[side] = found
    return out


def _left(deadline: float) -> float:
    return max(STEP_MIN, deadline - time.monotonic())


def _lake_reports(plan: Plan, timeout: float, until: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The catalog, then the storage (whose location may come from the catalog's tables): each within the
    timeout, as the failures say (they are different servers; one that does not answer costs its own), and both
    by `until` (the report is written before the command's backstop; a wait it shortened says so)."""
    cat = _catalog_report(plan, timeout, until)
    return cat, _storage_report(plan, timeout, cat, until)


def _catalog_report(plan: Plan, timeout: float, until: float | None = None) -> dict[str, Any]:
    cat = plan.spec.catalog
    if cat is None:
        return {"reachable": True, "configured": False, "tables": []}
    from cutover.lake import catalog, reach

    base = {"configured": True, "name": cat.name, "uri": reach.safe_address(cat)}
    missing = readiness.sqlite_missing(plan)
    if missing is not None:  # never opened (SQLite would create the file): a finding, not a failure
        return {**base, "reachable": None, "tables": [], "note": "not opened: its SQLite file does not exist"}
    try:
        iceberg = reach.probe_catalog(cat, timeout, until)  # the catalog it opened: not opened twice
        tables = []
        for pair in plan.spec.tables:
            for role in ("old", "new"):
                name = getattr(pair, role)
                exists = iceberg.table_exists(name)
                tables.append({"topic": pair.topic, "role": role, "table": name, "exists": exists,
                               "location": iceberg.load_table(name).location() if exists else None})
    except CutoverError as exc:
        return {**base, "reachable": False, "error": exc.message, "fix": exc.fix}
    except Exception as exc:  # a catalog that answered the probe and then failed a lookup
        error = catalog.catalog_error(cat, exc)
        return {**base, "reachable": False, "error": error.message, "fix": error.fix}
    return {**base, "reachable": True, "tables": tables}


def _storage_report(plan: Plan, timeout: float, catalog_report: dict[str, Any],
                    until: float | None = None) -> dict[str, Any]:
    """`usable`: True, False, or None when there is nothing to probe (no catalog, no known location)."""
    cat = plan.spec.catalog
    if cat is None:
        return {"usable": None, "location": None, "note": "no catalog configured"}
    from cutover.lake import reach

    known = [t["location"] for t in catalog_report.get("tables", []) if t.get("location")]
    location = reach.storage_location(cat, lambda: known)
    if location is None:
        return {"usable": None, "location": None,
                "note": "no warehouse location known (the REST catalog keeps it server-side): set "
                        "catalog.storage to the warehouse's location to have it probed"}
    try:
        done = reach.probe_storage(cat, location, timeout, until)
    except CutoverError as exc:
        return {"usable": False, "location": location, "error": exc.message, "fix": exc.fix}
    return {"usable": True, "location": location, "note": done}


def _failed(label: str, part: dict[str, Any]) -> list[str]:
    return [f"{label}: FAILED: {part['error']}", *([f"  fix: {part['fix']}"] if part.get("fix") else [])]


def render_readers(readers: list[dict[str, Any]]) -> list[str]:
    """Each declared reader's position, one line each."""
    from cutover.readers import translate

    return [translate.kind(r["kind"]).position_line(r) for r in readers]


def render_findings(findings: list[dict[str, Any]]) -> list[str]:
    lines = [f"findings ({len(findings)}): a later command would refuse the plan"] if findings else []
    for f in findings:
        lines += [f"  - {f['problem']}", f"    fix: {f['fix']}"]
    return lines


def _render_capabilities(found: dict[str, Any] | None) -> list[str]:
    if found is None:
        return []
    if found["apis"] is None:
        return ["  capabilities: not known (no ApiVersions answer)"]
    missing = [f"{f['capability']} ({f['evidence']})" for f in found["findings"] if f["supported"] is False]
    return [f"  capabilities: {'lacks ' + '; '.join(missing) if missing else 'every API cutover asks for is listed'}"]


def render(report: dict[str, Any]) -> str:
    from cutover.output import table

    lines = [f"plan {report['name']} ({report['plan']})"]
    for side in ("old", "new"):
        c = report[side]
        if not c["reachable"]:
            lines += _failed(f"{side} cluster {c['bootstrap']}", c)
            continue
        lines.append(f"{side} cluster {c['bootstrap']}: id {c['cluster_id']}, {c['brokers']} broker(s)")
        lines.append(f"  topics selected: {len(c['topics'])} of {c['topics_total']}")
        if c["topics"]:
            lines.append(table([[t, f"{n} partition(s)"] for t, n in c["topics"].items()], indent="    "))
        lines.append(f"  groups selected: {len(c['groups'])} of {c['groups_total']}"
                     + (f": {', '.join(c['groups'])}" if c["groups"] else ""))
        lines += _render_capabilities(c.get("capabilities"))
    cat = report["catalog"]
    if not cat["configured"]:
        lines.append("catalog: not configured")
    elif cat["reachable"] is None:
        lines.append(f"catalog {cat['name']}: {cat['note']} (see the findings)")
    elif not cat["reachable"]:
        lines += _failed(f"catalog {cat['name']}", cat)
    else:
        lines.append(f"catalog {cat['name']}: reachable, {len(cat['tables'])} table(s) named")
        if cat["tables"]:
            lines.append(table([[t["table"], t["role"], "exists" if t["exists"] else "absent"]
                                for t in cat["tables"]], indent="    "))
    for side, reg in (report.get("registry") or {}).items():
        if not reg["reachable"]:
            lines += _failed(f"{side} registry {reg['url']}", reg)
        else:
            lines.append(f"{side} registry {reg['url']}: {reg['subjects']} subject(s), ids kept by "
                         f"{reg['ids_kept_by'] or 'nothing (see the findings)'}")
    st = report["storage"]
    if st["usable"] is None:
        lines.append(f"storage: not probed: {st['note']}")
    elif not st["usable"]:
        lines += _failed(f"storage {st['location']}", st)
    else:
        lines.append(f"storage {st['location']}: usable: {st['note']}")
    lines += render_readers(report["readers"])
    lines += render_findings(report["findings"])
    if report.get("unchecked"):
        lines.append(f"NOT CHECKED (the --timeout ran out before they were asked): {', '.join(report['unchecked'])}")
        lines.append("  fix: give a longer --timeout, or fix what did not answer above")
    if report["ok"]:
        lines.append("OK: every cluster, the catalog and the storage answered, and nothing in the plan would be "
                     "refused")
    else:
        lines.append("NOT OK: see above" if not report["reachable"] or report.get("unchecked")
                     else "NOT READY: see the findings above")
    return "\n".join(lines)
