"""Put both tables' rows in one offset space, and find the window both should contain.

The old table holds offsets of the old cluster (and, once handed over, of the new one
for the eras cutover wrote it: `qualify`); the new table, of the new one. Both
mirrors' exact offset maps carry new offsets back to old ones (the forward mirror's
copies, and the records written on the new cluster that the reverse mirror carried
back), so a row is identified by (partition, old offset) on both sides. The window per partition
ends where the side that is behind ends: the old table's position (its stamped offsets,
or its highest offset + 1) and the new table's stamped position carried back through
the map. What lies beyond the window on one side is lag, not a difference.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from cutover.kafka import inspect
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.lake import eras, sqltext
from cutover.lake.eras import Span
from cutover.mirror import state as st
from cutover.mirror.offsetmap import PartitionMap, Segment
from cutover.plan import Plan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("cutover.verify")


def mirror_maps(plan: Plan, topic: str, timeout: float = DEFAULT_TIMEOUT) -> dict[int, PartitionMap]:
    """Per partition of one topic, new-cluster offsets to old ones, from both directions' maps.

    The forward mirror's map read backwards (its copies on the new cluster), and the reverse
    mirror's map (records written on the new cluster, carried back): empty if the topic was
    never mirrored. The two directions' states are read side by side. Read them after the
    tables are pinned: the maps must know every offset the pinned new table holds.
    """
    directions: list[st.Direction] = ["forward", "reverse"] if plan.spec.switch.reverse_mirror else ["forward"]
    with ThreadPoolExecutor(len(directions), thread_name_prefix="verify-maps") as pool:
        forward, *rest = pool.map(lambda d: _maps(plan, d, topic, timeout), directions)
    reverse = rest[0] if rest else {}
    return {p: combined(forward.get(p), reverse.get(p)) for p in set(forward) | set(reverse)}


def _maps(plan: Plan, direction: st.Direction, topic: str, timeout: float) -> dict[int, PartitionMap]:
    rt = st.route(plan, direction)
    state = st.load(rt, inspect.cluster_id(rt.source, timeout), with_map=True, timeout=timeout)
    return {p: pm for (t, p), pm in state.partitions.items() if t == topic}


def combined(forward: PartitionMap | None, reverse: PartitionMap | None) -> PartitionMap:
    """One map from new-cluster offsets (its source) to old-cluster ones (its target).

    After a rollback the forward mirror adopts the reverse mirror's copies, so both maps
    may pair the same records; the switch keeps both directions' segments rising on both
    clusters, so the pairs agree and a segment's part another already covers is dropped.
    """
    segs = [Segment(t, s, n) for s, t, n in zip(*forward.arrays(), strict=True)] if forward else []
    segs += [Segment(*g) for g in zip(*reverse.arrays(), strict=True)] if reverse else []
    segs.sort(key=lambda g: g.src)
    merged: list[Segment] = []
    for g in segs:
        end = merged[-1].src_end if merged else None
        if end is not None and g.src_end <= end:
            continue
        if end is not None and g.src < end:
            g = Segment(end, g.tgt + (end - g.src), g.length - (end - g.src))
        merged.append(g)
    next_new = max(forward.next_tgt if forward else 0, reverse.next_src if reverse else 0)
    next_old = max(forward.next_src if forward else 0, reverse.next_tgt if reverse else 0)
    return PartitionMap(0, next_new, next_old, merged)


def new_position_in_old(pm: PartitionMap | None, position: int) -> int:
    """The old-cluster position of a new-cluster position (identity without a map)."""
    if pm is None:
        return position
    return pm.translate(min(position, pm.next_src))


def window(old_positions: dict[int, int], new_positions_old: dict[int, int]) -> dict[int, int]:
    """Per partition, the end (exclusive, old offsets) of what both tables should hold."""
    return {p: min(old_positions.get(p, 0), new_positions_old.get(p, 0))
            for p in set(old_positions) | set(new_positions_old)}


Ranges = dict[int, list[tuple[int, int]]]


def new_ranges(pm: PartitionMap | None, lo: int, hi: int) -> list[tuple[int, int]]:
    """The new-cluster offsets whose rows `translate_column` gives an identity in [lo, hi) (old offsets).

    The records the map pairs with an old offset in the range, and, for a negative range, the
    records no map pairs (identity -(offset + 1)). `None`: the partition has no map, so all its
    records are unpaired. The ranges are [start, end), and may be a superset.
    """
    import numpy as np

    if hi <= 0:  # -(o + 1) in [lo, hi)  <=>  o in [-hi, -lo)
        return [(-hi, -lo)]
    out = [(0, -lo)] if lo < 0 else []
    lo = max(lo, 0)
    if pm is None:
        return out
    src, tgt, length = (np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64) for a in pm.arrays())
    hit = (tgt < hi) & (tgt + length > lo)
    for s, t, n in zip(src[hit].tolist(), tgt[hit].tolist(), length[hit].tolist(), strict=True):
        out.append((s + max(lo, t) - t, s + min(hi, t + n) - t))
    return out


def merged(ranges: Ranges, gap: int = 1024, most: int = 512) -> Ranges:
    """The same offsets (and maybe a few more) in fewer ranges: ranges at most `gap` apart become one, and
    past `most` ranges in all, each partition's become one span."""
    out: Ranges = {}
    for p, rs in ranges.items():
        kept: list[tuple[int, int]] = []
        for lo, hi in sorted(r for r in rs if r[1] > r[0]):
            if kept and lo <= kept[-1][1] + gap:
                kept[-1] = (kept[-1][0], max(kept[-1][1], hi))
            else:
                kept.append((lo, hi))
        if kept:
            out[p] = kept
    if sum(len(rs) for rs in out.values()) > most:
        out = {p: [(rs[0][0], max(hi for _lo, hi in rs))] for p, rs in out.items()}
    return out


def within(partition: str, offset: str, ranges: Ranges) -> Column:
    """A filter: (partition, offset) of these columns falls in one of the ranges (SQL text: one call)."""
    p, o = (f"CAST({sqltext.quoted(c)} AS {t})" for c, t in ((partition, "INT"), (offset, "BIGINT")))
    return sqltext.any_of(f"({p} = {q} AND {o} >= {lo} AND {o} < {hi})"
                          for q, rs in sorted(ranges.items()) for lo, hi in rs)


def translate_column(spark: SparkSession, maps: dict[int, PartitionMap], partition: Column,
                     offset: Column) -> Column:
    """A column: each new-cluster (partition, offset) as its old-cluster offset.

    A record the mirror did not write (not in the map) gets -(offset + 1): an identity no
    old row has, so it shows up as extra, under its own new offset.
    """
    import numpy as np
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    arrays = {p: tuple(np.array(a, dtype=np.int64) for a in pm.arrays()) for p, pm in maps.items()}
    shared = spark.sparkContext.broadcast(arrays)

    def to_old(parts: pd.Series, offs: pd.Series) -> pd.Series:
        p_arr, o_arr = parts.to_numpy(), offs.to_numpy(dtype=np.int64)
        out = -(o_arr + 1)
        table: dict[int, Any] = shared.value
        for p in np.unique(p_arr):
            segs = table.get(int(p))
            if segs is None:
                continue
            new, old, length = segs
            mask = p_arr == p
            o = o_arr[mask]
            i = np.searchsorted(new, o, side="right") - 1
            j = np.where(i >= 0, i, 0)
            inside = (i >= 0) & (o < new[j] + length[j])
            out[mask] = np.where(inside, old[j] + (o - new[j]), -(o + 1))
        return pd.Series(out)

    # Spark reads the type hints to pick the UDF kind; this module's annotations are strings.
    to_old.__annotations__ = {"parts": pd.Series, "offs": pd.Series, "return": pd.Series}
    return pandas_udf(to_old, "long")(partition, offset)  # type: ignore[call-overload,no-any-return]


def qualify(spark: SparkSession, old: DataFrame, lines: dict[int, list[Span]], maps: dict[int, PartitionMap],
            new: DataFrame) -> DataFrame:
    """The canonical table's rows with every identity in old-cluster offsets, whichever cluster's
    offset the row carries.

    Its eras (`cutover.lake.eras`) say which cluster a row's offset belongs to: an old
    era's offset stays, a new era's goes through the maps like the new table's. An
    offset both an old and a new era hold is settled by content: it is the record at
    whichever reading the new table holds with the same row hash (the old reading when
    both or neither do; of two identical rows at one offset, one takes each reading).
    """
    import numpy as np
    import pandas as pd
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    shared = spark.sparkContext.broadcast(lines)

    def era(parts: pd.Series, offs: pd.Series) -> pd.Series:
        table: dict[int, list[Span]] = shared.value
        p_arr, o_arr = parts.to_numpy(), offs.to_numpy(dtype=np.int64)
        out = np.zeros(len(o_arr), dtype=np.int32)
        for p in np.unique(p_arr):
            mask = p_arr == p
            is_old, is_new = eras.sides(table.get(int(p), []), o_arr[mask])
            out[mask] = np.where(is_old & is_new, 2, np.where(is_new, 1, 0))
        return pd.Series(out)

    era.__annotations__ = {"parts": pd.Series, "offs": pd.Series, "return": pd.Series}
    cols = old.columns
    x = old.withColumn("_era", pandas_udf(era, "int")(F.col("_p"), F.col("_id")))  # type: ignore[call-overload]
    x = x.withColumn("_alt", translate_column(spark, maps, F.col("_p"), F.col("_id")))
    keys = new.select(F.col("_p").alias("_kp"), F.col("_id").alias("_k"), F.col("_h").alias("_kh")).distinct()
    amb = x.where(F.col("_era") == 2)
    for flag, ident in (("_ma", "_id"), ("_mb", "_alt")):
        found = keys.withColumn(flag, F.lit(True))
        amb = amb.join(found, (amb["_p"] == found["_kp"]) & (amb[ident] == found["_k"]) & (amb["_h"] == found["_kh"]),
                       "left").drop("_kp", "_k", "_kh")
    nth = F.row_number().over(Window.partitionBy("_p", "_id", "_h").orderBy("_alt"))
    take_alt = F.col("_mb").isNotNull() & (F.col("_ma").isNull() | (nth % 2 == 0))
    settled = amb.withColumn("_id", F.when(take_alt, F.col("_alt")).otherwise(F.col("_id")))
    plain = x.where(F.col("_era") != 2).withColumn("_id", F.when(F.col("_era") == 1, F.col("_alt"))
                                                    .otherwise(F.col("_id")))
    return plain.select(*cols).unionByName(settled.select(*cols))
