"""Reconcile two normalized tables at the cost of about one scan, then find each difference.

Both sides arrive as frames of `_p` (Kafka partition, or -1), `_id` (the row identity:
old-space offset, key, or content hash), `_h` (hash of the canonical compared columns),
and the canonical columns `_c0…`. Rows outside the window carry bucket -1 (lag).

1. One aggregation per side by (partition, coarse bucket): count, sums of the hashes
   of (identity, row hash) and of the identities, first and last identity. Equal
   aggregates: equal rows at equal identities.
   (A row duplicated on one side changes the count; one duplicated identically on both
   sides is not a difference between the tables and is not reported.)
   In offsets mode the scan aggregates the fine buckets (one per 1,024 offsets) and the
   coarse ones are added up from them on the driver: step 2 then reads nothing.
2. Only the buckets that differ are aggregated again at a finer bucket (bisecting).
3. Only the fine buckets that still differ are compared row by row: missing, extra,
   duplicates and rows whose content differs, with the differing columns of a sample.
   In offsets mode each side is read again through a filter on its offsets (`narrow`),
   before it is normalized; when the rows that differ are few, one job brings them all and
   counts the rows compared on the way, and the counts are added up from them.

With no difference the cost is step 1; a few differences add the row pass (and, by key or
content, the fine pass) over the rows of the differing buckets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutover.lake import sqltext
from cutover.verify.canon import NULL, plain, same
from cutover.verify.results import Mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame



@dataclass
class PartitionCounts:
    old_rows: int = 0
    new_rows: int = 0
    min_id: Any = None
    max_id: Any = None
    old_ahead: int = 0
    new_ahead: int = 0
    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    duplicates_old: int = 0
    duplicates_new: int = 0


@dataclass
class Outcome:
    partitions: dict[int, PartitionCounts] = field(default_factory=lambda: defaultdict(PartitionCounts))
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {
        "missing": [], "extra": [], "mismatched": [], "duplicates": []})
    cost: dict[str, Any] = field(default_factory=dict)
    window: dict[int, int] | None = None

    def lag(self, side: int, partition: int, rows: int) -> None:
        """Rows beyond the window: side 0 is the old table, 1 the new."""
        pc = self.partitions[partition]
        if side:
            pc.new_ahead += rows
        else:
            pc.old_ahead += rows


B0, B1 = 65536, 1024  # offsets per coarse and fine bucket (offsets mode)
Aggs = dict[tuple[int, int], tuple[Any, ...]]
#: Given the highest identity per partition on each side (old, new), the window ends.
WindowFn = Callable[[dict[int, int], dict[int, int]], dict[int, int]]
#: Given identity ranges per partition (offsets mode), each side's bucketed frame read with a filter that keeps
#: (at least) the rows with those identities, before the side is normalized; None: that side cannot be narrowed.
NarrowFn = Callable[[dict[int, list[tuple[int, int]]]], "tuple[DataFrame | None, DataFrame | None]"]


def buckets(df: DataFrame, mode: Mode) -> DataFrame:
    """Add the bucket columns: offset ranges (offsets mode) or hash ranges."""
    from pyspark.sql import functions as F

    if mode == "offsets":
        b0, b1 = F.floor(F.col("_id") / B0), F.floor(F.col("_id") / B1)
    else:
        h = F.xxhash64(F.col("_id").cast("string"))
        b0, b1 = F.pmod(h, F.lit(4096)), F.pmod(h, F.lit(4096 * 64))
    return df.withColumn("_b0", b0.cast("bigint")).withColumn("_b1", b1.cast("bigint"))


def _aggregate(old: DataFrame, new: DataFrame, keys: list[str]) -> tuple[Aggs, Aggs]:
    """One job over both sides: per key, count, order-independent sums, first and last identity.

    The sums are of two 31-bit halves of a hash of (identity, row hash) and of the
    identity, each a long (no overflow below 2^32 rows per bucket): equal multisets of
    (identity, content) pairs give equal sums. Hashing the identity with the content
    is what catches records that moved: two rows that traded places, or one missing
    and one doubled with equal content, leave the multiset of contents unchanged.
    """
    from pyspark.sql import functions as F

    ident = F.col("_id") if old.schema["_id"].dataType.simpleString() == "bigint" else F.xxhash64("_id")
    both = old.select(F.lit(0).alias("_side"), *keys, "_id", "_h").unionByName(
        new.select(F.lit(1).alias("_side"), *keys, "_id", "_h"))
    h = F.xxhash64("_id", "_h")
    rows = both.groupBy("_side", *keys).agg(
        F.count("*"), F.sum(h.bitwiseAND(0x7FFFFFFF)), F.sum(F.shiftright(h, 31).bitwiseAND(0x7FFFFFFF)),
        F.sum(ident.bitwiseAND(0x7FFFFFFF)), F.min("_id"), F.max("_id")).collect()
    out: tuple[Aggs, Aggs] = ({}, {})
    n = len(keys)
    for r in rows:
        out[r[0]][tuple(r[1:1 + n])] = tuple(r[1 + n:])
    return out


def _coarse(fine: Aggs) -> Aggs:
    """Offsets mode: the coarse buckets' aggregates from the fine ones (a coarse bucket is B0 // B1 fine ones):
    counts and sums add up, the first identity is the least, the last the greatest."""
    out: dict[tuple[int, int], list[Any]] = {}
    for (p, b1), (n, s1, s2, s3, lo, hi) in fine.items():
        key = (p, b1 // (B0 // B1))
        agg = out.get(key)
        if agg is None:
            out[key] = [n, s1, s2, s3, lo, hi]
        else:
            agg[0] += n
            agg[1] += s1
            agg[2] += s2
            agg[3] += s3
            agg[4], agg[5] = min(agg[4], lo), max(agg[5], hi)
    return {k: tuple(v) for k, v in out.items()}


def _differing(old: Aggs, new: Aggs) -> list[tuple[int, int]]:
    return sorted(k for k in set(old) | set(new) if old.get(k, ())[:4] != new.get(k, ())[:4])


#: Up to this many (partition, bucket) keys `_only` keeps them with one SQL expression; past it, with a broadcast
#: join (a job of its own, but no expression of hundreds of thousands of literals to parse and ship to each task).
_KEYS_AS_TEXT = 10_000


def _only(df: DataFrame, level: str, keys: list[tuple[int, int]]) -> DataFrame:
    """The rows of these (partition, bucket) keys."""
    from pyspark.sql import functions as F

    if len(keys) > _KEYS_AS_TEXT:
        chosen_keys = df.sparkSession.createDataFrame(keys, f"_p int, {level} bigint")
        return df.join(F.broadcast(chosen_keys), ["_p", level])
    chosen: dict[int, list[int]] = defaultdict(list)
    for p, b in keys:
        chosen[p].append(b)
    return df.where(sqltext.any_of(f"(_p = {p} AND {level} IN ({', '.join(map(str, bs))}))"
                                   for p, bs in sorted(chosen.items())))


def _inside(window: dict[int, int]) -> Any:
    """Whether a row's identity is below its partition's window end (SQL text: one call)."""
    return sqltext.per_partition("_p", {p: f"_id < {end}" for p, end in window.items()}, "false")


def _apply_window(old: DataFrame, new: DataFrame, l0: tuple[Aggs, Aggs],
                  window: dict[int, int], out: Outcome) -> tuple[tuple[Aggs, Aggs], set[tuple[int, int]]]:
    """Keep the coarse buckets below each window end; rows past it are lag. Only buckets the
    end cuts through are aggregated again (restricted to the window): usually none. Returns the
    kept aggregates and the buckets cut."""

    kept: tuple[Aggs, Aggs] = ({}, {})
    cut: set[tuple[int, int]] = set()
    for side, aggs in enumerate(l0):
        for (p, b), agg in aggs.items():
            end = window.get(p, 0)
            if (b + 1) * B0 <= end:
                kept[side][(p, b)] = agg
            elif b * B0 >= end or agg[4] >= end:
                out.lag(side, p, agg[0])
            elif agg[5] < end:
                kept[side][(p, b)] = agg
            else:
                cut.add((p, b))
    if cut:
        inside = _inside(window)
        o, n = (_only(df, "_b0", sorted(cut)).withColumn("_in", inside) for df in (old, new))
        split = _aggregate(o, n, ["_p", "_b0", "_in"])
        for side, aggs in enumerate(split):
            for (p, b, within), agg in aggs.items():  # type: ignore[misc]
                if within:
                    kept[side][(p, b)] = agg
                else:
                    out.lag(side, p, agg[0])
    return kept, cut


def reconcile(old: DataFrame, new: DataFrame, mode: Mode, columns: list[str],
              sample_size: int = 10, window_fn: WindowFn | None = None, narrow: NarrowFn | None = None) -> Outcome:
    """Compare two bucketed frames (see `buckets`); `columns` names `_c0…` for the samples.

    With `window_fn` (offsets mode), only identities below each partition's window end
    are compared; the rest is counted as lag. With `narrow` (offsets mode), the row pass reads
    each side again through a filter on its offsets, so that only the rows of the differing
    fine buckets are normalized (converted, hashed, translated) a second time.
    """
    out = Outcome()
    # Offsets mode: the one scan aggregates the fine buckets (about one per 1,024 rows), and the coarse ones
    # are added up from them, so that the differing fine buckets are known without a second scan. (Hash
    # modes have up to 4096 x 64 fine buckets per partition: there the fine pass reads only what differs.)
    fine: tuple[Aggs, Aggs] | None = _aggregate(old, new, ["_p", "_b1"]) if mode == "offsets" else None
    l0 = (_coarse(fine[0]), _coarse(fine[1])) if fine is not None else _aggregate(old, new, ["_p", "_b0"])
    if window_fn is not None:
        highest = tuple({p: max(a[5] for (q, _b), a in aggs.items() if q == p) + 1 for p, _b in aggs}
                        for aggs in l0)
        window = window_fn(highest[0], highest[1])
        out.window = window
        l0, cut = _apply_window(old, new, l0, window, out)
        if cut:
            fine = None  # a cut bucket's fine aggregates hold rows past the window: read again
        inside = _inside(window)
        old, new = old.where(inside), new.where(inside)
        if narrow is not None:
            narrow = _windowed(narrow, inside)
    old_l0, new_l0 = l0
    for side, aggs in enumerate(l0):
        for (p, _b), agg in aggs.items():
            pc = out.partitions[p]
            if side:
                pc.new_rows += agg[0]
            else:
                pc.old_rows += agg[0]
                pc.min_id = agg[4] if pc.min_id is None else min(pc.min_id, agg[4])
                pc.max_id = agg[5] if pc.max_id is None else max(pc.max_id, agg[5])
    differing = _differing(old_l0, new_l0)
    out.cost = {"buckets": {"_b0": len(set(old_l0) | set(new_l0))}, "differing": {"_b0": len(differing)},
                "rows_compared": 0}
    if not differing:
        return out
    old_r, new_r = _only(old, "_b0", differing), _only(new, "_b0", differing)
    if fine is not None:
        chosen = set(differing)
        per = B0 // B1
        finer = _differing(*({k: a for k, a in side.items() if (k[0], k[1] // per) in chosen} for side in fine))
    else:
        finer = _differing(*_aggregate(old_r, new_r, ["_p", "_b1"]))
    out.cost["differing"]["_b1"] = len(finer)
    if finer:
        if fine is not None and narrow is not None:  # a cut bucket (fine None) is read whole
            ranges: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for p, b in finer:
                ranges[p].append((b * B1, (b + 1) * B1))
            o, n = narrow(dict(ranges))
            old_r, new_r = old_r if o is None else o, new_r if n is None else n
            out.cost["row_pass"] = {side: "all" if f is None else "narrowed" for side, f in (("old", o), ("new", n))}
        _rows(_only(old_r, "_b1", finer), _only(new_r, "_b1", finer), mode, columns,
              sample_size, out)
    return out


def _windowed(narrow: NarrowFn, inside: Any) -> NarrowFn:
    def within_window(ranges: dict[int, list[tuple[int, int]]]) -> tuple[DataFrame | None, DataFrame | None]:
        o, n = narrow(ranges)
        return None if o is None else o.where(inside), None if n is None else n.where(inside)
    return within_window


def _rows(old: DataFrame, new: DataFrame, mode: Mode, columns: list[str], sample_size: int,
          out: Outcome) -> None:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    canon = [f"_c{i}" for i in range(len(columns))]

    # One shuffle: both sides' rows grouped by identity, each side's count and first row (a full outer join of
    # two grouped sides, without their two shuffles).
    both = old.select(F.lit(0).alias("_s"), "_p", "_id", "_h", *canon).unionByName(
        new.select(F.lit(1).alias("_s"), "_p", "_id", "_h", *canon))
    row = F.struct("_h", *canon)
    joined = both.groupBy("_p", "_id").agg(
        F.count(F.when(F.col("_s") == 0, 1)).alias("n_old"), F.count(F.when(F.col("_s") == 1, 1)).alias("n_new"),
        F.first(F.when(F.col("_s") == 0, row), ignorenulls=True).alias("r_old"),
        F.first(F.when(F.col("_s") == 1, row), ignorenulls=True).alias("r_new"))
    n_old, n_new = F.coalesce(F.col("n_old"), F.lit(0)), F.coalesce(F.col("n_new"), F.lit(0))
    if mode == "content":  # identity is the content: a changed row is one missing and one extra
        missing, extra = F.greatest(n_old - n_new, F.lit(0)), F.greatest(n_new - n_old, F.lit(0))
        mismatched: Any = F.lit(0)
        dup_old = dup_new = F.lit(0)
    else:
        missing = F.when(n_new == 0, n_old).otherwise(0)
        extra = F.when(n_old == 0, n_new).otherwise(0)
        mismatched = F.when((n_old > 0) & (n_new > 0) & (F.col("r_old._h") != F.col("r_new._h")), 1).otherwise(0)
        dup_old, dup_new = F.greatest(n_old - 1, F.lit(0)), F.greatest(n_new - 1, F.lit(0))
    staged = joined.select("_p", "_id", "r_old", "r_new", n_old.alias("n_o"), n_new.alias("n_n"),
                           missing.alias("missing"), extra.alias("extra"), mismatched.alias("mismatched"),
                           dup_old.alias("dup_old"), dup_new.alias("dup_new"))
    kinds = {"missing": "missing > 0", "extra": "extra > 0", "mismatched": "mismatched > 0",
             "duplicates": "dup_old > 0 OR dup_new > 0"}
    differs = " OR ".join(kinds.values())
    # One job: every differing row, when they are few (the common case), and the rows compared, observed on
    # the way. Each partition's counts are then added up from the rows that differ (the others add zero).
    seen = Observation()
    every = staged.observe(seen, F.count(F.lit(1)).alias("rows")).where(differs).orderBy("_p", "_id") \
        .limit(_FEW_ROWS + 1).collect()
    out.cost["rows_compared"] += int(seen.get["rows"])
    if len(every) <= _FEW_ROWS:  # each kind's sample is its first ones
        for r in every:
            pc = out.partitions[r["_p"]]
            pc.missing += r["missing"]
            pc.extra += r["extra"]
            pc.mismatched += r["mismatched"]
            pc.duplicates_old += r["dup_old"]
            pc.duplicates_new += r["dup_new"]
        for kind in kinds:
            chosen = [r for r in every if _is(r, kind)][:sample_size]
            out.samples[kind] += [_sample(r, kind, columns, canon) for r in chosen]
        return
    joined.persist()  # many rows differ: the queries below read it
    try:
        sums = staged.groupBy("_p").agg(*[F.sum(c) for c in ("missing", "extra", "mismatched", "dup_old",
                                                             "dup_new")]).collect()
        for r in sums:
            pc = out.partitions[r[0]]
            pc.missing, pc.extra, pc.mismatched, pc.duplicates_old, pc.duplicates_new = (int(x) for x in r[1:6])
        for kind, cond in kinds.items():
            for r in staged.where(cond).orderBy("_p", "_id").limit(sample_size).collect():
                out.samples[kind].append(_sample(r, kind, columns, canon))
    finally:
        joined.unpersist()


#: Up to this many rows that differ, one job collects them all and the samples are chosen from them.
_FEW_ROWS = 2000


def _is(r: Any, kind: str) -> bool:
    """A staged row's kind of difference, as `_rows`' SQL conditions say it."""
    if kind == "duplicates":
        return bool(r["dup_old"] > 0 or r["dup_new"] > 0)
    return bool(r[kind] > 0)


def _value(v: Any) -> Any:
    """A sample value as a person reads it: bytes as text when they are UTF-8, else hex."""
    if isinstance(v, str) and v == NULL:
        return None
    if isinstance(v, bytes | bytearray):
        try:
            return bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + bytes(v).hex()
    return plain(v)


def _sample(r: Any, kind: str, columns: list[str], canon: list[str]) -> dict[str, Any]:
    row = r["r_old"] if r["r_old"] is not None else r["r_new"]
    sample: dict[str, Any] = {"partition": r["_p"], "id": r["_id"]}
    if kind == "mismatched":
        sample["columns"] = {name: {"old": _value(r["r_old"][c]), "new": _value(r["r_new"][c])}
                             for name, c in zip(columns, canon, strict=True) if not same(r["r_old"][c], r["r_new"][c])}
    elif kind == "duplicates":
        sample.update({"old_copies": r["n_o"], "new_copies": r["n_n"]})
    else:
        sample["values"] = {name: _value(row[c]) for name, c in zip(columns, canon, strict=True)}
    return sample
