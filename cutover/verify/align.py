"""Put both tables' rows in one offset space, and find the window both should contain.

The old table holds offsets of the old cluster; the new table, of the new one. The
mirror's exact offset map (in the new cluster) carries new offsets back to old ones, so
a row is identified by (partition, old offset) on both sides. The window per partition
ends where the side that is behind ends: the old table's position (its stamped offsets,
or its highest offset + 1) and the new table's stamped position carried back through
the map. What lies beyond the window on one side is lag, not a difference.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cutover.kafka import inspect
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.mirror.offsetmap import PartitionMap
from cutover.plan import Plan

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

log = logging.getLogger("cutover.verify")


def mirror_maps(plan: Plan, topic: str, timeout: float = DEFAULT_TIMEOUT) -> dict[int, PartitionMap]:
    """The forward mirror's offset map of one topic, per partition (empty if it was never mirrored)."""
    rt = st.route(plan, "forward")
    source = inspect.cluster_id(rt.source, timeout)
    state = st.load(rt, source, with_map=True, timeout=timeout)
    return {p: pm for (t, p), pm in state.partitions.items() if t == topic}


def new_position_in_old(pm: PartitionMap | None, position: int) -> int:
    """The old-cluster position of a new-cluster position (identity without a map)."""
    if pm is None:
        return position
    return pm.invert(min(position, pm.next_tgt))


def window(old_positions: dict[int, int], new_positions_old: dict[int, int]) -> dict[int, int]:
    """Per partition, the end (exclusive, old offsets) of what both tables should hold."""
    return {p: min(old_positions.get(p, 0), new_positions_old.get(p, 0))
            for p in set(old_positions) | set(new_positions_old)}


def translate_column(spark: SparkSession, maps: dict[int, PartitionMap], partition: Column,
                     offset: Column) -> Column:
    """A column: each new-cluster (partition, offset) as its old-cluster offset.

    A record the mirror did not write (not in the map) gets -(offset + 1): an identity no
    old row has, so it shows up as extra, under its own new offset.
    """
    import numpy as np
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    arrays = {p: tuple(np.array(a, dtype=np.int64) for a in (pm.arrays()[1], pm.arrays()[0], pm.arrays()[2]))
              for p, pm in maps.items()}
    shared = spark.sparkContext.broadcast(arrays)

    def to_old(parts: pd.Series, offs: pd.Series) -> pd.Series:
        p_arr, o_arr = parts.to_numpy(), offs.to_numpy(dtype=np.int64)
        out = -(o_arr + 1)
        table: dict[int, Any] = shared.value
        for p in np.unique(p_arr):
            segs = table.get(int(p))
            if segs is None:
                continue
            tgt, src, length = segs
            mask = p_arr == p
            o = o_arr[mask]
            i = np.searchsorted(tgt, o, side="right") - 1
            j = np.where(i >= 0, i, 0)
            inside = (i >= 0) & (o < tgt[j] + length[j])
            out[mask] = np.where(inside, src[j] + (o - tgt[j]), -(o + 1))
        return pd.Series(out)

    # Spark reads the type hints to pick the UDF kind; this module's annotations are strings.
    to_old.__annotations__ = {"parts": pd.Series, "offs": pd.Series, "return": pd.Series}
    return pandas_udf(to_old, "long")(partition, offset)  # type: ignore[call-overload,no-any-return]
