"""A registry URL that answers, but not as the API's root: named as a usage error (exit 2) whose fix is the
root itself. A real HTTP server on loopback plays the wrong address: no registry is needed to be one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode, RegistryMisplaced
from cutover.registry.client import RegistryClient
from tests.conftest import answering

#: What a Confluent registry (Jetty/Jersey) answers for a path it does not serve, and what a web server does.
ANSWERS = {"confluent-json-404": (404, "application/json", b'{"error_code":404,"message":"HTTP 404 Not Found"}'),
           "html-404": (404, "text/html", b"<html><body>Not Found</body></html>"),
           "json-404-without-a-code": (404, "application/json", b'{"error":"not found"}')}


@pytest.fixture(params=list(ANSWERS))
def wrong_path(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    with answering(*ANSWERS[request.param]) as port:
        yield request.param, port


def test_a_registry_url_whose_path_answers_404_is_misplaced_and_the_fix_is_the_api_root(
        wrong_path: tuple[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _case, port = wrong_path
    url = f"http://127.0.0.1:{port}/schemas-api"
    with pytest.raises(RegistryMisplaced) as info:
        RegistryClient("old", {"url": url}, 3.0).probe()
    assert info.value.exit_code == ExitCode.USAGE
    assert info.value.message.startswith(f"the old schema registry ({url}) is not a schema registry with the "
                                         "Confluent API: GET /subjects answered 404")
    assert info.value.fix == (f"point registry.old.url at the API's root, not /schemas-api: http://127.0.0.1:{port} "
                              f"for Confluent, Karapace or Redpanda, http://127.0.0.1:{port}/apis/ccompat/v7 for "
                              "Apicurio")
    # the command: exit 2 before any cluster is asked (none answers here), with the same fix
    plan = tmp_path / "p.yaml"
    plan.write_text("clusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
                    f"registry:\n  old: {{url: '{url}'}}\n  new: {{url: 'http://127.0.0.1:{port}'}}\n")
    with pytest.raises(SystemExit) as done:
        main(["registry", "sync", "--plan", str(plan), "--dry-run", "--timeout", "3"])
    out, err = capsys.readouterr()
    assert (done.value.code, out) == (ExitCode.USAGE, ""), err
    assert f"fix: point registry.old.url at the API's root, not /schemas-api: http://127.0.0.1:{port} for" in err
    assert "a bug in cutover" not in err and "Traceback" not in err
