"""verify names why an aggregate lags its tables (issue 41): no run, a run started with another
views file, or a run still catching up. The running pipeline's views file comes from its state
(pipeline.json, `pipeline_file.pipeline_state`)."""

from __future__ import annotations

import json
from pathlib import Path

from changelake.views.checks import why_not_maintained


def _views(path: Path, names: list[str]) -> Path:
    doc = {"views": {n: {"kind": "history", "table": "orders"} for n in names}}
    path.write_text(json.dumps(doc))
    return path


def test_the_cause_of_a_lagging_view_is_named(tmp_path: Path) -> None:
    assert "no `changelake run` is running" in why_not_maintained("per_day", {"running": False})
    other = _views(tmp_path / "other.json", ["orders_history"])
    said = why_not_maintained("per_day", {"running": True, "pid": 42, "views_file": str(other)})
    assert said == (
        f"the running pipeline (pid 42) reads its views from {other}, which does not declare "
        "per_day: restart `changelake run` with the views file that does"
    )
    same = _views(tmp_path / "views.json", ["per_day"])
    said = why_not_maintained("per_day", {"running": True, "pid": 42, "views_file": str(same)})
    assert said == "the running pipeline (pid 42) maintains it and has not caught up yet"
    # A run from before the file was recorded: nothing known against it.
    assert "has not caught up" in why_not_maintained("per_day", {"running": True, "pid": 42})
