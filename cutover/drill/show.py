"""`cutover drill show RUNBOOK`: a runbook as readable Markdown, for people and for review."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass

from cutover.drill.model import Runbook
from cutover.drill.ops import OPS
from cutover.drill.runner import says

_LABEL = {"action": "Action", "fault": "Fault", "manual": "Manual", "expect": "Expect"}


def markdown(rb: Runbook) -> str:
    lines = [f"# {rb.name}", "", rb.purpose.strip(), "", f"Runbook: `{rb.file}`", ""]
    if rb.parameters:
        lines += ["## Parameters", "", "| name | value | description |", "|---|---|---|"]
        lines += [f"| `{k}` | `{v}` | {rb.descriptions.get(k, '')} |" for k, v in rb.parameters.items()]
        lines.append("")
    lines += ["## Steps", ""]
    for s in rb.steps:
        op = OPS.get((s.kind, s.op))
        tag = f"**{_LABEL[s.kind]}**" + (f" `{s.op}`" if s.kind != "manual" else "")
        note = " *(sandbox; by hand elsewhere)*" if op is not None and op.injected else ""
        lines.append(f"{s.number}. {tag}: {s.name}{note}  ")
        lines.append(f"   {says(s)}")
        if is_dataclass(s.args) and not isinstance(s.args, type) and asdict(s.args):
            lines.append("   " + ", ".join(f"`{k}={v}`" for k, v in asdict(s.args).items() if v is not None))
    return "\n".join(lines) + "\n"
