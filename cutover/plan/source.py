"""Reading a plan file: YAML with line numbers kept, and ${ENV_VAR} interpolation.

The validator reports problems as `plan.yaml:12: tables[0].new: required`, so the
reader keeps, for every key path, the line it came from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cutover.errors import PlanError

PathKey = tuple[str | int, ...]

_ENV_REF = re.compile(r"\$\$|\$\{([^}]*)\}")
#: $NAME, as a shell or compose file would read it: cutover reads ${NAME} only, so it is named.
_BARE_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def render_path(path: PathKey) -> str:
    """`("tables", 0, "new")` -> `tables[0].new`; dotted keys are quoted."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "." in part or not part:
            out += f"[{part!r}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


@dataclass
class Document:
    """A parsed YAML document plus where each key path came from."""

    file: Path
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)
    #: the key paths whose ${VAR} could not be read (unset, malformed): named once, their value not checked
    unresolved: set[PathKey] = field(default_factory=set)

    def where(self, path: PathKey) -> str:
        """`plan.yaml:12: tables[0].new` — the nearest line known for the path."""
        for n in range(len(path), -1, -1):
            line = self.lines.get(path[:n])
            if line is not None:
                return f"{self.file}:{line}: {render_path(path)}"
        return f"{self.file}: {render_path(path)}"


def read_text(file: Path, kind: str = "plan file", missing_fix: str = "check the --plan path") -> str:
    """A UTF-8 text file; a missing, unreadable or non-UTF-8 file is a PlanError naming the file and the place
    (never a byte of it: an env file holds secrets)."""
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        if kind == "plan file" and os.environ.get("CUTOVER_PLAN") and Path(os.environ["CUTOVER_PLAN"]) == file:
            missing_fix = "the path is CUTOVER_PLAN's, from the environment: correct it, or unset it and give --plan"
        raise PlanError([f"{file}: {kind} not found (fix: {missing_fix})"]) from None
    except OSError as exc:
        raise PlanError([f"{file}: cannot read the {kind}: {exc.strerror}"]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise PlanError([f"{file}:{line}:{column}: the {kind} is not UTF-8 text (byte offset {exc.start}: "
                         f"{exc.reason}) (fix: save it as UTF-8, e.g. iconv -f latin1 -t utf-8)"]) from None


def read_document(file: Path, kind: str = "plan file", missing_fix: str = "check the --plan path") -> Document:
    """Parse YAML keeping line numbers. Syntax errors name line and column."""
    text = read_text(file, kind, missing_fix)
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:  # a control character (a NUL byte: a binary file), before any syntax
        raise PlanError([f"{file}: not a YAML text: character {exc.character:#04x} at offset {exc.position} "
                         f"(fix: give the {kind} itself, saved as UTF-8 text; a binary or compressed file cannot "
                         "be read)"]) from None
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else str(file)
        raise PlanError([f"{where}: YAML syntax error: {exc.problem or exc.context}{_yaml_hint(exc, text)}"]) \
            from None
    finally:
        loader.dispose()
    doc = Document(file=file, data=None)
    if node is None:
        if kind == "plan file":
            raise PlanError([f"{file}: the plan file is empty (fix: cutover init --plan {file} writes one from "
                             "your answers; samples/minimal.yaml is the smallest plan)"])
        doc.data = {}
        return doc
    problems: list[str] = []
    doc.data = _to_python(node, (), doc, loader, problems)
    if problems:
        raise PlanError(problems)
    return doc


def _yaml_hint(exc: yaml.MarkedYAMLError, text: str) -> str:
    """The fix for the YAML mistakes people make most."""
    problem = str(exc.problem or "")
    mark = exc.problem_mark
    opened = exc.context_mark
    if "quoted scalar" in str(exc.context or "") and opened is not None:  # reported where the file ends
        return f" (fix: close the quote opened at line {opened.line + 1}, column {opened.column + 1})"
    line = text.splitlines()[mark.line] if mark and mark.line < len(text.splitlines()) else ""
    if "\\t" in problem or "'\\t'" in problem or line[:mark.column + 1].count("\t") if mark else False:
        return " (fix: YAML indents with spaces only; replace the tab)"
    if "alphabetic or numeric character" in problem and "*" in line:
        return " (fix: quote the value: a bare * starts a YAML alias; a pattern is a regex, e.g. \".*\")"
    if "mapping values are not allowed" in problem:
        return " (fix: check the indentation of this line against its parent key, and quote a value holding ': ')"
    if "expected <block end>" in problem:
        return " (fix: check the indentation: this line does not line up with the keys around it)"
    return ""


def _to_python(node: yaml.Node, path: PathKey, doc: Document, loader: yaml.SafeLoader, problems: list[str]) -> Any:
    doc.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        explicit = [k for k, _v in node.value if k.tag != "tag:yaml.org,2002:merge"]
        if len(explicit) < len(node.value):
            loader.flatten_mapping(node)  # YAML merge keys (<<: *anchor): merged pairs first, the node's own win
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(loader.construct_object(key_node))
            child = (*path, key)
            doc.lines[child] = key_node.start_mark.line + 1
            if any(key_node is k for k in explicit):
                if key in seen:
                    problems.append(f"{doc.where(child)}: duplicate key (fix: keep one of them)")
                seen.add(key)
            out[key] = _to_python(value_node, child, doc, loader, problems)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, (*path, i), doc, loader, problems) for i, v in enumerate(node.value)]
    return loader.construct_object(node)


def read_env_file(file: Path) -> dict[str, str]:
    """KEY=VALUE lines (blank lines and # comments ignored), as in docker compose's env_file."""
    values: dict[str, str] = {}
    for n, raw in enumerate(read_text(file, "env file", "create it, or remove env_file").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        if not sep or not _ENV_NAME.fullmatch(key):
            raise PlanError([f"{file}:{n}: expected KEY=VALUE (fix: one variable a line)"])
        values[key] = value.strip().strip("'\"")
    return values


def interpolate(doc: Document, env: Mapping[str, str]) -> list[str]:
    """Replace ${VAR} in every string value, in place. `$$` is a literal `$`.

    Returns the problems found (unset or malformed references), each naming the key.
    """
    problems: list[str] = []

    def sub(value: Any, path: PathKey) -> Any:
        if isinstance(value, dict):
            return {k: sub(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [sub(v, (*path, i)) for i, v in enumerate(value)]
        if not isinstance(value, str) or "$" not in value:
            return value
        before = len(problems)
        out = _resolve(value, path)
        if len(problems) > before:
            doc.unresolved.add(path)
        return out

    def _resolve(value: str, path: PathKey) -> str:
        unclosed = value.replace("$$", "").find("${")
        if unclosed >= 0 and "}" not in value.replace("$$", "")[unclosed:]:
            problems.append(f"{doc.where(path)}: '{value.replace('$$', '')[unclosed:][:40]}' opens a variable "
                            "reference that never closes (fix: ${NAME}, with the closing brace; $$ for a literal $)")
            return value
        bare = _BARE_REF.search(value.replace("$$", ""))
        if bare and "hooks" not in path:  # a hook is a shell command: $NAME is the shell's there
            problems.append(f"{doc.where(path)}: '{bare.group(0)}' is a variable reference without braces, which "
                            f"cutover does not read (fix: ${{{bare.group(1)}}}; $$ for a literal $)")
            return value

        def one(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name = m.group(1)
            if not _ENV_NAME.fullmatch(name):
                problems.append(f"{doc.where(path)}: '${{{name}}}' is not a valid variable reference "
                                "(fix: use ${NAME} with letters, digits and _)")
                return ""
            if name not in env:
                problems.append(f"{doc.where(path)}: environment variable {name} is not set "
                                "(fix: export it, or define it in the plan's env_file)")
                return ""
            return env[name]

        return _ENV_REF.sub(one, value)

    doc.data = sub(doc.data, ())
    return problems
