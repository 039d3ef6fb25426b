"""The package's floors hold: every import of a cutover module (at the top of a file or inside a function) goes to
a room on the same floor or below, and no two rooms import each other, directly or round a circle. A room is a
package under cutover/ (plan, kafka, ...) or a module at its top (cutover.jvm, ...). A new room needs a floor here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import cutover

# The package as imported (the source tree here, site-packages where the suite runs against a wheel).
PACKAGE = Path(cutover.__file__).parent

#: Lowest first. A room may import its own floor's rooms (without a circle) and every floor below.
FLOORS: list[set[str]] = [
    {"cutover", "cutover.common", "cutover.errors", "cutover.secrets", "cutover.output", "cutover.jvm",
     "cutover.interrupt", "cutover.process", "cutover.shipped", "report"},  # the foundation
    {"plan"},
    {"kafka", "lake"},
    {"registry", "rights"},
    {"mirror"},
    {"shadow", "readers", "verify"},
    {"switch", "assess", "local", "observe"},
    {"drill"},
    {"cli", "cutover.__main__"},
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}

Edge = tuple[str, str, str, str]  # from room, to room, importing module, imported module


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "cutover"
    return parts[1] if (PACKAGE / parts[1]).is_dir() else f"cutover.{parts[1]}"


def _resolved(name: str) -> str | None:
    """The module a dotted name imports (`cutover.kafka.clients.admin` is cutover.kafka.clients)."""
    while name:
        path = PACKAGE.parent / name.replace(".", "/")
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return name
        name = name.rpartition(".")[0]
    return None


def module_imports() -> list[Edge]:
    """Every import of one cutover module by another, wherever it is in the file (from-imports of a package's
    names resolved to the module that holds them)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                target = _resolved(name) if name == "cutover" or name.startswith("cutover.") else None
                if target is not None and target != module and not module.startswith(f"{target}."):
                    found.append((module, target, module, name))
    return found


def imports() -> list[Edge]:
    """Every import of a cutover module from another room."""
    return [(room(a), room(b), m, n) for a, b, m, n in module_imports() if room(a) != room(b)]


def upward(edges: list[Edge]) -> list[str]:
    return [f"{m} imports {n}: {b} (floor {FLOOR[b]}) is above {a} (floor {FLOOR[a]})"
            for a, b, m, n in edges if FLOOR[b] > FLOOR[a]]


def circles(edges: list[Edge]) -> list[list[str]]:
    """The rooms that reach themselves through others, each group sorted (Tarjan's strongly connected groups)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _m, _n in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_room_has_a_floor() -> None:
    rooms = {room(_module(p)) for p in PACKAGE.rglob("*.py")}
    assert sorted(rooms - set(FLOOR)) == [], "give each new room a floor in FLOORS"
    assert sorted(set(FLOOR) - rooms) == [], "a room in FLOORS no longer exists"


def test_no_import_goes_up_a_floor_and_no_rooms_import_each_other() -> None:
    edges = imports()
    assert len(edges) > 300  # the walk sees the imports inside functions too
    assert upward(edges) == []
    assert circles(edges) == []


def test_no_modules_import_each_other() -> None:
    """Within a room too: a module that imports another which imports it back (was: shadow.decode's loader
    table reached into shadow.framed, built on decode's types: the loader is shadow/decoders.py now)."""
    assert circles(module_imports()) == []


def test_the_checks_find_an_upward_import_and_a_circle() -> None:
    """The three imports that held ten rooms in one circle before they moved (2026-12-03)."""
    before = [("plan", "readers", "cutover.plan.readiness", "cutover.readers.translate"),
              ("kafka", "shadow", "cutover.kafka.java_admin", "cutover.shadow.source"),
              ("readers", "switch", "cutover.readers.journal", "cutover.switch"),
              ("shadow", "kafka", "cutover.shadow.job", "cutover.kafka"),
              ("readers", "plan", "cutover.readers.translate", "cutover.plan")]
    assert upward(before) == [
        "cutover.plan.readiness imports cutover.readers.translate: readers (floor 5) is above plan (floor 1)",
        "cutover.kafka.java_admin imports cutover.shadow.source: shadow (floor 5) is above kafka (floor 2)",
        "cutover.readers.journal imports cutover.switch: switch (floor 6) is above readers (floor 5)"]
    assert sorted(circles(before)) == [["kafka", "shadow"], ["plan", "readers"]]
