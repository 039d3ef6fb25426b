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


def test_every_file_a_package_reads_at_run_time_is_in_the_wheel() -> None:
    """Files beside the modules (the Java programs cutover runs in Java's single-file mode, the registry's
    build files) travel only when package-data names them: an installed cutover would not find them."""
    data = _setuptools()["package-data"]
    missing = []
    for path in (ROOT / "cutover").rglob("*"):
        if not path.is_file() or path.suffix in (".py", ".pyc", ".typed") or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT / "cutover")
        owners = [(".".join(("cutover", *rel.parts[:i])), "/".join(rel.parts[i:])) for i in range(len(rel.parts))]
        if not any(fnmatch.fnmatch(name, pat) for pkg, name in owners
                   for pat in data.get(pkg, [])):  # type: ignore[attr-defined]
            missing.append(str(rel))
    assert missing == [], f"not in [tool.setuptools.package-data]: {missing}"
