"""Every runbook step a runbook can name, read from the drill's step registry (`ops.OPS`): its kind,
its name, what it does and its arguments (types, defaults and the `#:` comments above each), so the
docs site's runbook reference cannot drift from the code."""

from __future__ import annotations

import dataclasses
import sys
import typing

from cutover.drill.ops import OPS, Op
from cutover.plan.reference import comments_of, default_of, type_name


def says(o: Op) -> str:
    """What the step does, in the words the drill prints (its arguments' defaults filled in where it has them)."""
    hints = typing.get_type_hints(o.args, vars(sys.modules[o.args.__module__]))
    required = {f.name: (typing.get_args(hints[f.name])[0] if typing.get_origin(hints[f.name]) is typing.Literal
                         else f"<{f.name}>") for f in dataclasses.fields(o.args)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    try:
        return o.says(o.args(**required))
    except (TypeError, ValueError, KeyError):  # says reads a required argument as a number: the docstring
        return " ".join((o.run.__doc__ or "").split())


def arguments(o: Op) -> list[tuple[str, str, str, str]]:
    """(name, type, default, meaning) of each argument."""
    hints = typing.get_type_hints(o.args, vars(sys.modules[o.args.__module__]))
    notes = comments_of(o.args)
    return [(f.name, type_name(hints[f.name]), default_of(f), notes.get(f.name, ""))
            for f in dataclasses.fields(o.args)]


def markdown() -> str:
    out = []
    for kind in ("action", "fault", "expect"):
        out.append(f"### {kind} steps\n")
        out.append("| step | what it does | arguments (`with:`) |")
        out.append("|---|---|---|")
        for (k, name), o in sorted(OPS.items()):
            if k != kind:
                continue
            args = "<br>".join(f"`{n}` ({t}; {d or 'see meaning'}): {m}".replace("|", "&#124;")
                               for n, t, d, m in arguments(o)) or "none"
            injected = " (through the fault injector: a manual instruction on real clusters)" if o.injected else ""
            out.append(f"| `{kind}: {name}` | {says(o).replace('|', '&#124;')}{injected} | {args} |")
        out.append("")
    return "\n".join(out)

