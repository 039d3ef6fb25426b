"""mkdocs hooks: the reference pages generated from the code itself, so they cannot drift.

`<!-- generated: plan-keys -->` becomes the table of every plan key (cutover.plan.reference),
`<!-- generated: exit-codes -->` the table of cutover's exit codes (cutover.errors.ExitCode),
`<!-- generated: runbook-steps -->` every runbook step and its arguments (cutover.drill.reference),
`<!-- generated: metrics -->` every metric the mirror serves (cutover.mirror.metrics),
`<!-- generated: commands -->` every command with its options and help (cutover.cli.reference),
`<!-- generated: preconditions -->` every precondition of promote, rollback, complete and cancel
(cutover.switch.reference),
`<!-- generated: capabilities -->` every capability cutover asks a cluster about (cutover.kafka.capabilities).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def on_page_markdown(markdown: str, **_: Any) -> str:
    if "<!-- generated: plan-keys -->" in markdown:
        from cutover.plan import reference

        markdown = markdown.replace("<!-- generated: plan-keys -->", reference.markdown())
    if "<!-- generated: runbook-steps -->" in markdown:
        from cutover.drill import reference as steps

        markdown = markdown.replace("<!-- generated: runbook-steps -->", steps.markdown())
    if "<!-- generated: metrics -->" in markdown:
        from cutover.mirror import metrics

        markdown = markdown.replace("<!-- generated: metrics -->", metrics.reference())
    if "<!-- generated: exporter-metrics -->" in markdown:
        from cutover.observe import exporter

        markdown = markdown.replace("<!-- generated: exporter-metrics -->", exporter.reference())
    if "<!-- generated: shadow-metrics -->" in markdown:
        from cutover.mirror import metrics
        from cutover.shadow.metrics import ShadowMetrics

        markdown = markdown.replace("<!-- generated: shadow-metrics -->", metrics.reference(ShadowMetrics(None)))
    if "<!-- generated: commands -->" in markdown:
        from cutover.cli import reference as commands

        markdown = markdown.replace("<!-- generated: commands -->", commands.markdown())
    if "<!-- generated: preconditions -->" in markdown:
        from cutover.switch import reference as preconditions

        sample = Path(__file__).resolve().parents[1] / "samples" / "plan.yaml"  # the checkout's, not the package's
        markdown = markdown.replace("<!-- generated: preconditions -->",
                                    preconditions.markdown(preconditions.sample_plan(sample)))
    if "<!-- generated: capabilities -->" in markdown:
        from cutover.kafka import capabilities

        markdown = markdown.replace("<!-- generated: capabilities -->", capabilities.markdown())
    if "<!-- generated: exit-codes -->" in markdown:
        markdown = markdown.replace("<!-- generated: exit-codes -->", _exit_codes())
    return markdown


def _exit_codes() -> str:
    import inspect

    from cutover.errors import ExitCode

    source = inspect.getsource(ExitCode).splitlines()
    notes: dict[str, str] = {}
    pending: list[str] = []
    for line in source:
        text = line.strip()
        if text.startswith("#:"):
            pending.append(text[2:].strip())
        elif "=" in text and text.split("=")[0].strip().isupper():
            notes[text.split("=")[0].strip()] = " ".join(pending)
            pending = []
    rows = ["| code | name | meaning |", "|---|---|---|"]
    rows += [f"| {c.value} | `{c.name}` | {notes.get(c.name) or _MEANING.get(c.name, '')} |" for c in ExitCode]
    return "\n".join(rows) + "\n"


_MEANING = {
    "OK": "done; for a check or gate: passed",
    "ERROR": "an error: a cluster, catalog or storage did not answer or failed (named, with the fix)",
    "USAGE": "the call or the plan is wrong: every problem named with its file, line and key",
    "REFUSED": "a precondition or gate refused: nothing was changed (promote, rollback, complete, cancel, "
               "registry sync)",
    "DIFFERENCES": "a check found differences: verify, registry audit, rights audit, a drill's expectation",
    "INTERRUPTED": "Ctrl-C: stopped cleanly; run the same command again to go on",
}
