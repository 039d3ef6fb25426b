"""Every command at a glance, read from the click commands themselves (their options and their help), so the
docs site's command table cannot drift from the CLI: a command added without a row is impossible."""

from __future__ import annotations

from dataclasses import dataclass

import click

#: The flags every command takes; said once above the table, not in every row.
COMMON = ("--debug", "--verbose", "--quiet", "--help")


@dataclass(frozen=True)
class Row:
    #: `cutover mirror status`
    path: str
    #: The command with its arguments and options, `[optional]` ones bracketed.
    synopsis: str
    #: The help's paragraphs up to its examples, on one line.
    summary: str


def rows(root: click.Group | None = None) -> list[Row]:
    """One row per command that runs something: each leaf command, and each group that runs without a
    subcommand (`cutover mirror`), in the order `cutover --help` lists them."""
    from cutover.cli import cli

    group = root if root is not None else cli
    out: list[Row] = []
    _walk(group, "cutover", click.Context(group, info_name="cutover"), out)
    return out


def _walk(group: click.Group, prefix: str, ctx: click.Context, out: list[Row]) -> None:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix} {name}"
        runs_alone = not isinstance(command, click.Group) or command.invoke_without_command
        if runs_alone:
            out.append(Row(path, f"{path} {synopsis(command)}".strip(), summary(command)))
        if isinstance(command, click.Group):
            _walk(command, path, click.Context(command, info_name=name, parent=ctx), out)


def synopsis(command: click.Command) -> str:
    """`--plan FILE [--table T] [-o text|json]`: arguments, then options; those with a default or not required
    in brackets, those taken more than once followed by `...`."""
    parts = [_word(p) for p in command.params if not _common(p)]
    return " ".join(p for p in parts if p)


def _common(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and any(o in COMMON for o in param.opts)


def _word(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        word = (param.metavar or param.name or "ARG").upper()
        return word if param.required else f"[{word}]"
    assert isinstance(param, click.Option)  # click has arguments and options only
    flag = min(param.opts, key=len) if param.is_flag and not param.secondary_opts else max(param.opts, key=len)
    if param.is_flag:
        text = flag if not param.secondary_opts else f"{param.opts[0]}|{param.secondary_opts[0]}"
    else:
        text = f"{flag} {_metavar(param)}"
    if param.multiple:
        text += "..."
    return text if param.required else f"[{text}]"


def _metavar(option: click.Option) -> str:
    if option.metavar:
        return option.metavar
    if isinstance(option.type, click.Choice):
        return "|".join(str(c) for c in option.type.choices)
    name = option.type.name.upper()
    return "N" if name in ("INTEGER", "INTEGER RANGE") else "X" if name in ("FLOAT", "FLOAT RANGE") else name


def summary(command: click.Command) -> str:
    """The help's text before its examples, its paragraphs joined (`\\b` markers and line breaks dropped)."""
    kept: list[str] = []
    for paragraph in (command.help or "").split("\n\n"):
        text = " ".join(line.strip() for line in paragraph.replace("\b", "").splitlines() if line.strip())
        if text.lower().startswith(("example:", "examples:")):
            break
        if text:
            kept.append(text)
    return " ".join(kept)


def markdown() -> str:
    """The command table of the docs' 'Commands at a glance' page."""
    lines = ["| command | what it does |", "|---|---|"]
    for row in rows():
        lines.append(f"| `{row.synopsis}` | {_cell(row.summary)} |")  # a code span keeps its pipes
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
