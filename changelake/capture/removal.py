"""Delete a connector so that applying its file again starts afresh: stopped, its stored offsets
deleted, then removed; its replication slot dropped when asked."""

from __future__ import annotations

import time
from typing import Any

from changelake import pg
from changelake.capture import source_identity
from changelake.capture.connect_api import ConnectApi, quote
from changelake.capture.connectors import Progress, connector_state
from changelake.capture.source import Source, source_of
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings
from changelake.waiting import wait_until


def delete(
    settings: Settings,
    name: str,
    *,
    drop_slot: bool = False,
    progress: Progress = print,
    timeout_s: float = 60.0,
) -> None:
    api = ConnectApi(settings.connect_url)
    config = api.connector_config(name)
    if config is None:
        raise ConfigError(f"no connector named {name!r}", "see `changelake connectors status`")
    # Where its slot is, before anything is deleted: a config that cannot be resolved must not
    # leave a slot behind with no connector left to name it.
    source = source_of(settings, config) if drop_slot and config.get("slot.name") else None
    forget_offsets(api, name, timeout_s)
    api.delete(f"/connectors/{quote(name)}")
    source_identity.remember(settings.run_dir, name, None)
    progress(f"  {name:<20} deleted, with the source offsets Connect stored for it")
    slot = config.get("slot.name")
    if not slot:
        return
    if drop_slot:
        assert source is not None
        drop_replication_slot(source, slot)
        progress(f"  {name:<20} replication slot {slot} dropped")
    else:
        progress(
            f"  note: replication slot {slot!r} still retains WAL for this connector; "
            f"drop it with `changelake connectors delete --drop-slot` next time, or in psql: "
            f"SELECT pg_drop_replication_slot('{slot}');"
        )


def forget_offsets(api: ConnectApi, name: str, timeout_s: float) -> None:
    """Stop the connector, then delete its offsets. Connect keeps a deleted connector's offsets:
    a connector of the same name applied later would resume from them, at a position its
    (dropped, recreated) slot no longer has, and fail instead of taking a snapshot."""
    stop_connector(api, name, timeout_s, "nothing was deleted")
    api.delete(f"/connectors/{quote(name)}/offsets")


def stop_connector(api: ConnectApi, name: str, timeout_s: float, untouched: str) -> None:
    """PUT /connectors/NAME/stop and wait for STOPPED (its offsets may be changed then);
    `untouched`: what the error says was left as it was, if it does not stop."""
    api.put(f"/connectors/{quote(name)}/stop", None)
    now: dict[str, Any] = {}

    def stopped() -> bool:
        now.update(connector_state(api, name))
        return bool(now["connector"] == "STOPPED")

    if not wait_until(stopped, timeout_s, interval_s=0.2):
        raise ChangelakeError(
            f"connector {name} did not stop within {timeout_s:.0f}s (it is "
            f"{now['connector']}); {untouched}",
            "see `changelake connectors status` and logs/connect.log, then try again",
        )


def drop_replication_slot(source: Source, slot: str, timeout_s: float = 30.0) -> None:
    """Drop `slot` once the stopped connector has let go of it (as the connector's user: a
    REPLICATION role may drop slots)."""
    deadline = time.monotonic() + timeout_s
    with pg.connect(source.dsn(), autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            if row is None:
                return
            if not row[0]:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            if time.monotonic() > deadline:
                raise ChangelakeError(
                    f"replication slot {slot} is still in use after {timeout_s:.0f}s"
                )
            time.sleep(0.5)
