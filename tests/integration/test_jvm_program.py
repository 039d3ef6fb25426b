"""jvm.program: a single-file Java program compiled once (real javac and java), reused, compiled again when its
source changes, and run in source mode when it does not compile (Java then says why, as before)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cutover import jvm

HELLO = 'public class Hello { public static void main(String[] a) { System.out.println("%s " + a[0]); } }\n'


def _run(args: list[str], *extra: str) -> str:
    return subprocess.run([jvm.java(), *args, *extra], capture_output=True, text=True, check=True).stdout


def test_a_program_is_compiled_once_and_again_when_its_source_changes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path / "home"))
    source = tmp_path / "Hello.java"
    source.write_text(HELLO % "hello")
    first = jvm.program(source, [])
    assert first[-1] == "Hello" and _run(first, "world") == "hello world\n"
    made = sorted((tmp_path / "home" / "classes").iterdir())
    assert len(made) == 1 and (made[0] / "Hello.class").is_file()
    stamp = (made[0] / "Hello.class").stat().st_mtime_ns
    assert jvm.program(source, []) == first and (made[0] / "Hello.class").stat().st_mtime_ns == stamp
    source.write_text(HELLO % "bye")
    again = jvm.program(source, [])
    assert again != first and _run(again, "world") == "bye world\n"
    assert len([p for p in (tmp_path / "home" / "classes").iterdir() if not p.name.startswith(".")]) == 2


def test_a_program_that_does_not_compile_runs_in_source_mode_and_leaves_nothing(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path / "home"))
    source = tmp_path / "Hello.java"
    source.write_text("public class Hello { not java }\n")
    assert jvm.program(source, []) == ["-cp", "", str(source)]
    assert list((tmp_path / "home" / "classes").iterdir()) == []


def test_a_program_that_names_the_shared_class_gets_it_compiled_in(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The helpers' shared class (cutover/java/Cli.java) is compiled into each program that names it: one
    quoting of JSON strings for every program."""
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path / "home"))
    source = tmp_path / "Quoted.java"
    source.write_text('public class Quoted { public static void main(String[] a) '
                      '{ System.out.println(Cli.quote(a[0])); } }\n')
    args = jvm.program(source, [])
    assert args[-1] == "Quoted" and _run(args, 'a "b"\\c\n') == '"a \\"b\\"\\\\c\\u000a"\n'


def test_a_program_naming_the_shared_class_that_does_not_compile_runs_whole_in_source_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's own error names the program's mistake, not a missing Cli: source mode runs the program with the
    shared class in one file."""
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path / "home"))
    source = tmp_path / "Broken.java"
    source.write_text('public class Broken { public static void main(String[] a) '
                      '{ System.out.println(Cli.quote(a[0])) } }\n')  # the missing ';'
    args = jvm.program(source, [])
    whole = Path(args[-1])
    assert args[:2] == ["-cp", ""] and whole.name == "Broken.java" and whole != source
    assert whole.read_text().startswith(source.read_text().rstrip()) and "final class Cli" in whole.read_text()
    done = subprocess.run([jvm.java(), *args, "x"], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "';' expected" in done.stderr and "cannot find symbol" not in done.stderr


def test_a_properties_file_cutover_writes_reads_back_in_java_as_written(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """jvm.properties_text, the one writer of the Java client properties files (Connect's worker, the Admin API
    programs): PEM text over lines, separators, backslashes and spaces read back by java.util.Properties."""
    monkeypatch.setenv("CUTOVER_HOME", str(tmp_path / "home"))
    props = {"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----\nMIIB\r\n-----END CERTIFICATE-----\n",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
                                 'password="p=w:d\\\\x";',
             "path": "C:\\dir\\file", "spaced": "  leading and trailing  ", "tabbed": "\t\fx", "empty": ""}
    config = tmp_path / "client.properties"
    config.write_text(jvm.properties_text(props))
    source = tmp_path / "Dump.java"
    source.write_text('public class Dump { public static void main(String[] a) throws Exception {\n'
                      '  java.util.Properties p = Cli.properties(a[0]);\n'
                      '  for (String k : new java.util.TreeSet<>(p.stringPropertyNames()))\n'
                      '    System.out.println(Cli.quote(k) + ": " + Cli.quote(p.getProperty(k)));\n'
                      '} }\n')
    out = _run(jvm.program(source, []), str(config))
    import json

    read = json.loads("{" + ", ".join(out.splitlines()) + "}")
    assert read == props  # a value's leading spaces too (Java drops them unless escaped: a password may have them)
