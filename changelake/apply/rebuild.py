"""`changelake connectors rebuild NAME`: the lake made equal to a source restored from a backup or
replaced by another server, in one command. Capture starts again from nothing
(capture/rebuild.py), then a `run --once` makes each of the connector's tables again from the new
snapshot: dropped and snapshotted from its new topic, with its history and index. A running
pipeline is refused: it would go on applying the old topics while they are deleted."""

from __future__ import annotations

from collections.abc import Callable

from changelake import run_log, tables
from changelake.apply import resync, run_command
from changelake.apply.pipeline_file import pipeline_state
from changelake.apply.run import Out
from changelake.apply.run_options import RunOptions
from changelake.capture import rebuild
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings


def check(settings: Settings, name: str) -> list[tables.TableRef]:
    """The connector's tables; refuses, having changed nothing, what would stop a rebuild."""
    state, _ = pipeline_state(settings)
    if state["running"]:
        raise ChangelakeError(
            f"`changelake run` is running (pid {state['pid']}): nothing was changed",
            "stop it first (it would go on applying the topics the rebuild deletes)",
        )
    rebuild.connector_file(settings, name)  # its file is applied again: it must be there
    refs = [r for r in tables.captured(settings) if r.connector == name]
    if not refs:
        raise ConfigError(f"connector {name} captures no table: nothing to rebuild")
    return refs


def rebuild_lake(
    settings: Settings, name: str, confirm: Callable[[], None], out: Out = run_log.say
) -> int:
    """Capture again, then every table of the connector made again; the run's exit code.
    `confirm` raises to go no further; asked once nothing refuses the rebuild."""
    refs = check(settings, name)
    confirm()
    run_log.configure()  # its lines before the run's, timestamped like them
    out(f"rebuilding {name}: capture from nothing, then {len(refs)} tables made again")
    rebuild.recapture(
        settings, rebuild.connector_file(settings, name), [r.topic for r in refs], out
    )
    resync.abandon(settings.run_dir, name)  # one begun for the database before is moot
    names = tuple(r.name for r in refs)
    return run_command.run(settings, refs, RunOptions(once=True, resnapshot=names), out)
