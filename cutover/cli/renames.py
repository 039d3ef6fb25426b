"""Old spellings kept working: one name per concept across the CLI, and the names it had before
rewritten to today's, with one line on stderr saying so, before click parses anything. Kept as
data: a rename is one entry here."""

from __future__ import annotations

import click

#: command path -> {old flag: today's flag}
FLAGS: dict[tuple[str, ...], dict[str, str]] = {
    ("drill", "run"): {"--sandbox": "--dir"},  # the sandbox's folder is --dir everywhere
    ("drill",): {"--sandbox": "--dir"},  # `cutover drill RUNBOOK ...`
    ("local", "start"): {"--on": "--cluster"},  # a side is --cluster old|new
    ("local", "stop"): {"--on": "--cluster"},
    ("init",): {"--table": "--pair"},  # --table filters (verify, shadow); a pair is defined by --pair
    ("jars", "fetch"): {"--sandbox": "--with-sandbox"},  # what else to fetch is --with-...
}
#: old command path -> today's
COMMANDS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("mirror", "sync-groups"): ("offsets", "sync"),  # both group-offset commands live under offsets
}


def rewrite(args: list[str], root: click.Group) -> list[str]:
    """`args` with old command and flag names replaced by today's; a line on stderr for each."""
    path: list[str] = []
    group: click.Command = root
    index = 0
    while index < len(args):
        token = args[index]
        if token.startswith("-"):
            if path:
                break
            index += 1
            continue
        if isinstance(group, click.Group) and token in group.commands:
            path.append(token)
            group = group.commands[token]
            index += 1
            continue
        if tuple(path) == ("mirror",) and token == "sync-groups":  # hidden from the tree now
            path.append(token)
            index += 1
            continue
        break
    out = list(args)
    start = index - len(path)
    new_path = COMMANDS.get(tuple(path))
    if new_path is not None:
        _deprecated(f"cutover {' '.join(path)}", f"cutover {' '.join(new_path)}")
        out[start:index] = list(new_path)
        index = start + len(new_path)
        path = list(new_path)
    renamed = FLAGS.get(tuple(path), {})
    for i in range(index, len(out)):
        flag, eq, value = out[i].partition("=")
        if flag in renamed:
            _deprecated(flag, renamed[flag])
            out[i] = renamed[flag] + eq + value
    return out


def _deprecated(old: str, new: str) -> None:
    click.echo(f"note: {old} is now {new}; the old name still works for now", err=True)
