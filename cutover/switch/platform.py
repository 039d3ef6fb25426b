"""Handing a table over to the one the new cluster's platform writes (tables[].new_writer), and back.

A platform that writes its topics into Iceberg itself (Table Topic style) cannot write the old
pipeline's table, and cutover does not write the platform's. So the hand-over is of the name readers
query: the routing file's `tables` maps each pair's canonical name (the old table's) to the table
that holds it now (switch/routing.py), the platform's after promote, the old one's after rollback.

No record is lost or doubled either way:
- promote: the platform's table holds every record of the topic on the new cluster once its rows
  per partition equal the records the mirror copied there (the forward map's count: before promote
  nothing else writes to the new cluster), checked after the drain, before the routing changes;
- rollback: the old pipeline never stopped (nothing but the reverse mirror writes to the old
  cluster after promote), so the old table holds every record once its highest offset per
  partition reaches the reverse mirror's position (with old_offset_columns; said when it cannot
  be checked), checked after the reverse drain.
"""

from __future__ import annotations

import time
from typing import Any

from cutover.errors import CutoverError
from cutover.mirror import state as st
from cutover.output import progress
from cutover.plan import Plan, TablePair

Detail = dict[str, Any]
#: How often a hand-over asks the table again while it catches up.
POLL = 1.0


def caught_up_new(plan: Plan, pair: TablePair, timeout: float) -> Detail:
    """Wait (up to `timeout`) until the platform's table holds, per partition, every record the mirror copied
    to the new cluster's topic; refused naming the partitions short of it."""
    want = {p: pm.records for (t, p), pm in _maps(plan, "forward", timeout).items() if t == pair.topic}
    return _wait(plan, pair.new, want, lambda have: {p: (have.get(p, 0), n) for p, n in want.items()
                                                     if have.get(p, 0) != n}, pair.new_writer, timeout,
                 "rows per partition equal to the records the mirror copied to the new cluster")


def caught_up_log(plan: Plan, pair: TablePair, timeout: float) -> Detail:
    """Wait (up to `timeout`) until the platform's table holds, per partition, a row for every record of the topic
    on the new cluster now (its log end: a platform whose offsets are contiguous, as Tansu's are); refused naming
    the partitions short of it. A drill's check at a quiet moment, whatever wrote the records."""
    from cutover.kafka.clients import ClusterRef
    from cutover.kafka.inspect import partition_counts
    from cutover.kafka.offsets import log_offsets

    ref = ClusterRef.of(plan, "new")
    count = partition_counts(ref, timeout).get(pair.topic, 0)
    ends = log_offsets(ref, [(pair.topic, p) for p in range(count)], "high", timeout)
    want = {p: n for (_t, p), n in ends.items()}
    return _wait(plan, pair.new, want, lambda have: {p: (have.get(p, 0), n) for p, n in want.items()
                                                     if have.get(p, 0) != n}, pair.new_writer, timeout,
                 "a row for every record of the topic on the new cluster")


def caught_up_old(plan: Plan, pair: TablePair, timeout: float) -> Detail:
    """Wait (up to `timeout`) until the old table holds every record the reverse mirror carried back: its highest
    offset per partition reaches the reverse mirror's position (needs old_offset_columns)."""
    oc = pair.old_offset_columns
    reverse = {p: pm.next_tgt for (t, p), pm in _maps(plan, "reverse", timeout).items()
               if t == pair.topic and pm.records}
    if oc is None or not reverse:
        return {"table": pair.old, "checked": False,
                "note": "nothing was carried back" if oc is not None else
                "not checked: the old table has no old_offset_columns to say how far its writer got"}
    return _wait(plan, pair.old, reverse, lambda have: {p: (have.get(p, 0), n) for p, n in reverse.items()
                                                        if have.get(p, 0) < n}, "offsets", timeout,
                 "the old pipeline's table reaching the reverse mirror's position")


def _wait(plan: Plan, table: str, want: dict[int, int], short: Any, how: str, timeout: float, what: str) -> Detail:
    deadline = time.monotonic() + timeout
    said = False
    while True:
        have = _held(plan, table, how)
        behind = short(have)
        if not behind:
            return {"table": table, "checked": True, "per_partition": {str(p): have.get(p, 0) for p in sorted(want)}}
        if time.monotonic() > deadline:
            lines = ", ".join(f"partition {p}: {h} of {n}" for p, (h, n) in sorted(behind.items()))
            raise CutoverError(f"table {table} did not catch up within {timeout:.0f}s ({what}): {lines}",
                               fix="check its writer (its logs, the catalog), then run the switch again: it resumes "
                                   "at this step")
        if not said:
            progress(f"  waiting for {table} to catch up ({what})")
            said = True
        time.sleep(POLL)


def _held(plan: Plan, table: str, how: str) -> dict[int, int]:
    """Per partition: rows (a platform's table: `how` is its writer), or the highest offset + 1 (`offsets`: the
    old table, through old_offset_columns)."""
    import pyarrow.compute as pc

    from cutover.lake import tables

    pair = next(p for p in plan.spec.tables if table in (p.old, p.new))
    tbl = tables.load_table(plan, table)
    if how == "offsets":
        oc = pair.old_offset_columns
        assert oc is not None
        data = tbl.scan(selected_fields=(oc.partition, oc.offset)).to_arrow()
        out: dict[int, int] = {}
        for part, off in zip(data[oc.partition].to_pylist(), data[oc.offset].to_pylist(), strict=True):
            out[int(part)] = max(out.get(int(part), 0), int(off) + 1)
        return out
    data = tbl.scan(selected_fields=("meta",)).to_arrow()
    counts = pc.value_counts(pc.struct_field(data["meta"], "partition"))
    return {int(c["values"]): int(c["counts"]) for c in counts.to_pylist()}


def _maps(plan: Plan, direction: st.Direction, timeout: float) -> dict[Any, Any]:
    from cutover.kafka.inspect import cluster_id

    rt = st.route(plan, direction)
    return st.load(rt, cluster_id(rt.source, timeout), with_map=False, timeout=timeout).partitions
