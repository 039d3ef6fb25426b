"""`cutover mirror status`: where the mirror stands, read from the clusters (never a local file)."""

from __future__ import annotations

from typing import Any

from cutover.common import iso_seconds
from cutover.kafka.inspect import cluster_id
from cutover.kafka.offsets import log_offsets
from cutover.mirror import state as st
from cutover.mirror import topics
from cutover.output import table
from cutover.plan import Plan


def status(plan: Plan, direction: st.Direction = "forward", timeout: float = 10.0) -> dict[str, Any]:
    rt = st.route(plan, direction)
    source = cluster_id(rt.source, timeout)
    state = st.load(rt, source, with_map=False, timeout=timeout)
    sel = plan.spec.topics
    selected = topics.selected_topics(rt, sel.include, sel.matches, rt.prefix, timeout)
    tps = [(t, p) for t, n in selected.items() for p in range(n)]
    ends = log_offsets(rt.source, tps, "end", timeout)
    groups = sorted((g for g in state.groups.values() if plan.spec.groups.matches(g.group)), key=lambda g: g.group)
    synced: dict[str, float] = {}
    for g in groups:
        for key in g.offsets:
            synced[key] = max(synced.get(key, 0.0), g.at)
    parts: list[dict[str, Any]] = []
    for tp in tps:
        pm = state.partitions.get(tp)
        parts.append({
            "topic": tp[0], "partition": tp[1], "source_end": ends[tp],
            "position": pm.next_src if pm else None,
            "lag": max(0, ends[tp] - pm.next_src) if pm else ends[tp],
            "gaps": [{"start": g.start, "end": g.end, "records": g.records} for g in (pm.gaps if pm else [])],
            "last_group_sync": iso_seconds(synced.get(f"{tp[0]}/{tp[1]}")),
        })
    return {
        "direction": direction, "source": rt.source.name, "target": rt.target.name, "source_cluster": source,
        "lag": sum(p["lag"] for p in parts), "partitions": parts,
        "gaps": [{"topic": p["topic"], "partition": p["partition"], **g} for p in parts for g in p["gaps"]],
        "groups": [{"group": g.group, "last_sync": iso_seconds(g.at), "partitions": len(g.offsets)}
                   for g in groups],
    }


def render(s: dict[str, Any]) -> str:
    rows = [[p["topic"], str(p["partition"]), str(p["source_end"]), "-" if p["position"] is None else
             str(p["position"]), str(p["lag"]), p["last_group_sync"] or "-"] for p in s["partitions"]]
    lines = [f"mirror {s['direction']} ({s['source']} -> {s['target']}): total lag {s['lag']:,} records",
             table(rows, ["topic", "partition", "source end", "mirrored", "lag", "last group sync"])]
    for g in s["gaps"]:
        lines.append(f"DATA LOSS: {g['topic']}/{g['partition']} offsets {g['start']}..{g['end'] - 1} "
                     f"({g['records']} records) deleted on the source before they were mirrored")
    if s["groups"]:
        lines.append(table([[g["group"], g["last_sync"] or "-", str(g["partitions"])] for g in s["groups"]],
                           ["group", "last sync", "partitions"]))
    return "\n".join(lines)
