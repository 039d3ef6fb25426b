"""Mistakes around promote, rollback, complete, cancel, readers and rights that are caught before any network
call: each named with its fix, exit 2, no traceback, nothing written (the ones that need the sandbox are in
tests/integration/test_switch_refusals.py and test_readers_translate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode

PLAN = ("clusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
        "readers:\n  - {name: orders-query, kind: spark-checkpoint, checkpoint: ck}\n")

#: argv after `--plan FILE` is added, and the words stderr must hold
CASES = {
    "promote-without-a-mode": (["promote"], ["cutover promote changes the clusters and needs --execute",
                                             "fix: see the steps first with cutover promote --dry-run"]),
    **{f"{action}-dry-run-and-execute": ([action, "--dry-run", "--execute"],
                                         ["--dry-run and --execute exclude each other", "fix: pick one"])
       for action in ("promote", "rollback", "complete", "cancel")},
    "translate-an-unknown-reader": (["readers", "translate", "--reader", "orders", "--dry-run"],
                                    ["no reader named orders (readers declared: orders-query)",
                                     "fix: name one of the plan's readers"]),
    "translate-without-a-mode": (["readers", "translate", "--reader", "orders-query"],
                                 ["readers translate needs exactly one of --dry-run, --execute or --starting-offsets",
                                  "fix: look first with --dry-run"]),
    "translate-with-two-modes": (["readers", "translate", "--reader", "orders-query", "--dry-run", "--execute"],
                                 ["(got --dry-run, --execute)"]),
    "translate-a-missing-checkpoint": (["readers", "translate", "--reader", "orders-query", "--dry-run"],
                                       ["reader orders-query: checkpoint folder {tmp}/ck not found",
                                        "fix: set the reader's checkpoint to the query's checkpointLocation"]),
    "rights-apply-with-both-modes": (["rights", "apply", "--dry-run", "--execute"],
                                     ["rights apply needs exactly one of --dry-run and --execute (got both)",
                                      "fix: see what would change with --dry-run first"]),
    "rights-apply-without-a-mode": (["rights", "apply"], ["rights apply needs exactly one of --dry-run and "
                                                          "--execute (got neither)"]),
    "status-watch-as-json": (["status", "--watch", "-o", "json"],
                             ["--watch shows the status live for a person", "fix: drop -o json, or --watch"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_is_named_with_its_fix_before_anything_connects(case: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    argv, words = CASES[case]
    (tmp_path / "p.yaml").write_text(PLAN)
    with pytest.raises(SystemExit) as done:
        main([*argv[:2], "--plan", str(tmp_path / "p.yaml"), *argv[2:]] if argv[0] in ("readers", "rights")
             else [argv[0], "--plan", str(tmp_path / "p.yaml"), *argv[1:]])
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (ExitCode.USAGE, ""), err
    for word in words:
        assert word.format(tmp=tmp_path) in err, err
    assert "a bug in cutover" not in err and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["p.yaml"]  # nothing written
