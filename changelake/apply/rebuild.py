"""`changelake connectors rebuild NAME`: the lake made equal to a source restored from a backup or
replaced by another server, in one command. The connector's tables are written down to be made
again (every run honours that, see table_start), capture starts again from nothing
(capture/rebuild.py), then a `run --once` makes each table again from its new topic: dropped and
snapshotted, with its history and index. A running pipeline is refused: it would go on applying
the old topics while they are deleted."""

from __future__ import annotations

from collections.abc import Callable

from changelake import run_log, tables
from changelake.apply import resync, run_command
from changelake.apply.pipeline_file import pipeline_state
from changelake.apply.run import Out
from changelake.apply.run_options import RunOptions
from changelake.capture import rebuild
from changelake.capture.connectors import ConnectorFile
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings

# Debezium's modes that snapshot a connector with no stored offset and then stream.
SNAPSHOTTING = ("initial", "always", "when_needed")


def check(settings: Settings, name: str) -> tuple[ConnectorFile, list[tables.TableRef]]:
    """The connector's file and tables; refuses, having changed nothing, what would stop a
    rebuild."""
    state, _ = pipeline_state(settings)
    if state["running"]:
        raise ChangelakeError(
            f"`changelake run` is running (pid {state['pid']}): nothing was changed",
            "stop it first (it would go on applying the topics the rebuild deletes)",
        )
    cf = rebuild.connector_file(settings, name)  # applied again: it must be there, and snapshot
    mode = cf.config.get("snapshot.mode", "initial")
    if mode not in SNAPSHOTTING:
        raise ConfigError(
            f"{cf.path}: snapshot.mode {mode!r} takes no snapshot and streams: nothing was changed",
            f"a rebuild needs one of {', '.join(SNAPSHOTTING)} (the default is initial)",
        )
    refs = [r for r in tables.captured(settings) if r.connector == name]
    if not refs:
        raise ConfigError(f"connector {name} captures no table: nothing to rebuild")
    return cf, refs


def question(name: str, refs: list[tables.TableRef]) -> str:
    """What the person confirms: what goes, and for event tables what cannot come back."""
    asked = f"delete {name}'s slot and topics and make {', '.join(r.name for r in refs)} again"
    if events := [r.name for r in refs if r.events]:
        asked += (
            f" (event tables {', '.join(events)} keep their events until now beside them, as"
            " `<table>.before-rebuild-<time>`: the source holds only the rows it still has)"
        )
    return asked


def rebuild_lake(
    settings: Settings, name: str, confirm: Callable[[str], None], out: Out = run_log.say
) -> int:
    """Capture again, then every table of the connector made again; the run's exit code.
    `confirm(question)` raises to go no further; asked once nothing refuses the rebuild."""
    cf, refs = check(settings, name)
    confirm(question(name, refs))
    run_log.configure()  # its lines before the run's, timestamped like them
    out(f"rebuilding {name}: capture from nothing, then {len(refs)} tables made again")
    rebuild.mark(settings.run_dir, [r.name for r in refs])  # before anything is removed
    resync.abandon(settings.run_dir, name)  # one begun for the database before is moot
    rebuild.recapture(settings, cf, [r.topic for r in refs], out)
    return run_command.run(settings, refs, RunOptions(once=True), out)
