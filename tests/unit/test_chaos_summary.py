"""What `changelake chaos` reads from verify's report and prints at the end."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from changelake.chaos.faults import KINDS
from changelake.chaos.runner import ChaosSummary, RoundResult, count, resends_asked, samples


def part(rows: int, missing: int = 0, extra: int = 0, differing: int = 0) -> dict[str, Any]:
    lines = [f"differing ({i},): qty: source 1 derived 2" for i in range(differing)]
    return {
        "rows": rows,
        "missing": missing,
        "extra": extra,
        "differing": differing,
        "samples": lines,
    }


REPORT = {
    "equal": False,
    "tables": [
        {"table": "orders", "delta": part(100), "index": None},
        {"table": "products", "delta": part(10, differing=2), "index": part(10, missing=1)},
    ],
}


def test_rows_and_differences_are_summed_over_tables_and_their_indexes() -> None:
    assert count(REPORT, "rows") == 120
    assert count(REPORT, "differences") == 3


def test_samples_name_the_table_and_the_side() -> None:
    assert samples(REPORT) == [
        "products (delta): differing (0,): qty: source 1 derived 2",
        "products (delta): differing (1,): qty: source 1 derived 2",
    ]


def test_the_summary_counts_faults_by_kind_changes_and_differences() -> None:
    rounds = [RoundResult(n, list(KINDS), 100 * n, 250 * n, 30.0, 1000, 0, {}) for n in (1, 2)]
    landed = Counter({"stop-connect-in-bulk": 1, "kill-connect-events": 2})
    summary = ChaosSummary(rounds, Counter({k: 2 for k in KINDS}), 600.0, landed, resends=3)
    d = summary.as_dict()
    faults = 2 * len(KINDS)
    assert (d["faults_total"], d["transactions"], d["row_changes"]) == (faults, 300, 750)
    assert (d["rows_compared"], d["differences"]) == (2000, 0)
    assert d["landed"] == {"stop-connect-in-bulk": 1, "kill-connect-events": 2}
    text = summary.text()
    assert f"chaos: 2 rounds, {faults} faults in 10.0 min" in text
    for kind in KINDS:
        assert f"  {kind:<20}    2" in text
    assert "  stop-connect-in-bulk    2 (1 inside a bulk's COPY)" in text
    assert "  kill-connect-events     2 (2 made Debezium send events again)" in text
    assert "re-sends asked             3 (by the pipeline, with nobody asking)" in text
    assert "differences                0" in text


def test_the_resends_are_counted_from_the_pipelines_log(tmp_path: Path) -> None:
    log = tmp_path / "pipeline.log"
    log.write_text(
        "INFO    orders: batch 3: 12 changes\n"
        "WARNING connector shop-postgres: task 0 resumed inside transaction 7, after event 1 "
        "of LSN 9, where Debezium may skip the rest of that LSN: asked it to re-send the rows "
        "that transaction wrote (orders 20; signal x)\n"
        "WARNING orders: a key update's new row never reached the topic (id=4): Connect stored "
        "its offset between the delete and the create (debezium/dbz#2549); asked shop-postgres "
        "to re-send it (signal y)\n"
    )
    assert resends_asked(log) == 2
    assert resends_asked(tmp_path / "absent.log") == 0
