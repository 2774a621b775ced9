"""What the run's continuous verification has done per table (verify/continuous.py writes
it; `status` shows it): kept in `verified.json` in the run directory."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from changelake import jsonfile


def state_file(run_dir: Path) -> Path:
    return run_dir / "verified.json"


def verified(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per table: `verified_at` (time.time of its last full pass), `rows` (compared in it),
    `resent` (keys re-sent since the file began), `resent_at`, `unrepaired` (keys a re-send
    cannot mend: extra in the lake, or still different after one)."""
    try:
        doc = jsonfile.read(state_file(run_dir))
    except Exception:  # none yet, or unreadable: nothing verified that we know of
        return {}
    return doc if isinstance(doc, dict) else {}


def record(
    run_dir: Path,
    table: str,
    verified_at: float | None = None,
    rows: int | None = None,
    resent: int = 0,
    unrepaired: int = 0,
) -> None:
    """Add a finished pass, re-sent keys or unmendable ones to `table`'s entry."""
    doc = verified(run_dir)
    entry = doc.setdefault(table, {"resent": 0, "unrepaired": 0})
    if verified_at is not None:
        entry |= {"verified_at": verified_at, "rows": rows}
    if resent:
        entry |= {"resent": int(entry.get("resent", 0)) + resent, "resent_at": time.time()}
    if unrepaired:
        entry["unrepaired"] = int(entry.get("unrepaired", 0)) + unrepaired
    jsonfile.write_atomically(state_file(run_dir), doc)


def pass_line(table: str, rows: int, seconds: float, work_s: float) -> str:
    """The run's log line for a complete pass (the bench reads it back)."""
    return (
        f"{table}: verified {rows:,} rows against the source in a pass of {seconds:.0f}s "
        f"({work_s:.1f}s of work)"
    )


# pass_line's text, read back (the bench)
PASSED = re.compile(
    r"(?P<table>\S+): verified (?P<rows>[\d,]+) rows against the source in a pass of "
    r"(?P<seconds>\d+)s \((?P<work>[\d.]+)s of work\)"
)

# work_line's text, read back (the bench): rows compared, work seconds
WORKED = re.compile(
    r"verification: [\d,]+ steps compared (?P<rows>[\d,]+) rows in (?P<work>[\d.]+)s of work"
)


def work_line(steps: int, rows: int, work_s: float) -> str:
    """The run's log line when its verification stops: what it did over the whole run, passes
    complete or not (the bench reads it back)."""
    return f"verification: {steps:,} steps compared {rows:,} rows in {work_s:.1f}s of work this run"
