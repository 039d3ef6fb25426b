"""Every error a user can meet prints `error: ...` and then `fix: ...` (docs/reference/exit-codes.md): read from the
code itself, so a new error without its fix fails here rather than reaching a user. Each place that makes a
cutover error must pass `fix=`, or its class must supply one, or it is listed below with the reason it never
reaches a user without one."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import cutover
from cutover.errors import CutoverError, PlanError

PACKAGE = Path(cutover.__file__).parent

#: (file under cutover/, class) -> why that error needs no fix of its own.
WITHOUT_FIX = {
    ("lake/tables.py", "Conflict"): "a lost compare-and-set, retried by the table layer; past its retries the "
                                    "shadow and the switch turn it into their own error with a fix",
    ("drill/", "ExpectationFailed"): "a drill step's failure: recorded in the drill report beside the step; the "
                                     "drill's own exit (DrillFailed) names the report",
    ("drill/", "CutoverError"): "as above: a drill step, fault or sink check that failed, in the report",
    ("observe/exporter.py", "CutoverError"): "a probe's failure inside a snapshot: served as the part's up=0 and "
                                             "logged, never the command's error",
    ("local/broker.py", "PortInUse"): "caught by the sandbox, which starts the server again on another port",
}


def _listed(file: str, name: str) -> tuple[str, str] | None:
    """The WITHOUT_FIX entry for an error made in `file`: its own, or its folder's (a key ending in /)."""
    for where, cls in WITHOUT_FIX:
        if cls == name and (file == where or (where.endswith("/") and file.startswith(where))):
            return where, cls
    return None


def _error_classes() -> dict[str, type[CutoverError]]:
    for module in pkgutil.walk_packages(cutover.__path__, "cutover."):
        importlib.import_module(module.name)
    found: dict[str, type[CutoverError]] = {}
    todo: list[type[CutoverError]] = [CutoverError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def _supplies_fix(cls: type[CutoverError]) -> bool:
    """A class whose own __init__ passes a fix (RegistryError, StepFailed...), or whose problems carry theirs
    inline (PlanError: `(fix: ...)` in each problem, checked by the plan's tests)."""
    if issubclass(cls, PlanError):
        return True
    init = cls.__dict__.get("__init__")
    return init is not None and "fix=" in inspect.getsource(init)


def _unfixed() -> list[tuple[str, int, str]]:
    classes = _error_classes()
    out = []
    for file in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(file.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) and getattr(func.value, "id", "") != "click" else None
            cls = classes.get(name or "")
            if cls is None or _supplies_fix(cls) or any(k.arg in ("fix", None) for k in node.keywords):
                continue
            out.append((file.relative_to(PACKAGE).as_posix(), node.lineno, cls.__name__))
    return out


def test_every_error_a_user_can_meet_carries_its_fix() -> None:
    missing = [f"cutover/{f}:{line}: {name}" for f, line, name in _unfixed() if _listed(f, name) is None]
    assert missing == []


def test_the_list_of_errors_without_a_fix_has_no_stale_entry() -> None:
    used = {_listed(f, name) for f, _line, name in _unfixed()}
    assert set(WITHOUT_FIX) - used == set()
