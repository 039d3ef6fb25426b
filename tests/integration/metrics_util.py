"""Read what a cutover part serves on its metrics port, parsed by prometheus-client's own text parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Series = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Series:
    """{sample name: [(labels, value)]} of http://127.0.0.1:PORT/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def value(served: Series, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    found = [v for have, v in served.get(name, []) if labels.items() <= have.items()]
    assert len(found) == 1, (name, labels, served.get(name))
    return found[0]
