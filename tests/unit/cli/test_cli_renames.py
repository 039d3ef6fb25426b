"""Old spellings still work, rewritten to today's names with a note on stderr (cutover/cli/renames.py)."""

from __future__ import annotations

import pytest

from cutover.cli import cli
from cutover.cli.renames import COMMANDS, FLAGS, rewrite


@pytest.mark.parametrize(("old", "new"), [
    (["drill", "full-migration", "--plan", "p", "--sandbox", "/s"], ["drill", "full-migration", "--plan", "p",
                                                                      "--dir", "/s"]),
    (["drill", "run", "x", "--sandbox=/s"], ["drill", "run", "x", "--dir=/s"]),
    (["--debug", "local", "start", "connect", "--on", "new"], ["--debug", "local", "start", "connect", "--cluster",
                                                               "new"]),
    (["init", "--table", "t=a.b:c.d"], ["init", "--pair", "t=a.b:c.d"]),
    (["jars", "fetch", "--sandbox"], ["jars", "fetch", "--with-sandbox"]),
    (["mirror", "sync-groups", "--plan", "p", "--reverse"], ["offsets", "sync", "--plan", "p", "--reverse"]),
    (["verify", "--plan", "p", "--table", "orders"], ["verify", "--plan", "p", "--table", "orders"]),  # a filter
])
def test_old_names_become_todays_with_a_note(old: list[str], new: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert rewrite(old, cli) == new
    err = capsys.readouterr().err
    assert (old == new) == (err == ""), err
    if old != new:
        assert "is now" in err and "the old name still works" in err


def test_every_new_name_exists_and_no_old_name_is_shown() -> None:
    def command(path: tuple[str, ...]) -> object:
        target = cli
        for part in path:
            target = target.commands[part]  # type: ignore[attr-defined]
        return target

    for path, flags in FLAGS.items():
        target = command(path if path != ("drill",) else ("drill", "run"))
        opts = {o for p in target.params for o in getattr(p, "opts", [])}  # type: ignore[attr-defined]
        for old, new in flags.items():
            assert new in opts and old not in opts, (path, old, new)
    for old_path, new_path in COMMANDS.items():
        command(new_path)
        assert old_path[-1] not in command(old_path[:-1]).commands  # type: ignore[attr-defined]
