"""`changelake verify --repair`: ask Debezium to re-send, through the log, the rows verify found
missing or different, then verify again.

The request is Debezium's `execute-snapshot` signal (an incremental snapshot) with an additional
condition per table that selects just those keys, written into the connector's signal table.
Debezium reads them in chunks between watermarks, so a row changed while it is read is sent
from the change, not the read; the pipeline's LSN guard applies them like any other change (a
re-sent row carries the LSN of its chunk's closing watermark, above the stored row's). Nothing
is written to Delta or the index behind the pipeline's back.

What a re-send cannot repair: a derived row whose key the source no longer has (an extra row)
needs a delete, and a snapshot sends none; verify names them and `run --resnapshot` rebuilds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from changelake.capture.connect_offsets import offsets_end
from changelake.capture.resend import Request, send, wait_resent
from changelake.exceptions import ConfigError
from changelake.settings import Settings
from changelake.tables import TableRef, source_of_table
from changelake.verify.command import TableCheck, verify

Out = Callable[[str], None]


def repair(
    requests: Sequence[Request],
    dsn_for: Callable[[TableRef], str],
    bootstrap: str,
    timeout_s: float,
    out: Out,
) -> None:
    """Re-send each connector's requested keys, one signal per connector, and wait for it."""
    by_connector: dict[str, list[Request]] = {}
    for r in requests:
        by_connector.setdefault(r.ref.connector, []).append(r)
    for connector, asked in by_connector.items():
        signal_table = asked[0].ref.signal_table
        if not signal_table:
            raise ConfigError(
                f"connector {connector}: no signal.data.collection, so Debezium cannot be asked "
                "to re-send rows",
                "add a signal table to the connector file (see connectors/shop-postgres.json)",
            )
        dsn = dsn_for(asked[0].ref)
        since = offsets_end(bootstrap)
        signal_id = send(dsn, signal_table, asked)
        said = ", ".join(f"{r.ref.name} ({len(r.keys):,} keys)" for r in asked)
        out(f"repair: asked {connector} to re-send {said} (signal {signal_id})")
        wait_resent(dsn, bootstrap, connector, signal_table, signal_id, since, timeout_s, out)
        out(f"repair: {connector} has re-sent them")


def verify_repairing(
    settings: Settings,
    spark: SparkSession,
    refs: list[TableRef],
    out: Out,
    timeout_s: float,
    step: int,
    passes: int,
) -> list[TableCheck]:
    """Verify; while rows differ (up to `passes` times), re-send them and verify again. A row
    changed at the source meanwhile is fine: the next verify compares it as it is then."""
    checks = verify(settings, spark, refs, out, timeout_s, step)

    def source_dsn(ref: TableRef) -> str:
        return source_of_table(settings, ref).dsn()

    for number in range(1, passes + 1):
        # By name: verify adds a check per view (views.json), which nothing re-sends.
        by_name = {c.table: c for c in checks}
        pairs = [(ref, by_name[ref.name]) for ref in refs if not ref.events]
        requests = [Request(ref, check.key, check.resend) for ref, check in pairs if check.resend]
        for ref, check in pairs:
            if check.delta.extra:
                out(
                    f"{ref.name}: {check.delta.extra:,} extra rows cannot be re-sent (the source "
                    f"has no such keys); `changelake run --resnapshot {ref.name}` rebuilds it"
                )
        if not requests:
            break
        out(f"repair pass {number} of {passes}")
        repair(requests, source_dsn, settings.kafka_bootstrap, timeout_s, out)
        checks = verify(settings, spark, refs, out, timeout_s, step)
    return checks
