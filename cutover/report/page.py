"""The parts of an HTML report page: escaping, the headline numbers, tables, and the page itself.

A report is read at a glance, often on a phone at 3 a.m.: the verdict and the numbers that
matter come first, tables scroll sideways on a narrow screen instead of squeezing, and
nothing a person reads is JSON.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Tone = Literal["ok", "bad", "warn", "info"]

CSS = """
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:1.2em;max-width:1180px;
color:#1f2328}
h1{font-size:1.6em;margin:.2em 0 .4em}h2{font-size:1.25em;margin:1.6em 0 .5em;border-bottom:1px solid #d0d7de}
h3{font-size:1.05em;margin:1.2em 0 .4em}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}.warn{color:#9a6700;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:.6em;margin:1em 0}
.card{border:1px solid #d0d7de;border-left:5px solid #8c959f;border-radius:6px;padding:.5em .7em}
.card.t-ok{border-left-color:#1a7f37}.card.t-bad{border-left-color:#cf222e}.card.t-warn{border-left-color:#bf8700}
.card.t-bad b{color:#cf222e}
.card b{display:block;font-size:1.55em;line-height:1.2;color:#1f2328}
.card span{display:block;font-size:.85em;color:#57606a;font-weight:400}
.scroll{overflow-x:auto;max-width:100%;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;margin:.4em 0 1.2em;font-size:.9em}
td,th{border-bottom:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;white-space:nowrap}td{overflow-wrap:break-word}td.w{min-width:11em}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;overflow-wrap:normal}
.chart svg{display:block;width:100%;min-width:560px;height:auto}
.note{color:#57606a;font-size:.9em}.failed{color:#cf222e;font-weight:600}
code{background:#f6f8fa;padding:0 3px;border-radius:3px;word-break:break-all}
@media (max-width:640px){body{padding:.7em;font-size:14px}td,th{padding:3px 5px;white-space:nowrap}
td.w{white-space:normal;min-width:14em}.chart svg{min-width:520px}.cards{grid-template-columns:1fr 1fr}
.card b{font-size:1.3em}}
"""


class Html(str):
    """Text that is already HTML: tables put it in as it is (everything else is escaped)."""


def esc(value: Any) -> str:
    """A value as text a person reads, escaped: None as an empty cell, numbers with thousands separators,
    lists joined with commas, anything else (a dict) as compact key: value pairs, never JSON."""
    if isinstance(value, Html):
        return value
    return html.escape(plain(value))


def plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):  # every digit: two values that differ must not print the same
        return repr(value)
    if isinstance(value, list | tuple):
        return ", ".join(plain(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: " + (f"({plain(v)})" if isinstance(v, dict) else plain(v))
                         for k, v in value.items() if v is not None)
    return str(value)


def verdict(ok: bool, yes: str = "PASSED", no: str = "FAILED") -> Html:
    return Html(f'<span class="ok">{yes}</span>' if ok else f'<span class="bad">{no}</span>')


@dataclass(frozen=True)
class Card:
    """One headline number: the number, what it counts, and whether it is good news."""

    value: str
    label: str
    tone: Tone = "info"
    note: str = ""


def cards(items: Iterable[Card]) -> Html:
    return Html('<div class="cards">' + "".join(
        f'<div class="card t-{c.tone}"><b>{html.escape(c.value)}</b>{html.escape(c.label)}'
        + (f"<span>{html.escape(c.note)}</span>" if c.note else "") + "</div>" for c in items) + "</div>")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = (),
          wrap: Iterable[int] = ()) -> Html:
    """A table that scrolls sideways on a narrow screen; cells are escaped unless they are `Html`. The columns
    in `numeric` align right; on a phone only the columns in `wrap` (long text) wrap, the others keep a line."""
    kinds = {**{i: " class=w" for i in wrap}, **{i: " class=n" for i in numeric}}
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td{kinds.get(i, '')}>{esc(c)}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return Html(f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>')


def page(title: str, body: Iterable[str]) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
