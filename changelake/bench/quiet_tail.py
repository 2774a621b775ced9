"""What a reader sees when the source goes quiet, and what a served query costs under load.

One more load at the first step's rate while the run streams: `changelake query` is timed through
the run's Spark Connect server during it; then the load stops and nothing follows, and the quiet
tail is the time from then until every base table holds every change (its commits reach the
topic's end: what every reader reads, with no further change to push it);
then the same query is timed with the run idle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from changelake.bench.query_latency import RUNS, sql_for, timed_query
from changelake.bench.stats import median
from changelake.bench.visibility import ends_of, last_offsets

LOAD_S = 60.0  # the load the queries run beside
FIRST_QUERY_S = 10.0  # into the load, once the run's batches carry it
TAIL_DEADLINE_S = 600.0  # past this, the tail is reported as not reached


def in_base_tables(bootstrap: str, tables: Mapping[str, Path]) -> bool:
    """Every base table (by topic) has reached its topic's end (a trailing tombstone aside)."""
    for topic, table in tables.items():
        applied = last_offsets(table)
        if any(applied.get(p, 0) < high - 1 for p, high in ends_of(bootstrap, topic).items()):
            return False
    return True


def measure(
    env: Mapping[str, str],
    bootstrap: str,
    tables: Mapping[str, Path],
    query_table: str,
    load: Callable[[float], Any],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """`load(seconds)` writes the load; `tables` maps each topic to its base table."""
    sql = sql_for(query_table)
    loading = threading.Thread(target=load, args=(LOAD_S,), daemon=True)
    say(f"bench: a served query under load, then the quiet tail ({LOAD_S:.0f} s of load)")
    loading.start()
    time.sleep(FIRST_QUERY_S)  # the load's own start, not a synchronisation
    under_load = []
    for _ in range(RUNS):
        if not loading.is_alive():
            break
        under_load.append(round(timed_query(env, sql)[0], 3))
    loading.join()
    stopped = time.monotonic()
    tail: float | None = None
    while time.monotonic() - stopped < TAIL_DEADLINE_S:
        if in_base_tables(bootstrap, tables):
            tail = time.monotonic() - stopped
            break
        time.sleep(0.5)
    idle = [round(timed_query(env, sql)[0], 3) for _ in range(RUNS)]
    figures = {
        "quiet_tail_s": tail,
        "served_under_load_s": under_load,
        "served_under_load_p50": median(under_load) if under_load else None,
        "served_idle_s": idle,
        "served_idle_p50": median(idle),
    }
    shown = "not reached" if tail is None else f"{tail:.1f} s"
    say(
        f"  quiet tail {shown}; served query p50 {figures['served_under_load_p50']} s under load,"
        f" {figures['served_idle_p50']} s idle"
    )
    return figures


def quiet_section(figures: Mapping[str, Any] | None) -> list[str]:
    """The report's markdown about the quiet tail and served queries under load."""
    if not figures:
        return []
    tail = figures.get("quiet_tail_s")
    loaded, idle = figures.get("served_under_load_s") or [], figures.get("served_idle_s") or []
    return [
        "## A quiet source, and queries under load",
        f"After {LOAD_S:.0f} s of load at the first step's rate stopped, with no change after "
        "it, every base table held the last change (its commits reached its topic's end: what "
        "every reader reads) after "
        + (f"**{tail:.1f} s**." if tail is not None else f"more than {TAIL_DEADLINE_S:.0f} s.")
        + " The same query as above, through the streaming run: p50 "
        + (
            f"**{figures['served_under_load_p50']:.2f} s** under that load "
            f"({', '.join(f'{s:.2f}' for s in loaded)} s), "
            if loaded
            else "(not measured under load), "
        )
        + f"**{figures['served_idle_p50']:.2f} s** idle ({', '.join(f'{s:.2f}' for s in idle)} s).",
    ]
