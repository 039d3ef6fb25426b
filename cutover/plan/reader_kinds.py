"""The table of reader kinds: for each, the module that implements it (a readers.kind.ReaderKind, imported when
first asked) and its fields as plan validation reads them (plan/model.py's Reader, plan/__init__.py). A new kind
is its module in cutover/readers/ and its entry here (and its fields on Reader, if it has new ones)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["READER_KINDS", "KindEntry", "reader_kind_problem"]


@dataclass(frozen=True)
class KindEntry:
    #: The module that implements the kind (cutover.readers.kind.ReaderKind), by name: plan validation needs its
    #: fields without importing it, and readers.translate.kind imports it when first asked.
    module: str
    #: The fields it needs.
    needs: tuple[str, ...]
    #: The fields it may have. A field of another kind is refused.
    may: tuple[str, ...] = ()
    #: The fields it needs when another of its fields has a value: (field, value) -> fields.
    needs_when: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


READER_KINDS: dict[str, KindEntry] = {
    "spark-checkpoint": KindEntry("cutover.readers.spark", ("checkpoint",), ("sink",)),
    "kafka-streams": KindEntry("cutover.readers.streams", ("application_id", "state_dir")),
    "flink": KindEntry("cutover.readers.flink", ("source_uid", "savepoints"),
                       ("job", "new_source_uid", "start", "group", "reset", "start_file"),
                       {("start", "committed"): ("group",)}),
    "connect": KindEntry("cutover.readers.connect", ("old_url", "new_url", "connectors"), ("offsets_topic",)),
}


def reader_kind_problem(kind: str) -> str | None:
    if kind in READER_KINDS:
        return None
    close = difflib.get_close_matches(kind, list(READER_KINDS), n=1)
    return (f"expected one of {', '.join(repr(k) for k in READER_KINDS)}, found {kind!r} (fix: "
            + (f"did you mean {close[0]!r}?" if close else "write one of them") + ")")
