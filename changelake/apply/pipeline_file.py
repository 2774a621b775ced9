"""The run's state file, `<run dir>/pipeline.json`: its pid, views file and
each table's state. The run writes it at every change of a table's state; `status`, `verify` and
a container's healthcheck read it, believing it only while the pid it names runs."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from changelake import jsonfile
from changelake.capture.capture_health import Stall
from changelake.settings import Settings

PIPELINE_FILE = "pipeline.json"


class TableState(StrEnum):
    """A table's state in a run (its value is what the state file and `status` show)."""

    PENDING = "pending"  # not started: its topic is looked at first
    SNAPSHOTTING = "snapshotting"
    WAITING = "waiting"  # its topic has no events yet
    READY = "ready"  # snapshotted, its stream about to start
    RUNNING = "running"
    FAILED = "failed"  # retried after a delay
    DONE = "done"  # a --once run applied everything there was
    STOPPED = "stopped"  # an error a person must act on
    STOPPED_BY_REQUEST = "stopped by request"  # the run itself was stopped
    # Shown, never a job's own state: its connector captures nothing (capture/capture_health),
    # so however well its stream runs, no change reaches it.
    STALLED = "stalled"


# States in which a table applies nothing: stopped until a person acts, or failed and waiting
# for its retry.
STOPPED_STATES = (TableState.STOPPED, TableState.FAILED)


class Stated(Protocol):
    """A table in a run (`run_state.TableJob`), as the file shows it."""

    state: TableState
    error: str | None


def write_state(
    path: Path,
    started: str,
    jobs: Mapping[str, Stated],
    views_file: Path,
    ended: bool = False,
    stalled: Mapping[str, Stall] | None = None,
) -> None:
    """The run's state for `status`; `ended`: the run is over (no pid: a process that ran it
    in-process and lives on is not a running pipeline); `views_file`: the views.json it
    maintains views from (verify names it when a view lags); `stalled`: per table whose
    connector captures nothing, why."""
    doc = {
        "pid": None if ended else os.getpid(),
        "started": started,
        "views_file": str(views_file.resolve()),  # read by verify, maybe from elsewhere
        "tables": {n: shown_state(j, (stalled or {}).get(n)) for n, j in jobs.items()},
    }
    jsonfile.write_atomically(path, doc)


def shown_state(job: Stated, stall: Stall | None) -> dict[str, str | None]:
    """A table's state and error as the file shows them: `stalled`, its capture's reason the
    error, while its connector captures nothing, unless it stopped or failed on its own."""
    if stall is not None and job.state not in STOPPED_STATES:
        return {"state": str(TableState.STALLED), "error": stall.sentence}
    return {"state": str(job.state), "error": job.error}


def pipeline_state(settings: Settings) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The pipeline's pid and per-table states, from pipeline.json if its process is alive.

    The file outlives a crashed or killed pipeline, so it is believed only while its pid runs.
    """
    doc = _read_json(settings.run_dir / PIPELINE_FILE)
    pid = doc.get("pid") if isinstance(doc, dict) else None
    if not isinstance(pid, int) or not _alive(pid):
        return {"running": False, "pid": None, "started": None}, {}
    states = {
        str(name): {"state": str(t.get("state", "unknown")), "error": t.get("error")}
        for name, t in (doc.get("tables") or {}).items()
        if isinstance(t, dict)
    }
    return {
        "running": True,
        "pid": pid,
        "started": doc.get("started"),
        "views_file": doc.get("views_file"),
    }, states


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or caught half-written
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but belongs to another user
        return True
    return True
