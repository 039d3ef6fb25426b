"""Runbooks as typed data: name, purpose, parameters, ordered steps; validated before anything runs.

A step is exactly one of `action`, `fault`, `manual` or `expect`, with its arguments
under `with`. Parameters are written `{{name}}` anywhere in a step; a value that is
exactly one parameter keeps the parameter's type. Every problem is reported at once,
each with the file, line, step and key at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutover import shipped
from cutover.errors import PlanError
from cutover.plan.schema import Builder
from cutover.plan.source import read_document

KINDS = ("action", "fault", "manual", "expect")
_PARAM = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Parameter:
    default: Any
    description: str = ""


@dataclass(frozen=True)
class StepSpec:
    name: str | None = None
    action: str | None = None
    fault: str | None = None
    manual: str | None = None
    expect: str | None = None
    args: dict[str, Any] = field(default_factory=dict, metadata={"key": "with"})


@dataclass(frozen=True)
class RunbookSpec:
    name: str
    purpose: str
    steps: list[StepSpec]
    parameters: dict[str, Parameter] = field(default_factory=dict)
    version: int = field(default=1, metadata={"check": lambda v: None if v == 1 else
                                              f"runbook version {v} is not supported (this cutover reads 1)"})


@dataclass(frozen=True)
class Step:
    number: int
    name: str
    kind: str
    #: The action, fault or expectation's name ("manual" for instructions).
    op: str
    #: The typed arguments (the op's dataclass), or the instruction text for manual steps.
    args: Any


@dataclass(frozen=True)
class Runbook:
    name: str
    purpose: str
    file: Path
    parameters: dict[str, Any]
    descriptions: dict[str, str]
    steps: list[Step]


class RunbookError(PlanError):
    """A runbook that cannot be used; every problem is listed, and nothing has run."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        if len(problems) > 1:
            self.message = f"{len(problems)} problems in the runbook (nothing was run)"


def _substitute(value: Any, params: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _PARAM.fullmatch(value.strip())
        if whole and whole[1] in params:
            return params[whole[1]]
        return _PARAM.sub(lambda m: str(params.get(m[1], m[0])), value)
    if isinstance(value, list):
        return [_substitute(v, params) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, params) for k, v in value.items()}
    return value


def _unknown_params(value: Any, params: dict[str, Any]) -> set[str]:
    if isinstance(value, str):
        return {m[1] for m in _PARAM.finditer(value) if m[1] not in params}
    if isinstance(value, list):
        return set().union(*(_unknown_params(v, params) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_unknown_params(v, params) for v in value.values())) if value else set()
    return set()


#: The runbooks that come with cutover: `drill show full-migration` finds runbooks/full-migration.yaml.
RUNBOOKS = shipped.folder("runbooks")


def find(file: str | Path) -> Path:
    """A runbook's file: the path given, or a bundled runbook's name (with or without .yaml)."""
    path = Path(file).expanduser().absolute()
    if path.exists() or len(Path(file).parts) != 1:
        return path
    bundled = RUNBOOKS / (Path(file).name if Path(file).suffix in (".yaml", ".yml") else f"{file}.yaml")
    return bundled if bundled.is_file() else path


def load(file: str | Path, overrides: dict[str, str] | None = None) -> Runbook:
    """Read and validate a runbook; raises PlanError (exit 2) listing every problem."""
    from cutover.drill.ops import OPS

    path = find(file)
    doc = read_document(path, "runbook", f"give a runbook file's path, or the name of one in {RUNBOOKS}: "
                                         f"{', '.join(sorted(p.stem for p in RUNBOOKS.glob('*.yaml'))) or 'none'}")
    builder = Builder(doc)
    spec = builder.build(RunbookSpec, doc.data, ())
    problems = list(builder.problems)
    if spec is None:
        raise RunbookError(problems or [f"{path}: not a runbook"])
    params = {k: p.default for k, p in spec.parameters.items()}
    for key, text in (overrides or {}).items():
        if key not in params:
            problems.append(f"--param {key}: the runbook has no such parameter (it has: "
                            f"{', '.join(sorted(params)) or 'none'})")
            continue
        typed = _typed(text, params[key])
        if typed is None:
            problems.append(f"--param {key}={text}: {key} is {_kind(params[key])} (its default is "
                            f"{params[key]!r}) (fix: --param {key}=VALUE with such a value)")
            continue
        params[key] = typed
    steps = []
    for i, s in enumerate(spec.steps):
        where = ("steps", i)
        kinds = [k for k in KINDS if getattr(s, k) is not None]
        label = s.name or ("manual" if kinds == ["manual"] else getattr(s, kinds[0]) if len(kinds) == 1 else
                           f"step {i + 1}")

        def at(path: tuple[Any, ...], i: int = i, label: str = label) -> str:
            loc, _sep, key = doc.where(path).partition(": ")
            return f"{loc}: step {i + 1} ({label}): {key}"

        if len(kinds) != 1:
            problems.append(f"{at(where)}: a step has exactly one of {', '.join(KINDS)}; found "
                            f"{', '.join(kinds) or 'none'}")
            continue
        kind = kinds[0]
        missing = _unknown_params([s.args, s.manual], params)
        if missing:
            problems.append(f"{at(where)}: unknown parameter(s) {', '.join(sorted(missing))} (fix: declare them "
                            "under parameters)")
            continue
        if kind == "manual":
            steps.append(Step(i + 1, label, kind, "manual", _substitute(s.manual, params)))
            continue
        op_name = getattr(s, kind)
        op = OPS.get((kind, op_name))
        if op is None:
            known = sorted(n for k, n in OPS if k == kind)
            problems.append(f"{at((*where, kind))}: unknown {kind} '{op_name}' (fix: one of {', '.join(known)})")
            continue
        args_builder = Builder(doc)
        args = args_builder.build(op.args, _substitute(s.args, params), (*where, "with"))
        given = sorted(k for k in _used_params(s.args) if k in (overrides or {}))
        blame = "".join(f" (from --param {k}={(overrides or {})[k]})" for k in given)
        problems += [p.replace(": ", f": step {i + 1} ({label}): ", 1) + blame for p in args_builder.problems]
        if args is not None:
            steps.append(Step(i + 1, label, kind, op_name, args))
    names = [s.name for s in spec.steps if s.name]
    problems += [f"{path}: step name '{n}' is used twice (fix: names identify steps in reports)"
                 for n in sorted({n for n in names if names.count(n) > 1})]
    if problems:
        raise RunbookError(problems)
    return Runbook(spec.name, spec.purpose, path, params,
                   {k: p.description for k, p in spec.parameters.items()}, steps)


def _typed(text: str, like: Any) -> Any:
    """A --param value, typed like the parameter's default; None when it is not of that type."""
    if isinstance(like, bool):
        return {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}.get(text.lower())
    if isinstance(like, int | float):
        for tp in (int, float):  # a whole number's parameter takes 2.5 too (a rate, a ratio)
            try:
                return tp(text)
            except ValueError:
                pass
        return None
    return text


def _kind(like: Any) -> str:
    return "true or false" if isinstance(like, bool) else "a number" if isinstance(like, int | float) else "text"


def _used_params(value: Any) -> set[str]:
    """The parameters a step's arguments name."""
    return _unknown_params(value, {})
