"""What `plan check` finds that a later command would refuse: each a finding with its fix.

Pure: given the plan and what the clusters hold (or nothing, offline), the list of findings.
`plan check` is not ready while any is left; its exit code says so (3).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cutover.plan.model import Plan, Selection

#: What the include list is when a plan does not say: everything (not a finding if it is empty).
_EVERYTHING = [".*"]


@dataclass(frozen=True)
class Finding:
    #: The part of the plan: topics, groups, hooks, catalog.
    check: str
    problem: str
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def offline(plan: Plan, readers: Sequence[tuple[str, str, str]] = (), tables: bool = True) -> list[Finding]:
    """What can be found without connecting: the hooks, a SQLite catalog's file, table topics the selection
    leaves out (unless `tables` is False: the old cluster answered, and `online` says more of them), and
    `readers`, the problems of the declared readers (the caller reads them: `readers.translate.positions`)."""
    missing = sqlite_missing(plan)
    return [*hook_findings(plan), *([missing] if missing else []), *(table_topics(plan) if tables else []),
            *(Finding("readers", problem, fix) for _name, problem, fix in readers)]


def table_topics(plan: Plan, old_topics: list[str] | None = None) -> list[Finding]:
    """Table pairs whose topic the mirror never copies: one the old cluster lacks (when its topics are known),
    or one the plan's topic selection leaves out. A missing topic is named as missing, not as unselected:
    selecting it would not help."""
    found = []
    for i, t in enumerate(plan.spec.tables):
        if old_topics is not None and t.topic not in old_topics:
            import difflib

            close = difflib.get_close_matches(t.topic, old_topics, n=1)
            found.append(Finding("tables", f"tables[{i}].topic {t.topic} does not exist on the old cluster "
                                 f"({len(old_topics)} topics there): the shadow would find no record of it",
                                 "correct the table pair's topic" + (f" (did you mean {close[0]}?)" if close else "")
                                 + ", or create the topic on the old cluster first"))
        elif not plan.spec.topics.matches(t.topic):
            found.append(_unselected(plan.spec.topics, i, t.topic))
    return found


def _unselected(sel: Selection, i: int, topic: str) -> Finding:
    """A table's topic the selection leaves out: by the exclude pattern that does, else by no include."""
    never = "the mirror never copies it, so the shadow finds nothing of it on the new cluster"
    if any(re.fullmatch(p, topic) for p in sel.include):
        n, pattern = next((n, p) for n, p in enumerate(sel.exclude) if re.fullmatch(p, topic))
        return Finding("tables", f"tables[{i}].topic {topic} is left out by topics.exclude[{n}] {pattern!r}: {never}",
                       f"narrow topics.exclude[{n}] so that it leaves {topic} in, or correct the table pair's topic")
    return Finding("tables", f"tables[{i}].topic {topic} is not in the plan's topic selection (topics.include / "
                   f"exclude): {never}", f"select {topic} in topics.include, or correct the table pair's topic")


def absent_tables(plan: Plan, held: list[dict[str, Any]]) -> list[Finding]:
    """Old tables the catalog does not hold (`held`: plan check's catalog.tables). The new table is the shadow's
    to create; the old one is the existing pipeline's, which verify compares with and promote hands over."""
    absent = {t["table"] for t in held if t["role"] == "old" and not t["exists"]}
    return [Finding("tables", f"tables[{i}].old {p.old} does not exist in the catalog: verify compares the new table "
                    "with it and promote hands it over",
                    "name the existing pipeline's table as the catalog lists it (plan check -o json: catalog.tables), "
                    "or let its pipeline create it first")
            for i, p in enumerate(plan.spec.tables) if p.old in absent]


def online(plan: Plan, old_topics: list[str] | None, old_groups: list[str] | None) -> list[Finding]:
    """What the old cluster's topics and groups say (None: the cluster did not answer)."""
    found: list[Finding] = []
    if old_topics is not None:
        found += _patterns(plan.spec.topics, old_topics, "topics", "topic", always=True)
        found += table_topics(plan, old_topics)
    if old_groups is not None:
        found += _patterns(plan.spec.groups, old_groups, "groups", "consumer group", always=False)
    return found


#: What each side's principal does to the selected topics (the forward mirror reads old and
#: writes new; the reverse mirror, started at promote, writes old). Creating topics on new and
#: writing with transactional ids cannot be asked without trying: not checked here.
_OLD_READS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
_NEW_WRITES = ("WRITE", "DESCRIBE")


def rights(plan: Plan, side: str, principal: str, topics: dict[str, frozenset[str] | None]) -> list[Finding]:
    """Operations the side's principal lacks on the selected topics (None: the broker did not say)."""
    needs: list[tuple[str, str, str]] = []  # (operation, who needs it, what breaks)
    if side == "old":
        needs += [(op, "the mirror", "it reads the topics, their configs and the groups' offsets") for op in _OLD_READS]
        if plan.spec.switch.reverse_mirror:
            needs.append(("WRITE", "the reverse mirror (started at promote)",
                          "rollback carries the records written on the new cluster back there"))
    else:
        needs += [(op, "the mirror", "it writes the copies, in transactions") for op in _NEW_WRITES]
    found = []
    for op, who, why in needs:
        lacking = sorted(t for t, ops in topics.items() if ops is not None and op not in ops)
        if not lacking:
            continue
        shown = ", ".join(lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
        fix = f"grant {op} on the selected topics to {principal} on the {side} cluster"
        if op == "WRITE" and side == "old":
            fix += (", or set switch.reverse_mirror: false (a read-only principal is enough then, but rollback "
                    "cannot carry back what was written on the new cluster)")
        found.append(Finding("rights", f"{principal} on the {side} cluster may not {op} {shown}: {who} needs it "
                             f"({why})", fix))
    return found


def _patterns(sel: Selection, names: list[str], key: str, kind: str, always: bool) -> list[Finding]:
    """An include pattern that matches nothing on the old cluster; and (topics) an empty selection."""
    found = []
    explicit = sel.include != _EVERYTHING
    if explicit:
        for i, pattern in enumerate(sel.include):
            if not any(re.fullmatch(pattern, n) for n in names):
                near = sorted(n for n in names if re.search(pattern, n))[:3]
                found.append(Finding(key, f"{key}.include[{i}] {pattern!r} matches no {kind} on the old cluster "
                                     f"({len(names)} there)",
                                     "patterns are regular expressions that must match the whole name"
                                     + (f" (it matches part of {', '.join(near)}: write {pattern}.* or the full "
                                        "name)" if near else "; list them with `cutover plan check -o json` ("
                                        f"{key}_total) or kafka-topics / kafka-consumer-groups --list")))
    selected = sel.select(names)
    if always and not selected and (not explicit or not found):
        found.append(Finding(key, f"the plan selects no {kind} on the old cluster ({len(names)} there, "
                             f"{len(sel.exclude)} exclude pattern(s))",
                             f"fix {key}.include / {key}.exclude so that they select what is to move"))
    return found


def hook_findings(plan: Plan) -> list[Finding]:
    found = []
    for event, line in sorted(plan.spec.hooks.items()):
        argv = shlex.split(line) if line.strip() else []
        if not argv:
            continue
        program = argv[0]
        if "/" in program:
            path = Path(program) if os.path.isabs(program) else (plan.base_dir / program).resolve()
            if path.is_dir():
                found.append(Finding("hooks", f"hooks.{event}: {path} is a folder, not a script",
                                     f"give the script in it, e.g. {path}/{event}.sh"))
            elif not path.is_file():
                found.append(Finding("hooks", f"hooks.{event}: {path} does not exist",
                                     "create the script, or fix the path (a relative path is from the plan's "
                                     f"folder, {plan.base_dir})"))
            elif not os.access(path, os.X_OK):
                found.append(Finding("hooks", f"hooks.{event}: {path} is not executable",
                                     f"chmod +x {path}"))
        elif shutil.which(program) is None:
            found.append(Finding("hooks", f"hooks.{event}: the command {program!r} is not on PATH",
                                 "install it, or give its path (a relative path is from the plan's folder)"))
    return found


def sqlite_missing(plan: Plan) -> Finding | None:
    """A SQLite catalog whose file does not exist (opening it would create an empty catalog)."""
    cat = plan.spec.catalog
    if cat is None or not urlsplit(cat.uri).scheme.startswith("sqlite"):
        return None
    path = sqlite_path(cat.uri)
    if path is None or path.is_file():
        return None
    return Finding("catalog", f"catalog.uri {cat.uri}: the SQLite file {path} does not exist (plan check does "
                    "not create it)",
                    "point catalog.uri at the catalog's existing file (sqlite:////absolute/path.db); a new "
                    "catalog is created by the first shadow run, or by `cutover local up` for the sandbox")


def sqlite_path(uri: str) -> Path | None:
    """The file of a SQLAlchemy SQLite URL (sqlite:///relative, sqlite:////absolute); None in memory."""
    rest = uri.split("://", 1)[1] if "://" in uri else ""
    path = unquote(rest[1:].split("?", 1)[0]) if rest.startswith("/") else ""
    if not path or path == ":memory:":
        return None
    return Path(path)
