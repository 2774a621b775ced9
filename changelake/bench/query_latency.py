"""How long `changelake query` takes for a 1,000-row result, as a user runs it: a new process each
time, from its start to its exit, through the streaming run's Spark Connect server (after the
load, the run still streaming), and then with a Spark session of its own once the run has stopped
(how every query went before the pipeline served them)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping
from typing import TypedDict

from changelake.bench.stats import median
from changelake.exceptions import ChangelakeError

ROWS = 1000
RUNS = 7


class QueryFigures(TypedDict):
    sql: str
    rows: int
    served_s: list[float]  # each query through the running pipeline, in order
    served_p50: float
    local_s: float | None  # one query with its own Spark session (None: not measured)


def sql_for(table: str) -> str:
    return f"SELECT * FROM {table} ORDER BY 1 LIMIT {ROWS}"


def timed_query(env: Mapping[str, str], sql: str) -> tuple[float, int]:
    """Seconds from the command's start to its exit, and the rows its CSV held."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "changelake.cli", "query", sql, "--csv"],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise ChangelakeError(f"bench: `changelake query` failed: {done.stderr.strip()[-500:]}")
    return seconds, max(0, len(done.stdout.splitlines()) - 1)


def served(env: Mapping[str, str], table: str, runs: int = RUNS) -> QueryFigures:
    """`runs` queries while the pipeline serves them."""
    sql = sql_for(table)
    times, rows = [], 0
    for _ in range(runs):
        seconds, rows = timed_query(env, sql)
        times.append(round(seconds, 3))
    return QueryFigures(sql=sql, rows=rows, served_s=times, served_p50=median(times), local_s=None)


def query_section(figures: QueryFigures | None) -> list[str]:
    """The report's markdown about query latency, or nothing for a report without it."""
    if not figures:
        return []
    local = figures["local_s"]
    return [
        "## Query latency",
        f'`changelake query "{figures["sql"]}" --csv` ({figures["rows"]:,} rows), each a new '
        "process timed from its start to its exit: through the streaming run's Spark Connect "
        f"server p50 **{figures['served_p50']:.2f} s** over {len(figures['served_s'])} queries "
        f"({', '.join(f'{s:.2f}' for s in figures['served_s'])} s)"
        + (f"; with a Spark session of its own {local:.1f} s." if local is not None else "."),
    ]
