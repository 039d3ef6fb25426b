"""Verify's samples (pure): compared the way the counts compare, valid JSON."""

from __future__ import annotations

import json

from cutover.verify.canon import same
from cutover.verify.reconcile import _sample


def test_samples_compare_values_the_way_the_counts_do() -> None:
    """NaN = NaN and -0.0 = 0.0 in the samples too; NaN and infinities stay valid JSON."""
    nan, inf = float("nan"), float("inf")
    row = {"_p": 0, "_id": 5, "n_o": 1, "n_n": 1,
           "r_old": {"_h": 1, "_c0": "n5", "_c1": nan, "_c2": -0.0, "_c3": inf},
           "r_new": {"_h": 2, "_c0": "changed", "_c1": nan, "_c2": 0.0, "_c3": inf}}
    names, canon = ["name", "score", "zero", "big"], ["_c0", "_c1", "_c2", "_c3"]
    sample = _sample(row, "mismatched", names, canon)
    assert sample == {"partition": 0, "id": 5, "columns": {"name": {"old": "n5", "new": "changed"}}}
    missing = _sample(row, "missing", names, canon)
    assert missing["values"] == {"name": "n5", "score": "NaN", "zero": 0.0, "big": "Infinity"}
    json.loads(json.dumps(missing, allow_nan=False))
    assert same(nan, nan) and same(-0.0, 0.0) and not same(nan, 1.0) and not same(None, 0.0)


def test_the_coarse_buckets_add_up_from_the_fine_ones() -> None:
    """Offsets mode: a coarse bucket is 64 fine ones (65,536 offsets); its count and sums are theirs added up,
    its first and last identity the least and the greatest; partitions and coarse buckets stay apart."""
    from cutover.verify.reconcile import B0, B1, _coarse

    per = B0 // B1
    fine = {(0, 0): (1024, 10, 20, 30, 0, 1023), (0, per - 1): (5, 1, 2, 3, 64_512, 64_516),
            (0, per): (2, 7, 7, 7, 65_536, 65_537), (1, 3): (1, 4, 5, 6, 3_100, 3_100)}
    assert _coarse(fine) == {(0, 0): (1029, 11, 22, 33, 0, 64_516), (0, 1): (2, 7, 7, 7, 65_536, 65_537),
                             (1, 0): (1, 4, 5, 6, 3_100, 3_100)}
    assert _coarse({}) == {}
