"""Helpers of the switch's unit tests: a plan, journal runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cutover.plan import Plan, load_plan
from cutover.switch.journal import Journal


def unit_plan(tmp_path: Path, **extra: Any) -> Plan:
    data = {"name": "unit", "clusters": {"old": {"bootstrap.servers": "old:9092"},
                                         "new": {"bootstrap.servers": "new:9092"}},
            "tables": [{"topic": "orders", "old": "legacy.orders", "new": "cutover.orders",
                        "old_offset_columns": {"partition": "p", "offset": "o"}}],
            # table pairs need a catalog; a REST one is never opened offline (no file is looked for)
            "catalog": {"type": "rest", "uri": "http://127.0.0.1:1"}, "routing": {"file": "routing.json"}, **extra}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_plan(path)


def journal_run(j: Journal, action: str, run: str, done: list[str], crashed_in: str | None = None,
                finished: bool = False, failed_in: str | None = None, detail: dict[str, Any] | None = None) -> None:
    j.append("begin", action=action, run=run, mode="execute", steps=[])
    for name in done:
        j.append("step-start", run=run, step=name)
        j.append("step-end", run=run, step=name, outcome="done", detail={"n": name})
    if crashed_in:
        j.append("step-start", run=run, step=crashed_in)
    if failed_in:
        j.append("step-start", run=run, step=failed_in)
        j.append("step-end", run=run, step=failed_in, outcome="failed", error=f"{failed_in} failed")
        j.append("end", action=action, run=run, outcome="failed", detail={"step": failed_in})
    if finished:
        j.append("end", action=action, run=run, outcome="done",
                 detail={"past_point_of_no_return": True, **(detail or {})})
