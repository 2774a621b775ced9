"""The running pipeline's answer to a column that appears at the source with values in rows no
change has touched since: Postgres writes no change for them, so nothing reaches the topic.

`ALTER TABLE … ADD COLUMN … DEFAULT` gives every existing row the default without rewriting it
(or rewrites it, for a volatile default, still without a change event); `RENAME COLUMN` moves a
column's values to a new name. The lake learns of the new column from the next change that
carries it, adds it, and would leave it NULL in every other row. So when a batch adds columns to
a table that has rows, this asks Debezium to re-send every row in which one of them is not NULL
(an incremental snapshot through the signal table, `changelake.capture.resend`): they arrive
through the log and the LSN guard applies them. A plain `ADD COLUMN` without a default matches
only the rows written since, which re-sends little. The old name of a renamed column stays in
the lake, as a dropped column does, with the values it last had.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg
from confluent_kafka import KafkaException
from psycopg import sql

from changelake import run_log
from changelake.capture.connect_offsets import offsets_end
from changelake.capture.resend import Asked, send
from changelake.exceptions import RetryableError
from changelake.tables import TableRef

Out = Callable[[str], None]


@dataclass(frozen=True)
class Filled:
    """Rows of one table in which any of `columns` holds a value."""

    ref: TableRef
    columns: tuple[str, ...]

    def condition(self, runs: int) -> sql.Composable:
        held = [sql.SQL("{} IS NOT NULL").format(sql.Identifier(c)) for c in self.columns]
        return sql.SQL("({})").format(sql.SQL(" OR ").join(held))


class AddedColumns:
    def __init__(
        self, ref: TableRef, dsn: Callable[[], str], out: Out, bootstrap: str, asked: list[Asked]
    ) -> None:
        """`asked`: where each re-send asked is noted (a `run --once` waits for them)."""
        self.ref, self.dsn, self.out, self.bootstrap, self.asked = ref, dsn, out, bootstrap, asked

    def resend(self, columns: Sequence[str]) -> None:
        """Ask for the rows holding a value in any of the added `columns` (before the lake's
        table gains them: a batch that fails after is retried and asks again, harmlessly)."""
        name, said = self.ref.name, ", ".join(columns)
        if not self.ref.signal_table:
            self.out(
                run_log.warning(
                    f"{name}: columns {said} were added at the source; rows no change has "
                    "touched since hold NULL in them here, and cannot be re-sent: its connector "
                    f"has no signal.data.collection (`changelake run --resnapshot {name}`)"
                )
            )
            return
        wanted = Filled(self.ref, tuple(columns))
        try:
            dsn = self.dsn()
            if not _any_row(dsn, wanted):  # Debezium would send nothing, and say nothing
                return
            since = offsets_end(self.bootstrap)
            signal_id = send(dsn, self.ref.signal_table, [wanted])
        except (psycopg.Error, KafkaException) as exc:  # Postgres or Kafka away: tried again
            raise RetryableError(f"{name}: could not ask to re-send its rows: {exc}") from exc
        self.asked.append(
            Asked(self.ref.connector, dsn, str(self.ref.signal_table), signal_id, since)
        )
        self.out(
            run_log.warning(
                f"{name}: columns {said} were added at the source, where rows no change has "
                "touched since hold values the topic never carried (a DEFAULT, a RENAME); "
                f"asked {self.ref.connector} to re-send the rows that hold any (signal "
                f"{signal_id}): the stream applies them as they come"
            )
        )


def _any_row(dsn: str, wanted: Filled) -> bool:
    """Whether any row holds a value in the added columns: a re-send that matches none opens no
    snapshot window, so there would be nothing to wait for (`run --once` waits on windows)."""
    table = sql.Identifier(wanted.ref.schema, wanted.ref.table)
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE {})").format(table, wanted.condition(1))
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        row = conn.execute(query).fetchone()
    return bool(row and row[0])
