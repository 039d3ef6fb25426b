"""Each reader kind's fields, as plan validation reads them (plan/model.py's Reader, plan/__init__.py)."""

from __future__ import annotations

import difflib

__all__ = ["READER_FIELDS", "reader_kind_problem"]

#: Each reader kind's own fields (plan validation): those it needs, those it may have, and those it needs when
#: another of its fields has a value. A field of another kind is refused. A new kind adds its entry here (its
#: fields, if new, to plan/model.py's Reader) and its module to readers/translate.py's table.
READER_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], dict[tuple[str, str], tuple[str, ...]]]] = {
    "spark-checkpoint": (("checkpoint",), ("sink",), {}),
    "kafka-streams": (("application_id", "state_dir"), (), {}),
    "flink": (("source_uid", "savepoints"), ("job", "new_source_uid", "start", "group", "reset", "start_file"),
              {("start", "committed"): ("group",)}),
    "connect": (("old_url", "new_url", "connectors"), ("offsets_topic",), {}),
}


def reader_kind_problem(kind: str) -> str | None:
    if kind in READER_FIELDS:
        return None
    close = difflib.get_close_matches(kind, list(READER_FIELDS), n=1)
    return (f"expected one of {', '.join(repr(k) for k in READER_FIELDS)}, found {kind!r} (fix: "
            + (f"did you mean {close[0]!r}?" if close else "write one of them") + ")")
