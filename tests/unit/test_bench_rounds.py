"""The report's rounds are read from the lines `changelake run` prints, as it prints them."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from changelake import run_log
from changelake.apply.run_report import batch_line
from changelake.apply.run_state import TableJob
from changelake.bench.pipeline_runs import STARTED
from changelake.bench.rounds import round_figures, rounds_section
from changelake.tables import TableRef
from changelake.verify.verified import pass_line, work_line


def line(
    table: str, batch: int, changes: int, seconds: float, jobs: int = 0, **phases: float
) -> str:
    job = TableJob(TableRef("public", table, f"bench.public.{table}", "bench", "slot"))
    stats: dict[str, Any] = {
        "batch": batch,
        "records": changes + 1,
        "changes": changes,
        "seconds": seconds,
        "max_lsn": 123456,
        "jobs": jobs,
        "phases": phases,
    }
    text = batch_line(job, stats)
    assert text is not None
    return text


def test_rounds_phases_and_verification_are_read_back() -> None:
    lines = [
        "changelake run: streaming 4 tables",
        line("orders", 1, 100, 3.0, records=1.0, decode=0.5, append=1.2),
        line("customers", 1, 1_000, 5.0, records=1.0, decode=1.5, append=2.0),
        line("orders", 2, 300, 2.0, records=0.8, decode=0.4, append=0.6),
        # the query restarted (a table joined): its batches are numbered from 0 again
        line("orders", 0, 50, 4.0, records=2.0, decode=0.0, append=1.0),
        pass_line("orders", 64_701, 95.2, 9.3),
        "orders: verification found 2 rows the lake lacks or holds otherwise (e.g. 340, 360); "
        "asked bench to re-send them (signal 1)",
        pass_line("customers", 36_517, 180.0, 11.0),
    ]
    figures = round_figures(lines)
    assert figures is not None
    assert (figures["rounds"], figures["table_batches"]) == (3, 4)
    assert figures["round_s_p50"] == 4.0  # rounds of 5.0 (its slowest table), 2.0 and 4.0 s
    assert figures["changes_p50"] == pytest.approx(200)
    assert figures["phases_p50"] == {"records": 1.0, "decode": 0.5, "append": 1.1}
    assert figures["phase_batches"] == {"records": 4, "decode": 3, "append": 4}  # 0.0: none
    assert (figures["verify_passes"], figures["verify_pass_s_max"]) == (2, 180.0)
    assert (figures["verify_work_s"], figures["verify_resent"]) == (pytest.approx(20.3), 2)
    section = "\n\n".join(rounds_section(figures))
    assert "ran 3 rounds" in section and "| append | 1.10 | 4 |" in section
    assert "completed 2 passes over a table, the longest in 180 s, working 20 s" in section
    # A run that stops says what it did in all, passes complete or not: that counts instead.
    stopped = round_figures([*lines, work_line(31, 150_000, 42.5)])
    assert stopped is not None
    assert (stopped["verify_work_s"], stopped["verify_rows"]) == (42.5, 150_000)
    assert (
        "working 42 s in all (its steps' wall time, an upper bound of its CPU time) to "
        "compare 150,000 rows" in "\n\n".join(rounds_section(stopped))
    )


def test_jobs_per_table_batch_are_read_back_when_the_lines_count_them() -> None:
    counted = [line("orders", 1, 10, 1.0, jobs=6, append=0.5), line("orders", 2, 10, 1.0, jobs=9)]
    figures = round_figures([*counted, line("orders", 3, 10, 1.0, jobs=7, decode=0.2)])
    assert figures is not None and figures["jobs_p50"] == 7
    assert "ran 7 Spark jobs each" in "\n\n".join(rounds_section(figures))
    uncounted = round_figures([line("orders", 1, 10, 1.0, append=0.5)])  # older lines
    assert uncounted is not None and uncounted["jobs_p50"] is None


def test_a_run_without_batches_has_no_rounds() -> None:
    assert round_figures(["changelake run: streaming 4 tables"]) is None
    assert rounds_section(None) == []


def logged(text: str) -> str:
    """A line as `changelake run` logs it: run_log's time and level before the text."""
    record = logging.LogRecord("changelake.run", logging.INFO, __file__, 0, text, None, None)
    return logging.Formatter(run_log.FORMAT, run_log.TIME_FORMAT).format(record)


def test_rounds_are_read_from_the_lines_as_logged() -> None:
    plain = [
        line("orders", 1, 100, 3.0, records=1.0, append=1.2),
        pass_line("orders", 64_701, 95.2, 9.3),
        line("orders", 2, 300, 2.0, records=0.8, append=0.6),
    ]
    figures = round_figures(plain)
    assert figures is not None and figures["verify_passes"] == 1
    assert round_figures([logged(text) for text in plain]) == figures


def test_the_run_s_first_line_is_found_as_logged() -> None:
    """`bench` times a `run --once` from this line (Spark is up): with the log prefix too."""
    first = "changelake run: 4 tables → /lake (Spark local[2])"
    assert STARTED.match(logged(first)) and STARTED.match(first)
    assert not STARTED.match(logged("orders: changelake run: quoted"))
