"""Build typed dataclasses from plain YAML data, collecting every problem on the way.

One walker serves every section of the plan: the dataclasses are the schema. A field
without a default is required; `field(metadata={"check": fn})` adds a value check that
returns a problem text or None, and `{"each": fn}` one for each item of a list, named by its
index (`topics.include[1]`), so that every bad item is named at once.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from cutover.plan.source import Document, PathKey


class Duration(float):
    """Seconds. Written in the plan as a number of seconds or as '500ms', '10s', '5m', '1h', '2d'."""

    _UNITS: typing.ClassVar[dict[str, float]] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    _FORM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")

    @classmethod
    def parse(cls, value: Any) -> Duration:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int | float):
            if value < 0:  # a wait or an age: never negative
                raise ValueError
            return cls(float(value))
        m = cls._FORM.fullmatch(str(value))
        if not m:
            raise ValueError
        return cls(float(m.group(1)) * cls._UNITS[m.group(2) or "s"])


_TYPE_WORDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false",
               Duration: "a duration like 30s, 5m or 1h"}


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is list:
        return "a list"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a mapping"
    return _TYPE_WORDS.get(tp, getattr(tp, "__name__", str(tp)))


def _fix_for(tp: Any, value: Any) -> str:
    """What to write instead of a value of the wrong type: the close choice, the value as the type wants it."""
    origin = get_origin(tp)
    if origin is Literal:
        choices = [str(a) for a in get_args(tp)]
        close = [c for c in choices if c.lower() == str(value).lower()] or \
            difflib.get_close_matches(str(value), choices, n=1)
        return f"did you mean {close[0]!r}?" if close else "write one of them"
    if origin is list:
        if isinstance(value, dict):
            return "a list: one item a line, each starting with '- ', or [a, b]"
        return f"a list, even of one: [{json.dumps(value)}]"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a mapping: its keys indented under this one, or {key: value, ...}"
    if isinstance(value, str) and tp in (int, float) and re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
        return f"write {value.strip()} without quotes"
    if tp is bool:
        return "true or false, without quotes"
    if tp is Duration:
        return "a number of seconds, or one with its unit: 500ms, 30s, 5m, 1h, 2d"
    return f"write {_describe(tp)}"


def _found(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


class Builder:
    """Walks data against a dataclass schema; problems accumulate in `self.problems`."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.problems: list[str] = []
        #: the fix a field's metadata gives, by the path of its value (for a value of the wrong type)
        self._fixes: dict[PathKey, str] = {}

    def problem(self, path: PathKey, text: str, fix: str | None = None) -> None:
        """One problem at `path`; none for a value a ${VAR} could not fill: the variable is the problem, named
        once where it was read."""
        if path in self.doc.unresolved:
            return
        self.problems.append(f"{self.doc.where(path)}: {text}" + (f" (fix: {fix})" if fix else ""))

    def build(self, tp: Any, value: Any, path: PathKey) -> Any:
        origin = get_origin(tp)
        if origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if value is None:
                return None
            return self.build(args[0], value, path)
        if dataclasses.is_dataclass(tp):
            return self._dataclass(tp, value, path)
        if origin is list:
            if not isinstance(value, list):
                return self._wrong(tp, value, path)
            (item,) = get_args(tp)
            return [self.build(item, v, (*path, i)) for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                return self._wrong(tp, value, path)
            _, item = get_args(tp)
            return {str(k): self.build(item, v, (*path, str(k))) for k, v in value.items()}
        if origin is Literal:
            if value not in get_args(tp):
                return self._wrong(tp, value, path)
            return value
        return self._scalar(tp, value, path)

    def _scalar(self, tp: Any, value: Any, path: PathKey) -> Any:
        if tp is Duration:
            try:
                return Duration.parse(value)
            except ValueError:
                return self._wrong(tp, value, path)
        if tp is bool:
            return value if isinstance(value, bool) else self._wrong(tp, value, path)
        if tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
            return value if ok else self._wrong(tp, value, path)
        if tp is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return float(value) if ok else self._wrong(tp, value, path)
        if tp is str:
            # Client properties are often written unquoted (acks: 1); keep them as text.
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                return str(value)
            if isinstance(value, bool):
                return "true" if value else "false"
            return self._wrong(tp, value, path)
        if tp is Any:
            return value
        raise TypeError(f"schema type {tp!r} is not supported")

    def _wrong(self, tp: Any, value: Any, path: PathKey) -> None:
        self.problem(path, f"expected {_describe(tp)}, found {_found(value)}",
                     self._fixes.get(path) or _fix_for(tp, value))
        return None

    def _check(self, f: dataclasses.Field[Any], built: Any, path: PathKey) -> None:
        """The field's value checks: of the whole value, and of each item."""
        check, each = f.metadata.get("check"), f.metadata.get("each")
        found = [(path, check(built))] if check is not None else []
        found += [((*path, i), each(item)) for i, item in enumerate(built)] if each is not None else []
        for where, text in found:
            if text:
                self.problem(where, text)

    def _dataclass(self, cls: Any, value: Any, path: PathKey) -> Any:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            return self._wrong(cls, value, path)
        hints = typing.get_type_hints(cls)
        # metadata {"key": ...} names a field whose YAML key is not a Python name (e.g. "with")
        fields = {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls) if f.init}
        for key in value:
            if not path and key.startswith("x-"):
                continue  # an extension key (as in compose files): a home for YAML anchors, ignored
            if key not in fields:
                close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'?" if close else "known keys: " + ", ".join(sorted(fields))
                self.problem((*path, key), "unknown key", hint)
        kwargs: dict[str, Any] = {}
        for name, f in fields.items():
            child = (*path, name)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if name in value and value[name] is None and getattr(hints[f.name], "__name__", "") == "Selection":
                self.problem(child, f"is empty, which would select every {name.rstrip('s')}",
                             "give include (and exclude) patterns, or remove the key to select everything")
                continue
            if name not in value or value[name] is None:
                if required:
                    self.problem(child, "required", f.metadata.get("fix") or f"add {name}: ...")
                continue
            if f.metadata.get("fix"):
                self._fixes[child] = f.metadata["fix"]
            built = self.build(hints[f.name], value[name], child)
            if built is None:
                continue
            self._check(f, built, child)
            kwargs[f.name] = built
        try:
            return cls(**kwargs)
        except TypeError:
            # A required field was missing: already reported above.
            return None
