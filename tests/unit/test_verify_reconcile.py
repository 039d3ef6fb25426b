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
