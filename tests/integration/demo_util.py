"""`cutover demo` as the tests run it: the full migration on a sandbox, checked end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import cutover, secret_values


def run_demo(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the demo on the sandbox in `folder`; check its summary; return it and the drill's result."""
    from cutover.local.sandbox import Sandbox

    kind = Sandbox(folder).status()["catalog"]["kind"]  # --catalog the same as the sandbox's: it goes on
    run = cutover("demo", "--dir", str(folder), "--records", "150", "--catalog", kind, "-o", "json", timeout=1200)
    assert run.code == 0, run.err[-3000:]
    s = run.json()
    assert s["catalog"] == kind
    assert s["passed"] and s["consumed_exactly_once"] and s["verify_passed"] and s["canonical_table_exactly_once"]
    assert s["verify_after_round_trip_passed"] and s["promoted_again"] and s["verify_after_second_promote_passed"]
    assert s["each_cluster_exactly_once"]
    assert s["freeze_window_seconds"] > 0 and s["carried_back"] > 0 and s["records"] > 450
    result = json.loads((Path(s["report"]).parent / "result.json").read_text())
    assert result["runbook"] == "full-migration" and len(result["steps"]) == 32
    assert [st["outcome"] for st in result["steps"]] == ["passed"] * 32
    # No secret of the sandbox (S3 keys, the database's password) in the output, the plan, the
    # journal, the report or the checkpoints.
    written = [run.out, run.err, *(f.read_bytes().decode(errors="replace")
                                   for f in Path(s["plan"]).parent.rglob("*") if f.is_file())]
    for value in secret_values(folder):
        assert not [text for text in written if value in text]
    return s, result
