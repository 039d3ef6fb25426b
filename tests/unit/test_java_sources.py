"""cutover's Java helpers live in one folder and share one class: no program keeps its own copy of what
cutover/java/Cli.java does (no JVM started)."""

from __future__ import annotations

import re

from cutover import jvm


def test_every_java_source_of_cutover_is_in_the_one_folder() -> None:
    package = jvm.JAVA_SOURCES.parent
    outside = [str(p.relative_to(package)) for p in package.rglob("*.java")
               if jvm.JAVA_SOURCES not in p.parents]
    assert outside == []


def test_only_the_shared_class_quotes_json_or_reads_a_properties_file() -> None:
    programs = {p.name: p.read_text() for p in jvm.JAVA_SOURCES.glob("*.java") if p != jvm.SHARED_SOURCE}
    assert {"Producers.java", "ClientQuotas.java", "FlinkSavepoint.java"} <= set(programs)
    own = {name for name, text in programs.items()
           if re.search(r"static String quote\(|new Properties\(\)|\.replace\(\"\\\\\"", text)}
    assert own == set()


def test_a_program_that_names_the_shared_class_gets_it_after_its_own_source() -> None:
    text = "public class P { void f() { Cli.quote(\"x\"); } }\n"
    whole = jvm._with_shared(text)
    assert whole.startswith(text.rstrip()) and whole.endswith(jvm.SHARED_SOURCE.read_text())
    assert jvm._with_shared("public class P {}\n") == "public class P {}\n"
    shared = jvm.SHARED_SOURCE.read_text()
    assert jvm._with_shared(shared) == shared
