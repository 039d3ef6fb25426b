"""Charts for the reports: matplotlib figures rendered to inline SVG, with a time axis in UTC, units on
the value axis, and the drill's events (promote, rollback, faults) marked where they happened.

matplotlib is imported when a chart is drawn (not when cutover starts), with its object-oriented API
only (no pyplot: no global state, safe in any thread, no display needed).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from cutover.report.page import Html

Kind = Literal["switch", "fault", "freeze", "expected"]

#: colours that stay apart for the colour-blind (Okabe-Ito), for series
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
_EVENT = {"switch": "#1f2328", "fault": "#cf222e"}
_SPAN = {"freeze": ("#8c959f", 0.25), "expected": ("#bf8700", 0.10)}


@dataclass(frozen=True)
class Event:
    """Something that happened at one moment: drawn as a vertical line with its label."""

    t: float
    label: str
    kind: Kind = "switch"


@dataclass(frozen=True)
class Span:
    """A stretch of time: a freeze window, or a stretch where what the chart shows is expected."""

    start: float
    end: float
    label: str
    kind: Kind = "freeze"


def _when(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _num(t: float) -> float:
    """matplotlib's date number (days since its default epoch, 1970-01-01 UTC) of a Unix time."""
    return t / 86400.0


def _figure(height: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, height), dpi=96, layout="constrained")
    fig.set_facecolor("white")
    return fig


def _time_axis(ax: Any, t0: float, t1: float) -> None:
    from matplotlib import dates

    ax.set_xlim(_when(t0), _when(max(t1, t0 + 1)))
    locator = dates.AutoDateLocator(minticks=4, maxticks=9)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(dates.DateFormatter("%H:%M:%S", tz=UTC))  # type: ignore[no-untyped-call]
    ax.set_xlabel("time (UTC)")
    ax.grid(True, color="#d0d7de", linewidth=0.6)
    ax.set_axisbelow(True)


def _marks(ax: Any, events: Sequence[Event], spans: Sequence[Span]) -> None:
    from matplotlib.transforms import blended_transform_factory

    top = blended_transform_factory(ax.transData, ax.transAxes)
    named: set[str] = set()
    for s in spans:
        color, alpha = _SPAN[s.kind]
        # each kind of stretch is named once, in the legend under the chart
        ax.axvspan(_when(s.start), _when(max(s.end, s.start + 0.2)), color=color, alpha=alpha, linewidth=0,
                   label=None if s.label in named else s.label)
        named.add(s.label)
        if s.kind == "expected":
            ax.text(_num(s.start), 0.97, " expected", transform=top, fontsize=8.5, color="#7d4e00",
                    va="top", ha="left", fontweight="bold")
    for e in events:
        color = _EVENT.get(e.kind, "#1f2328")
        ax.axvline(_when(e.t), color=color, linewidth=1.2, linestyle="--" if e.kind == "fault" else "-")
        ax.text(_num(e.t), 1.01, e.label[:24], transform=top, rotation=30, fontsize=8.5, color=color,
                ha="left", va="bottom")


def _svg(fig: Any, salt: str) -> Html:
    from matplotlib import rc_context

    buf = io.StringIO()
    # text stays text (small, searchable, sharp); ids differ per chart so that several live in one page
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # the page sizes the chart (full width, height from the viewBox), not the figure's points
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 preserveAspectRatio="xMinYMin meet"', svg,
                 count=1)
    return Html(f'<div class="chart scroll" role="img" aria-label="{salt}">{svg}</div>')


def time_series(title: str, unit: str, series: dict[str, list[tuple[float, float]]], t0: float, t1: float,
                events: Sequence[Event] = (), spans: Sequence[Span] = ()) -> Html:
    """Lines over time, one per series, with the value axis in `unit`; empty series say so instead."""
    from matplotlib import ticker

    fig = _figure(3.6)
    ax = fig.add_subplot()
    drawn = 0
    for i, (name, pts) in enumerate(sorted(series.items())):
        if not pts:
            continue
        drawn += 1
        ax.plot([_when(t) for t, _v in pts], [v for _t, v in pts], color=PALETTE[i % len(PALETTE)],
                linewidth=1.8, marker="o", markersize=2.5, label=name)
    _time_axis(ax, t0, t1)
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    if not drawn:
        ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center", va="center", color="#57606a")
    _marks(ax, events, spans)
    if drawn or spans:  # under the chart, clear of the time axis (the layout makes room)
        fig.legend(loc="outside lower left", ncol=2, fontsize=8.5, frameon=False)
    return _svg(fig, title)


@dataclass(frozen=True)
class Bar:
    """One step of a timeline: its label, when it ran, and a colour for its outcome."""

    label: str
    start: float
    end: float
    color: str


def timeline(title: str, bars: Sequence[Bar], t0: float, t1: float, events: Sequence[Event] = (),
             spans: Sequence[Span] = ()) -> Html:
    """One row per step, a bar from its start to its end, on the same time axis as the other charts."""
    fig = _figure(1.2 + 0.24 * max(len(bars), 1))
    ax = fig.add_subplot()
    for i, b in enumerate(bars):
        start, width = _num(b.start), _num(max(b.end - b.start, 0.25))
        ax.broken_barh([(start, width)], (i - 0.38, 0.76), color=b.color)
    ax.set_yticks(range(len(bars)), [b.label for b in bars], fontsize=8)
    ax.set_ylim(len(bars) - 0.5, -0.5)
    _time_axis(ax, t0, t1)
    _marks(ax, events, spans)
    return _svg(fig, title)


def stacked_bars(xlabel: str, unit: str, categories: Sequence[str], series: dict[str, Sequence[float]],
                 colors: dict[str, str]) -> Html:
    """One bar per category (a partition), its parts stacked (missing, extra, ...), counted in `unit`."""
    from matplotlib import ticker

    fig = _figure(2.8)
    ax = fig.add_subplot()
    base = [0.0] * len(categories)
    x = range(len(categories))
    for name, values in series.items():
        if any(values):
            ax.bar(x, values, bottom=base, color=colors.get(name), label=name, width=0.7)
            base = [b + v for b, v in zip(base, values, strict=True)]
    ax.set_xticks(list(x), list(categories), fontsize=8.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(unit)
    ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.grid(True, axis="y", color="#d0d7de", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False)
    return _svg(fig, xlabel + " " + ",".join(series))
