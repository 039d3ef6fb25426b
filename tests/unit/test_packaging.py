"""What the wheel carries and how an installed cutover finds it: the shipped runbooks and quality suites
travel as cutover.runbooks and cutover.checks (scripts/other-python installs the real wheel and runs
the unit suite against it on Python 3.13, in CI)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from cutover import shipped

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["runbooks", "checks"])
def test_every_shipped_file_is_in_the_wheel(kind: str) -> None:
    tool = _setuptools()
    package = f"cutover.{kind}"
    assert package in tool["packages"] and tool["package-dir"][package] == kind  # type: ignore[index,operator]
    patterns = tool["package-data"][package]  # type: ignore[index]
    files = [p.name for p in (ROOT / kind).iterdir() if p.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files), (files, patterns)


def test_every_package_of_the_tree_is_listed() -> None:
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "cutover").rglob("__init__.py")}
    assert found <= set(_setuptools()["packages"])  # type: ignore[arg-type]


def test_an_installed_package_finds_its_own_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages" / "cutover"
    (site / "runbooks").mkdir(parents=True)
    monkeypatch.setattr(shipped, "_HERE", site)
    assert shipped.folder("runbooks") == site / "runbooks"  # no checkout beside it: the wheel's copy
    monkeypatch.setattr(shipped, "_HERE", ROOT / "cutover")
    assert shipped.folder("runbooks") == ROOT / "runbooks"  # a checkout: the repository's folder
