"""The run's HTTP endpoint (changelake/apply/endpoint.py): /metrics for Prometheus beside
/served, which lists the run's views and has those a query names brought up to date first,
and never says the token. (A real query through it: tests/integration/test_added_table.py.)"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from changelake.apply import endpoint
from changelake.apply.metrics import RunMetrics
from changelake.settings import load_settings
from tests.support import free_port


class Views:
    """What the endpoint needs of the run's ServedViews."""

    def __init__(self) -> None:
        self.asked: list[list[str] | None] = []

    def listing(self) -> dict[str, object]:
        return {"port": 15099, "views": ["orders"], "fresh": 1.5}

    def ask(self, views: list[str] | None) -> dict[str, object]:
        self.asked.append(views)
        return {**self.listing(), "fresh": 2.5}


@pytest.fixture
def served() -> Iterator[tuple[str, dict[str, Any]]]:
    port, holder, said = free_port(), {"views": None}, []
    server = endpoint.serve(
        load_settings({}),
        port,
        RunMetrics({}, dict, dict),
        lambda: holder["views"],
        said.append,
    )
    assert server is not None, said
    try:
        yield f"http://127.0.0.1:{port}", holder
    finally:
        server.shutdown()


def _get(url: str, body: bytes | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=10) as got:
            return got.status, got.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def test_served_lists_views_and_brings_those_asked_for_up_to_date(
    served: tuple[str, dict[str, Any]],
) -> None:
    url, holder = served
    assert _get(f"{url}/served")[0] == 404  # a run that serves no queries
    holder["views"] = views = Views()
    status, listed = _get(f"{url}/served")
    assert (status, json.loads(listed)) == (200, {"port": 15099, "views": ["orders"], "fresh": 1.5})
    status, answered = _get(f"{url}/served", json.dumps({"views": ["orders", 7]}).encode())
    assert (status, json.loads(answered)["fresh"]) == (200, 2.5)
    assert views.asked == [["orders", "7"]]
    assert "token" not in listed + answered  # what the endpoint says never holds the token
    assert _get(f"{url}/served", b"{not json")[0] == 400
    assert views.asked == [["orders", "7"]]  # a bad request asks for nothing
    status, text = _get(f"{url}/metrics")
    assert status == 200 and "changelake_metrics_scrape_errors_total 0.0" in text
