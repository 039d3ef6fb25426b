"""`cutover status --watch`: the migration live in the terminal, a line each for the switch, the mirrors,
the shadow's tables, the readers and the last verify, red where something is wrong (rich's Live display
on a terminal; a frame per interval otherwise, for a log)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cutover.errors import CutoverError
from cutover.plan import Plan

Line = tuple[str, str, bool]  # part, what it says, whether it is wrong


def lines(plan: Plan, timeout: float) -> list[Line]:
    from cutover.switch import status

    s = status.status(plan, timeout)
    out: list[Line] = []
    steps = s.get("steps") or []
    failed = [st for st in steps if st["outcome"] == "failed"]
    last = steps[-1] if steps else None
    frozen = (s.get("freeze_window") or {}).get("seconds")
    out.append(("switch", f"{s['phase']}" + (f", {s['action']} cycle {s['cycle']}" if s.get("action") else "")
                + (f", running ({s['running']})" if s.get("running") else "")
                + (f", last step {last['name']}: {last['outcome']}" if last else "")
                + (f", freeze window {frozen:.1f}s" if frozen is not None else ""), bool(failed)))
    for d in ("forward", "reverse"):
        m = s["mirror"][d]
        if m is None:
            continue
        if "error" in m:
            out.append((f"mirror {d}", m["error"], True))
            continue
        out.append((f"mirror {d}", f"lag {m['lag']:,} records, {m['partitions_behind']}/{m['partitions']} partitions "
                    f"behind" + (f", {m['gaps']} DATA LOSS gap(s)" if m["gaps"] else "")
                    + (f" ({m['role']})" if m.get("role") else ""), bool(m["gaps"])))
    out += _shadow(plan, timeout)
    readers = s.get("readers")
    if isinstance(readers, dict):
        out.append(("readers", str(readers.get("error")), True))
    else:
        for r in readers or []:
            where = f"on {r['on']}" if r.get("on") else "not moved yet"
            out.append((f"reader {r['reader']}", f"{r['kind']}, {where}", False))
    verify = s.get("verify") or {}
    if "error" in verify:
        out.append(("verify", str(verify["error"]), True))
    else:
        for table, v in verify.items():
            out.append((f"verify {table}", "never verified" if v is None else
                        f"{'passed' if v['passed'] else 'FAILED'} at {v['at']}", v is not None and not v["passed"]))
    out += [("problem", p, True) for p in s.get("problems") or []]
    return out


def _shadow(plan: Plan, timeout: float) -> list[Line]:
    if not plan.spec.tables:
        return []
    from cutover.shadow import status

    try:
        s = status.status(plan, timeout=timeout)
    except CutoverError as exc:
        return [("shadow", exc.message, True)]
    return [(f"shadow {t.table}", "not created yet" if not t.exists else
             f"lag {t.lag:,} records, last commit {t.last_commit or '-'}, {t.dead_letters:,} dead letter(s)",
             t.exists and t.other_cluster) for t in s.tables]


def render(found: list[Line], at: float) -> Table:
    table = Table(title=f"cutover status at {time.strftime('%H:%M:%S', time.localtime(at))}", title_justify="left",
                  show_header=False, box=None, pad_edge=False)
    table.add_column("part", style="bold", no_wrap=True)
    table.add_column("state")
    for part, text, wrong in found:
        table.add_row(Text(part, style="bold red" if wrong else "bold"), Text(text, style="red" if wrong else ""))
    return table


def watch(plan: Plan, interval: float, timeout: float, stopped: Callable[[float], bool],
          console: Console | None = None) -> None:
    """Show the status every `interval` seconds until `stopped(interval)` (which waits) says so."""
    console = console or Console()

    def frame() -> Any:
        try:
            return render(lines(plan, timeout), time.time())
        except CutoverError as exc:
            return Text(f"status: {exc.message}", style="red")

    if not console.is_terminal:  # a log: one frame after another
        while True:
            console.print(frame())
            console.print()
            if stopped(interval):
                return
    with Live(frame(), console=console, refresh_per_second=2, transient=False) as live:
        while not stopped(interval):
            live.update(frame())
