"""Every plan key, read from the plan's dataclasses themselves (their types, defaults and the
`#:` comments above each field), so the docs site's plan reference cannot drift from the code."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from cutover.plan import model


@dataclass(frozen=True)
class Key:
    path: str
    type: str
    default: str
    doc: str


def keys() -> list[Key]:
    """Every key; its meaning from the `#:` comment above its field, else what its fix says, else
    (a section) its class's docstring."""
    out: list[Key] = []
    _walk(model.PlanSpec, "", out)
    return out


def _walk(cls: Any, prefix: str, out: list[Key]) -> None:
    hints = typing.get_type_hints(cls, vars(model))
    comments = comments_of(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        tp = hints[f.name]
        inner = _dataclass_in(tp)
        doc = comments.get(f.name, "") or str(f.metadata.get("fix", "")) or \
            (" ".join((inner.__doc__ or "").split()) if inner is not None else "")
        out.append(Key(path, type_name(tp), default_of(f), doc))
        if inner is not None:
            _walk(inner, f"{path}[]." if get_origin(tp) is list else f"{path}.", out)


def _dataclass_in(tp: Any) -> Any:
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in get_args(tp):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp) if a is not type(None))
    if origin is Literal:
        return " | ".join(str(a) for a in get_args(tp))
    if origin is list:
        return f"list of {type_name(get_args(tp)[0])}"
    if origin is dict:
        return f"map of {type_name(get_args(tp)[0])} to {type_name(get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, getattr(tp, "__name__", str(tp)))


def default_of(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return "(none)" if f.default is None else str(f.default)
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return "" if dataclasses.is_dataclass(value) else str(value)
    return "required"


def comments_of(cls: Any) -> dict[str, str]:
    """field name -> the `#:` comment lines right above it in the class body."""
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines()[1:]:
        text = line.strip()
        if text.startswith("#:"):
            pending.append(text[2:].strip())
        elif ":" in text and text.split(":", 1)[0].isidentifier() and line.startswith("    ") \
                and not line.startswith("     "):
            if pending:
                out[text.split(":", 1)[0]] = " ".join(pending)
            pending = []
        elif text and not text.startswith("#"):
            pending = []
    return out


def markdown() -> str:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for k in keys():
        cell = k.doc.replace("|", "\\|")
        rows.append(f"| `{k.path}` | {k.type.replace('|', '&#124;')} | {k.default.replace('|', '&#124;')} | {cell} |")
    return "\n".join(rows) + "\n"


def json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of the plan, for editors: every key with its type, its
    choices and its meaning. `${VAR}` strings are allowed wherever a value is (they are replaced
    when the plan loads); `cutover plan check` stays the judge."""
    schema = _schema_of(model.PlanSpec)
    schema.update({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "cutover migration plan"})
    return schema


def _schema_of(tp: Any, doc: str = "") -> dict[str, Any]:
    from cutover.plan.schema import Duration

    origin = get_origin(tp)
    out: dict[str, Any]
    if origin in (Union, types.UnionType):
        options = [_schema_of(a) for a in get_args(tp) if a is not type(None)]
        out = options[0] if len(options) == 1 else {"anyOf": options}
        if type(None) in get_args(tp):
            out = {"anyOf": [out, {"type": "null"}]}
    elif origin is Literal:
        out = {"enum": list(get_args(tp))}
    elif origin is list:
        out = {"type": "array", "items": _schema_of(get_args(tp)[0])}
    elif origin is dict:
        out = {"type": "object", "additionalProperties": _schema_of(get_args(tp)[1])}
    elif dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp, vars(model))
        comments = comments_of(tp)
        props = {f.name: _schema_of(hints[f.name], comments.get(f.name, "") or str(f.metadata.get("fix", "")))
                 for f in dataclasses.fields(tp)}
        required = [f.name for f in dataclasses.fields(tp)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        doc = doc or " ".join((tp.__doc__ or "").split())
    elif tp is Duration:
        out = {"type": ["number", "string"], "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*$"}
    else:
        out = {"type": {str: "string", int: "integer", float: "number", bool: "boolean"}[tp]}
    if doc:
        out = {**out, "description": doc}
    return out
